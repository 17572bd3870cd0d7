/* Host unit tests of the VIA protocol manager against the fake VIA block. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fake_card.h"
#include "fake_via.h"
#include "numavia/via.h"
#include "numavia/via_bench.h"
#include "numavia/via_post.h"
#include "numavia_regs.h"
#include "numavia_via.h"

static struct nv_via via;
#define DESC_AREA (FAKE_HOST_BASE + 0xE000) /* the descriptor area VIs are created with */

static void setup(void)
{
    fake_card_reset(0);
    fake_via_reset();
    fake.cycles_per_read = 100; /* 1 us per look at the clock */
    CHECK(nv_via_init(&via, 0, 100000000u) == NV_OK);
}

static uint64_t field(const uint32_t *words, unsigned offset, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)((words[(offset + i) / 4] >> (8 * ((offset + i) % 4))) & 0xff) << (8 * i);
    return v;
}
#define L1(words, name) field(words, NV_ATT_L1_##name##_OFFSET, NV_ATT_L1_##name##_BYTES)
#define MSG(words, name) field(words, NV_MGMT_MESSAGE_##name##_OFFSET, NV_MGMT_MESSAGE_##name##_BYTES)

static void put(uint32_t *words, unsigned offset, unsigned bytes, uint64_t value)
{
    for (unsigned i = 0; i < bytes; i++) {
        unsigned at = offset + i;
        words[at / 4] = (words[at / 4] & ~(0xffu << (8 * (at % 4)))) | (uint32_t)((value >> (8 * i)) & 0xff)
                                                                           << (8 * (at % 4));
    }
}
#define PUTMSG(words, name, v) put(words, NV_MGMT_MESSAGE_##name##_OFFSET, NV_MGMT_MESSAGE_##name##_BYTES, v)

static uint32_t ptag(void)
{
    uint32_t t = 0;
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, (uint32_t[16]){0}) == NV_VIP_SUCCESS);
    uint32_t args[16] = {0};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, args) == NV_VIP_SUCCESS);
    t = args[NV_MBOX_CREATE_PTAG_RES_PTAG];
    return t;
}

static void test_init_reads_the_card_and_enables_the_engine(void)
{
    setup();
    CHECK(via.vis == FAKE_VIS && via.cqs == FAKE_CQS && via.att_regions == FAKE_REGIONS);
    CHECK(via.host_base == FAKE_HOST_BASE && via.host_size == FAKE_HOST_SIZE);
    CHECK(fake_via.ctrl & NV_VIA_CTRL_ENABLE_MASK);
    CHECK(fake_via.vi[3].resets == 1 && fake_via.cq[1].resets == 1);
    CHECK(strstr(fake.log, "via: 4 VIs, 2 CQs") != NULL);
    CHECK(nv_via_init(NULL, 0, 100000000u) == NV_ERR_ARG);
}

static void test_init_refuses_a_card_with_more_vis_than_the_build_holds(void)
{
    setup();
    fake_via.vi_count = NV_VIA_MAX_VIS + 1;
    fake_via.ctrl = 0;
    CHECK(nv_via_init(&via, 0, 100000000u) == NV_ERR_RANGE);
    char expected[96];
    snprintf(expected, sizeof expected, "the card has %u VIs, this firmware was built for at most %u",
             (unsigned)NV_VIA_MAX_VIS + 1, (unsigned)NV_VIA_MAX_VIS);
    CHECK(strstr(fake.log, expected) != NULL);
    CHECK(!(fake_via.ctrl & NV_VIA_CTRL_ENABLE_MASK)); /* the engine stays off */
    fake_via.vi_count = NV_VIA_MAX_VIS;                /* as many as it holds: taken */
    CHECK(nv_via_init(&via, 0, 100000000u) == NV_OK && via.vis == NV_VIA_MAX_VIS);
}

static void test_protection_tags(void)
{
    setup();
    uint32_t args[16] = {0};
    for (unsigned i = 0; i < NV_VIA_MAX_PTAGS; i++)
        CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, args) == NV_VIP_SUCCESS);
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, args) == NV_VIP_ERROR_RESOURCE);
    args[NV_MBOX_DESTROY_PTAG_ARG_PTAG] = 0;
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_PTAG, args) == NV_VIP_INVALID_PTAG);
    args[NV_MBOX_DESTROY_PTAG_ARG_PTAG] = 3;
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_PTAG, args) == NV_VIP_SUCCESS);
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_PTAG, args) == NV_VIP_INVALID_PTAG);
}

/* A region of 9 KiB at VA 0x1C00 on pages 0x60002C00, 0x60005000, 0x60008000 (the paper's Fig. 6). */
static uint32_t register_paper_region(uint32_t tag, uint32_t *handle)
{
    const uint32_t list = FAKE_HOST_BASE + 0x100;
    fake_host_put32(list, FAKE_HOST_BASE + 0x2C00);
    fake_host_put32(list + 4, FAKE_HOST_BASE + 0x5000);
    fake_host_put32(list + 8, FAKE_HOST_BASE + 0x8000);
    return nv_via_register_mem(&via, 0x1C00, 9 * 1024, tag, NV_ATT_L1_ATTRIBUTES_RDMA_WRITE_MASK, list, 3, handle);
}

static void test_register_writes_both_levels_valid_last(void)
{
    setup();
    uint32_t tag = ptag(), handle = 99;
    CHECK(register_paper_region(tag, &handle) == NV_VIP_SUCCESS);
    CHECK(handle == 0);
    const uint32_t *l1 = &fake_via.att[handle * NV_ATT_L1_STRIDE_WORDS];
    CHECK(L1(l1, START_VA) == 0x1C00 && L1(l1, LENGTH) == 9 * 1024);
    CHECK(L1(l1, PAGE_COUNT) == 3 && L1(l1, FIRST_PAGE_SIZE) == 0x400);
    CHECK(L1(l1, PTAG) == tag);
    CHECK(L1(l1, ATTRIBUTES) == (NV_ATT_L1_ATTRIBUTES_VALID_MASK | NV_ATT_L1_ATTRIBUTES_RDMA_WRITE_MASK));
    uint32_t l2 = (uint32_t)L1(l1, L2_INDEX);
    const uint32_t *pages = &fake_via.att[FAKE_REGIONS * NV_ATT_L1_STRIDE_WORDS + l2];
    CHECK(pages[0] == FAKE_HOST_BASE + 0x2C00 && pages[1] == FAKE_HOST_BASE + 0x5000 &&
          pages[2] == FAKE_HOST_BASE + 0x8000);
    unsigned valid_word = handle * NV_ATT_L1_STRIDE_WORDS + NV_ATT_L1_ATTRIBUTES_OFFSET / 4;
    CHECK(fake_via.att_last_write[valid_word] == fake_via.att_writes); /* the last word written */
    CHECK(fake_via.host_syncs > 0);                                    /* the page list was re-read */

    /* A second region gets the next handle and other level-2 entries; deregistering frees both. */
    uint32_t second;
    CHECK(register_paper_region(tag, &second) == NV_VIP_SUCCESS && second == 1);
    CHECK(fake_via.att[FAKE_REGIONS * NV_ATT_L1_STRIDE_WORDS + l2 + 3] == FAKE_HOST_BASE + 0x2C00);
    CHECK(nv_via_deregister_mem(&via, handle) == NV_VIP_SUCCESS);
    CHECK(!(L1(l1, ATTRIBUTES) & NV_ATT_L1_ATTRIBUTES_VALID_MASK));
    CHECK(nv_via_deregister_mem(&via, handle) == NV_VIP_INVALID_PARAMETER);
    uint32_t again;
    CHECK(register_paper_region(tag, &again) == NV_VIP_SUCCESS && again == handle);
}

static void test_register_refuses_bad_arguments_and_writes_nothing(void)
{
    setup();
    uint32_t tag = ptag(), handle;
    const uint32_t list = FAKE_HOST_BASE + 0x100;
    fake_host_put32(list, FAKE_HOST_BASE + 0x2C00);
    fake_host_put32(list + 4, FAKE_HOST_BASE + 0x5000);
    unsigned writes = fake_via.att_writes;
    CHECK(nv_via_register_mem(&via, 0x1C00, 0, tag, 0, list, 1, &handle) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_register_mem(&via, 0x1C00, 100, tag + 1, 0, list, 1, &handle) == NV_VIP_INVALID_PTAG);
    CHECK(nv_via_register_mem(&via, 0x1C00, 0x1000, tag, 0, list, 1, &handle) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_register_mem(&via, 0x1D00, 16, tag, 0, list, 1, &handle) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_register_mem(&via, 0x1C00, 16, tag, 0x80, list, 1, &handle) == NV_VIP_INVALID_PARAMETER);
    fake_host_put32(list + 4, 0x10000000u); /* a page outside host memory */
    CHECK(nv_via_register_mem(&via, 0x1C00, 0x800, tag, 0, list, 2, &handle) == NV_VIP_INVALID_PARAMETER);
    CHECK(fake_via.att_writes == writes);
    /* Out of handles. */
    fake_host_put32(list, FAKE_HOST_BASE + 0x10);
    for (unsigned i = 0; i < FAKE_REGIONS; i++)
        CHECK(nv_via_register_mem(&via, 0x10, 8, tag, 0, list, 1, &handle) == NV_VIP_SUCCESS);
    CHECK(nv_via_register_mem(&via, 0x10, 8, tag, 0, list, 1, &handle) == NV_VIP_ERROR_RESOURCE);
    /* A tag still used by a region cannot go. */
    uint32_t args[16] = {[NV_MBOX_DESTROY_PTAG_ARG_PTAG] = tag};
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_PTAG, args) == NV_VIP_INVALID_STATE);
}

static uint32_t new_vi(uint32_t tag);

static void test_completion_queues_and_vis(void)
{
    setup();
    uint32_t tag = ptag();
    uint32_t args[16] = {[NV_MBOX_CREATE_CQ_ARG_BASE] = FAKE_HOST_BASE + 0x800, [NV_MBOX_CREATE_CQ_ARG_ENTRIES] = 12};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_CQ, args) == NV_VIP_INVALID_PARAMETER); /* not a power of two */
    args[NV_MBOX_CREATE_CQ_ARG_ENTRIES] = 16;
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_CQ, args) == NV_VIP_SUCCESS);
    uint32_t cq = args[NV_MBOX_CREATE_CQ_RES_CQ];
    CHECK(fake_via.cq[cq].base == FAKE_HOST_BASE + 0x800 && fake_via.cq[cq].size == 16);

    uint32_t vargs[16] = {[NV_MBOX_CREATE_VI_ARG_PTAG] = tag + 1,
                          [NV_MBOX_CREATE_VI_ARG_SEND_CQ] = NV_MBOX_NONE,
                          [NV_MBOX_CREATE_VI_ARG_RECV_CQ] = cq,
                          [NV_MBOX_CREATE_VI_ARG_DESC_BASE] = DESC_AREA,
                          [NV_MBOX_CREATE_VI_ARG_DESC_SIZE] = 0x200};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, vargs) == NV_VIP_INVALID_PTAG);
    vargs[NV_MBOX_CREATE_VI_ARG_PTAG] = tag;
    vargs[NV_MBOX_CREATE_VI_ARG_SEND_CQ] = 1; /* not created */
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, vargs) == NV_VIP_INVALID_PARAMETER);
    vargs[NV_MBOX_CREATE_VI_ARG_SEND_CQ] = NV_MBOX_NONE;
    /* The descriptor area: aligned, room for a control segment, all in host memory. */
    static const uint32_t bad_areas[][2] = {{DESC_AREA + 8, 0x200},
                                            {DESC_AREA, 0},
                                            {DESC_AREA, NV_DESC_CONTROL_SIZE - 1},
                                            {FAKE_HOST_BASE - 0x200, 0x400},
                                            {FAKE_HOST_BASE + FAKE_HOST_SIZE - 0x100, 0x200},
                                            {DESC_AREA, 0xFFFFFFF0u}};
    for (unsigned i = 0; i < sizeof bad_areas / sizeof bad_areas[0]; i++) {
        vargs[NV_MBOX_CREATE_VI_ARG_DESC_BASE] = bad_areas[i][0];
        vargs[NV_MBOX_CREATE_VI_ARG_DESC_SIZE] = bad_areas[i][1];
        CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, vargs) == NV_VIP_INVALID_PARAMETER);
    }
    vargs[NV_MBOX_CREATE_VI_ARG_DESC_BASE] = DESC_AREA;
    vargs[NV_MBOX_CREATE_VI_ARG_DESC_SIZE] = 0x200;
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, vargs) == NV_VIP_SUCCESS);
    uint32_t vi = vargs[NV_MBOX_CREATE_VI_RES_VI];
    CHECK(fake_via.vi[vi].ptag == tag);
    CHECK(fake_via.vi[vi].desc_base == DESC_AREA && fake_via.vi[vi].desc_size == 0x200);
    CHECK(fake_via.vi[vi].cq_bind == (cq << NV_VIA_VI_CQ_BIND_RECV_CQ_SHIFT | NV_VIA_VI_CQ_BIND_RECV_EN_MASK));
    uint32_t dargs[16] = {[NV_MBOX_DESTROY_CQ_ARG_CQ] = cq};
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_CQ, dargs) == NV_VIP_INVALID_STATE); /* bound to the VI */
    uint32_t xargs[16] = {[NV_MBOX_DESTROY_VI_ARG_VI] = vi};
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_VI, xargs) == NV_VIP_SUCCESS);
    CHECK(fake_via.vi[vi].desc_size == 0); /* a freed VI can post nothing */
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_VI, xargs) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_CQ, dargs) == NV_VIP_SUCCESS && fake_via.cq[cq].size == 0);
    /* Every VI taken: none left. */
    for (unsigned i = 0; i < FAKE_VIS; i++)
        new_vi(tag);
    uint32_t more[16] = {[NV_MBOX_CREATE_VI_ARG_PTAG] = tag,
                         [NV_MBOX_CREATE_VI_ARG_SEND_CQ] = NV_MBOX_NONE,
                         [NV_MBOX_CREATE_VI_ARG_RECV_CQ] = NV_MBOX_NONE,
                         [NV_MBOX_CREATE_VI_ARG_DESC_BASE] = DESC_AREA,
                         [NV_MBOX_CREATE_VI_ARG_DESC_SIZE] = 0x200};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, more) == NV_VIP_ERROR_RESOURCE);
}

static uint32_t new_vi(uint32_t tag)
{
    uint32_t args[16] = {[NV_MBOX_CREATE_VI_ARG_PTAG] = tag,
                         [NV_MBOX_CREATE_VI_ARG_SEND_CQ] = NV_MBOX_NONE,
                         [NV_MBOX_CREATE_VI_ARG_RECV_CQ] = NV_MBOX_NONE,
                         [NV_MBOX_CREATE_VI_ARG_DESC_BASE] = DESC_AREA,
                         [NV_MBOX_CREATE_VI_ARG_DESC_SIZE] = 0x200};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, args) == NV_VIP_SUCCESS);
    return args[NV_MBOX_CREATE_VI_RES_VI];
}

static void message(uint32_t *w, unsigned type, unsigned src_vi, unsigned dst_vi, uint32_t disc, uint32_t id)
{
    memset(w, 0, NV_MGMT_MESSAGE_SIZE);
    PUTMSG(w, TYPE, type);
    PUTMSG(w, SRC_VI, src_vi);
    PUTMSG(w, DST_VI, dst_vi);
    PUTMSG(w, DISCRIMINATOR, disc);
    PUTMSG(w, REQUEST_ID, id);
}

static void test_client_connects_with_buffer_exchange(void)
{
    setup();
    uint32_t vi = new_vi(ptag());
    uint32_t args[16] = {[NV_MBOX_CONNECT_REQUEST_ARG_VI] = vi, [NV_MBOX_CONNECT_REQUEST_ARG_NODE] = 0};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_REQUEST, args) == NV_VIP_INVALID_PARAMETER); /* ourselves */
    args[NV_MBOX_CONNECT_REQUEST_ARG_NODE] = 1;
    args[NV_MBOX_CONNECT_REQUEST_ARG_DISCRIMINATOR] = 77;
    args[NV_MBOX_CONNECT_REQUEST_ARG_BUF_VA_LO] = 0x1000;
    args[NV_MBOX_CONNECT_REQUEST_ARG_BUF_VA_HI] = 0x7f;
    args[NV_MBOX_CONNECT_REQUEST_ARG_BUF_HANDLE] = 4;
    args[NV_MBOX_CONNECT_REQUEST_ARG_BUF_LENGTH] = 8192;
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_REQUEST, args) == NV_VIP_SUCCESS);
    nv_via_poll(&via);
    CHECK(fake_via.sent_count == 1);
    const uint32_t *req = fake_via.sent[0].words;
    CHECK(fake_via.sent[0].node == 1 && fake_via.sent[0].length == NV_MGMT_MESSAGE_SIZE);
    CHECK(MSG(req, TYPE) == NV_MGMT_TYPE_CONNECT_REQUEST && MSG(req, SRC_VI) == vi && MSG(req, DISCRIMINATOR) == 77);
    CHECK(MSG(req, BUF_VA) == 0x7f00001000ull && MSG(req, BUF_HANDLE) == 4 && MSG(req, BUF_LENGTH) == 8192);
    CHECK(MSG(req, FLAGS) & NV_MGMT_MESSAGE_FLAGS_HAS_BUFFER_MASK);
    uint32_t st[16] = {[NV_MBOX_CONNECT_STATUS_ARG_VI] = vi};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_STATUS, st) == NV_VIP_NOT_DONE);

    uint32_t accept[8];
    message(accept, NV_MGMT_TYPE_CONNECT_ACCEPT, 2, vi, 77, (uint32_t)MSG(req, REQUEST_ID) + 1);
    fake_via_inject(1, accept, NV_MGMT_MESSAGE_SIZE); /* another attempt's answer: ignored */
    message(accept, NV_MGMT_TYPE_CONNECT_ACCEPT, 2, vi, 77, (uint32_t)MSG(req, REQUEST_ID));
    PUTMSG(accept, FLAGS, NV_MGMT_MESSAGE_FLAGS_HAS_BUFFER_MASK);
    PUTMSG(accept, BUF_VA, 0x5000);
    PUTMSG(accept, BUF_HANDLE, 6);
    PUTMSG(accept, BUF_LENGTH, 4096);
    fake_via_inject(1, accept, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    CHECK(fake_via.vi[vi].connects == 0);
    nv_via_poll(&via);
    CHECK(fake_via.vi[vi].connects == 1 && fake_via.vi[vi].state == NV_VI_STATE_CONNECTED);
    CHECK(fake_via.vi[vi].peer == (1u << NV_VIA_VI_PEER_NODE_SHIFT | 2u << NV_VIA_VI_PEER_VI_SHIFT));
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_STATUS, st) == NV_VIP_SUCCESS);
    CHECK(st[NV_MBOX_CONNECT_STATUS_RES_PEER_VI] == 2 && st[NV_MBOX_CONNECT_STATUS_RES_BUF_HANDLE] == 6);
    CHECK(st[NV_MBOX_CONNECT_STATUS_RES_BUF_VA_LO] == 0x5000 && st[NV_MBOX_CONNECT_STATUS_RES_BUF_LENGTH] == 4096);
    /* Connected VIs cannot connect again or be destroyed. */
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_REQUEST, args) == NV_VIP_INVALID_STATE);
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_VI, (uint32_t[16]){[0] = vi}) == NV_VIP_INVALID_STATE);
}

static void test_client_retries_then_times_out_or_is_rejected(void)
{
    setup();
    uint32_t vi = new_vi(ptag());
    uint32_t args[16] = {[NV_MBOX_CONNECT_REQUEST_ARG_VI] = vi,
                         [NV_MBOX_CONNECT_REQUEST_ARG_NODE] = 3,
                         [NV_MBOX_CONNECT_REQUEST_ARG_BUF_HANDLE] = NV_MBOX_NONE,
                         [NV_MBOX_CONNECT_REQUEST_ARG_TIMEOUT_US] = 1000};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_REQUEST, args) == NV_VIP_SUCCESS);
    uint32_t st[16] = {[NV_MBOX_CONNECT_STATUS_ARG_VI] = vi};
    for (int i = 0; i < 2000 && nv_via_command(&via, NV_MBOX_CONNECT_STATUS, st) == NV_VIP_NOT_DONE; i++)
        nv_via_poll(&via);
    CHECK(fake_via.sent_count >= 3); /* repeated every NV_VIA_RETRY_US */
    CHECK(!(MSG(fake_via.sent[0].words, FLAGS) & NV_MGMT_MESSAGE_FLAGS_HAS_BUFFER_MASK));
    CHECK(fake_via.vi[vi].connects == 0);
    CHECK(strstr(fake.log, "did not answer") != NULL);
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_STATUS, st) == NV_VIP_INVALID_STATE); /* reported once */

    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_REQUEST, args) == NV_VIP_SUCCESS);
    nv_via_poll(&via);
    uint32_t reject[8];
    message(reject, NV_MGMT_TYPE_CONNECT_REJECT, 0xffff, vi, 0,
            (uint32_t)MSG(fake_via.sent[(fake_via.sent_count - 1) % FAKE_MAX_FRAMES].words, REQUEST_ID));
    fake_via_inject(3, reject, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_STATUS, st) == NV_VIP_REJECT);
}

static void test_server_accepts_once_and_answers_repeats(void)
{
    setup();
    uint32_t vi = new_vi(ptag());
    uint32_t req[8];
    message(req, NV_MGMT_TYPE_CONNECT_REQUEST, 5, 0xffff, 42, 9);
    fake_via_inject(2, req, NV_MGMT_MESSAGE_SIZE);
    fake_via_inject(2, req, NV_MGMT_MESSAGE_SIZE); /* the client repeated itself */
    nv_via_poll(&via);
    nv_via_poll(&via);
    uint32_t w[16] = {[NV_MBOX_CONNECT_WAIT_ARG_DISCRIMINATOR] = 41};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_NOT_DONE);
    w[NV_MBOX_CONNECT_WAIT_ARG_DISCRIMINATOR] = 42;
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_SUCCESS);
    CHECK(w[NV_MBOX_CONNECT_WAIT_RES_NODE] == 2 && w[NV_MBOX_CONNECT_WAIT_RES_PEER_VI] == 5);
    CHECK(w[NV_MBOX_CONNECT_WAIT_RES_BUF_HANDLE] == NV_MBOX_NONE);
    uint32_t request = w[NV_MBOX_CONNECT_WAIT_RES_REQUEST];
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_NOT_DONE); /* one request, one host */

    uint32_t a[16] = {[NV_MBOX_CONNECT_ACCEPT_ARG_REQUEST] = request + 1,
                      [NV_MBOX_CONNECT_ACCEPT_ARG_VI] = vi,
                      [NV_MBOX_CONNECT_ACCEPT_ARG_BUF_HANDLE] = 2,
                      [NV_MBOX_CONNECT_ACCEPT_ARG_BUF_LENGTH] = 64};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_ACCEPT, a) == NV_VIP_NO_MATCH);
    a[NV_MBOX_CONNECT_ACCEPT_ARG_REQUEST] = request;
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_ACCEPT, a) == NV_VIP_SUCCESS);
    CHECK(fake_via.vi[vi].state == NV_VI_STATE_CONNECTED);
    CHECK(fake_via.vi[vi].peer == (2u << NV_VIA_VI_PEER_NODE_SHIFT | 5u << NV_VIA_VI_PEER_VI_SHIFT));
    CHECK(fake_via.sent_count == 1);
    const uint32_t *acc = fake_via.sent[0].words;
    CHECK(MSG(acc, TYPE) == NV_MGMT_TYPE_CONNECT_ACCEPT && MSG(acc, SRC_VI) == vi && MSG(acc, DST_VI) == 5);
    CHECK(MSG(acc, REQUEST_ID) == 9 && MSG(acc, BUF_HANDLE) == 2 && MSG(acc, BUF_LENGTH) == 64);

    fake_via_inject(2, req, NV_MGMT_MESSAGE_SIZE); /* our ACCEPT was lost: the client asks again */
    nv_via_poll(&via);
    CHECK(fake_via.sent_count == 2 && MSG(fake_via.sent[1].words, TYPE) == NV_MGMT_TYPE_CONNECT_ACCEPT);
    CHECK(fake_via.vi[vi].connects == 1);
}

/* Accepted requests leave the request table (the VIs remember them): a server accepts more
 * connections, one after another, than the table has entries, and still answers a repeat. */
static void test_server_accepts_more_connections_than_its_request_table(void)
{
    setup();
    fake_via.vi_count = NV_VIA_MAX_REQUESTS + 2;
    CHECK(nv_via_init(&via, 0, 100000000u) == NV_OK);
    uint32_t tag = ptag();
    uint32_t req[8];
    for (unsigned k = 0; k < fake_via.vi_count; k++) {
        uint32_t vi = new_vi(tag);
        message(req, NV_MGMT_TYPE_CONNECT_REQUEST, k, 0xffff, 100 + k, 1000 + k);
        fake_via_inject(2, req, NV_MGMT_MESSAGE_SIZE);
        nv_via_poll(&via);
        uint32_t w[16] = {[NV_MBOX_CONNECT_WAIT_ARG_DISCRIMINATOR] = 100 + k};
        CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_SUCCESS);
        uint32_t a[16] = {[NV_MBOX_CONNECT_ACCEPT_ARG_REQUEST] = w[NV_MBOX_CONNECT_WAIT_RES_REQUEST],
                          [NV_MBOX_CONNECT_ACCEPT_ARG_VI] = vi,
                          [NV_MBOX_CONNECT_ACCEPT_ARG_BUF_HANDLE] = NV_MBOX_NONE};
        CHECK(nv_via_command(&via, NV_MBOX_CONNECT_ACCEPT, a) == NV_VIP_SUCCESS);
        CHECK(fake_via.vi[vi].state == NV_VI_STATE_CONNECTED);
    }
    CHECK(fake_via.sent_count == fake_via.vi_count && strstr(fake.log, "dropped") == NULL);
    message(req, NV_MGMT_TYPE_CONNECT_REQUEST, 0, 0xffff, 100, 1000); /* the first client asks again */
    fake_via_inject(2, req, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    const uint32_t *again = fake_via.sent[fake_via.sent_count - 1].words;
    CHECK(MSG(again, TYPE) == NV_MGMT_TYPE_CONNECT_ACCEPT && MSG(again, DST_VI) == 0 && MSG(again, REQUEST_ID) == 1000);
    uint32_t w[16] = {[NV_MBOX_CONNECT_WAIT_ARG_DISCRIMINATOR] = 100};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_NOT_DONE); /* not a new request */
}

static void test_disconnect_both_ways(void)
{
    setup();
    uint32_t vi = new_vi(ptag());
    uint32_t req[8];
    message(req, NV_MGMT_TYPE_CONNECT_REQUEST, 1, 0xffff, 7, 1);
    fake_via_inject(1, req, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    uint32_t w[16] = {[NV_MBOX_CONNECT_WAIT_ARG_DISCRIMINATOR] = 7};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_SUCCESS);
    uint32_t a[16] = {[NV_MBOX_CONNECT_ACCEPT_ARG_REQUEST] = w[0],
                      [NV_MBOX_CONNECT_ACCEPT_ARG_VI] = vi,
                      [NV_MBOX_CONNECT_ACCEPT_ARG_BUF_HANDLE] = NV_MBOX_NONE};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_ACCEPT, a) == NV_VIP_SUCCESS);

    /* The peer disconnects: we reset the VI and acknowledge. */
    uint32_t disc[8];
    message(disc, NV_MGMT_TYPE_DISCONNECT, 1, vi, 0, 1);
    fake_via_inject(1, disc, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    CHECK(fake_via.vi[vi].fails == 1 && fake_via.vi[vi].state == NV_VI_STATE_IDLE);
    CHECK(MSG(fake_via.sent[fake_via.sent_count - 1].words, TYPE) == NV_MGMT_TYPE_DISCONNECT_ACK);

    /* We disconnect a VI that failed on a remote error: it is reset and the peer told until it answers. */
    message(req, NV_MGMT_TYPE_CONNECT_REQUEST, 1, 0xffff, 7, 2);
    fake_via_inject(1, req, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    w[NV_MBOX_CONNECT_WAIT_ARG_DISCRIMINATOR] = 7; /* the results overwrote the arguments */
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_WAIT, w) == NV_VIP_SUCCESS);
    a[NV_MBOX_CONNECT_ACCEPT_ARG_REQUEST] = w[NV_MBOX_CONNECT_WAIT_RES_REQUEST];
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_ACCEPT, a) == NV_VIP_SUCCESS);
    fake_via.vi[vi].state = NV_VI_STATE_ERROR;
    unsigned before = fake_via.sent_count;
    CHECK(nv_via_command(&via, NV_MBOX_DISCONNECT, (uint32_t[16]){[0] = vi}) == NV_VIP_SUCCESS);
    CHECK(fake_via.vi[vi].state == NV_VI_STATE_IDLE && fake_via.vi[vi].resets >= 2);
    for (int i = 0; i < 300; i++)
        nv_via_poll(&via);
    CHECK(fake_via.sent_count - before >= 2); /* DISCONNECT, repeated */
    CHECK(MSG(fake_via.sent[before].words, TYPE) == NV_MGMT_TYPE_DISCONNECT);
    uint32_t ack[8];
    message(ack, NV_MGMT_TYPE_DISCONNECT_ACK, 1, vi, 0, 0);
    fake_via_inject(1, ack, NV_MGMT_MESSAGE_SIZE);
    nv_via_poll(&via);
    unsigned after = fake_via.sent_count;
    for (int i = 0; i < 300; i++)
        nv_via_poll(&via);
    CHECK(fake_via.sent_count == after); /* acknowledged: no more repeats */
    CHECK(nv_via_command(&via, NV_MBOX_DESTROY_VI, (uint32_t[16]){[0] = vi}) == NV_VIP_SUCCESS);
}

static void test_mailbox_runs_each_command_once(void)
{
    setup();
    fake_via.mbox_cmd = 5u << NV_VIA_MBOX_CMD_SEQ_SHIFT | NV_MBOX_CREATE_PTAG;
    nv_via_poll(&via);
    CHECK(fake_via.mbox_status == (5u << NV_VIA_MBOX_STATUS_SEQ_SHIFT | NV_VIP_SUCCESS));
    CHECK(fake_via.mbox_data[NV_MBOX_CREATE_PTAG_RES_PTAG] == 1);
    nv_via_poll(&via); /* same SEQ: nothing new */
    CHECK(via.ptags == 1);
    fake_via.mbox_cmd = 6u << NV_VIA_MBOX_CMD_SEQ_SHIFT | 0x7777;
    nv_via_poll(&via);
    CHECK(fake_via.mbox_status == (6u << NV_VIA_MBOX_STATUS_SEQ_SHIFT | NV_VIP_INVALID_FUNCTION));
}

static void test_interrupt_driven_port_acknowledges_before_reading_the_mailbox(void)
{
    setup();
    nv_via_poll(&via);
    CHECK(fake_via.irq_enable == 0 && fake_via.irq_mbox_acks == 0); /* a polling port touches nothing */
    nv_via_irq_enable(&via);
    CHECK(fake_via.irq_enable ==
          (NV_VIA_IRQ_ENABLE_MBOX_MASK | NV_VIA_IRQ_ENABLE_MGMT_RX_MASK | NV_VIA_IRQ_ENABLE_CQ_MASK));
    fake_via.mbox_cmd = 7u << NV_VIA_MBOX_CMD_SEQ_SHIFT | NV_MBOX_NOP;
    nv_via_poll(&via);
    /* Acknowledged first: a command the host writes after the read raises the interrupt again. */
    CHECK(fake_via.irq_mbox_acks == 1 && fake_via.irq_mbox_acks_at_cmd_read == 1);
    CHECK(fake_via.mbox_status == (7u << NV_VIA_MBOX_STATUS_SEQ_SHIFT | NV_VIP_SUCCESS));
}

static void test_next_timer_is_the_earliest_retry_or_timeout(void)
{
    setup();
    CHECK(nv_via_next_timer(&via) == UINT64_MAX); /* idle: only the interrupt brings work */
    uint32_t vi = new_vi(ptag());
    uint32_t args[16] = {[NV_MBOX_CONNECT_REQUEST_ARG_VI] = vi,
                         [NV_MBOX_CONNECT_REQUEST_ARG_NODE] = 3,
                         [NV_MBOX_CONNECT_REQUEST_ARG_BUF_HANDLE] = NV_MBOX_NONE,
                         [NV_MBOX_CONNECT_REQUEST_ARG_TIMEOUT_US] = 1000};
    CHECK(nv_via_command(&via, NV_MBOX_CONNECT_REQUEST, args) == NV_VIP_SUCCESS);
    CHECK(nv_via_next_timer(&via) == 0); /* the request is to be sent now */
    nv_via_poll(&via);
    uint64_t now = fake.cycles;
    uint64_t retry = nv_via_next_timer(&via);
    uint64_t per_us = via.clk_freq_hz / 1000000u;
    CHECK(retry > now && retry <= now + NV_VIA_RETRY_US * per_us);
    CHECK(fake_via.sent_count == 1);
    while (nv_via_command(&via, NV_MBOX_CONNECT_STATUS, (uint32_t[16]){[0] = vi}) == NV_VIP_NOT_DONE) {
        uint64_t due = nv_via_next_timer(&via);
        CHECK(due != UINT64_MAX);
        while (fake.cycles < due) /* nothing happens before the timer is due */
            fake.cycles += per_us;
        nv_via_poll(&via);
    }
    CHECK(fake_via.sent_count >= 3); /* retried, then timed out */
    CHECK(nv_via_next_timer(&via) == UINT64_MAX);
}

static void test_bench_refuses_an_unconnected_vi(void)
{
    setup();
    uint32_t vi = new_vi(ptag());
    struct nv_bench_args a = {.role = 1,
                              .op = NV_BENCH_OP_SEND_RECV,
                              .vi = vi,
                              .size = 4,
                              .iterations = 1,
                              .buf_pa = FAKE_HOST_BASE,
                              .desc = FAKE_HOST_BASE + 0x100};
    struct nv_bench_result r;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    fake_via.vi[vi].state = NV_VI_STATE_CONNECTED;
    a.desc = FAKE_HOST_BASE + 0x104; /* misaligned */
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    a.desc = FAKE_HOST_BASE + 0x100;
    a.op = NV_BENCH_OP_RDMA_WRITE;
    a.size = 0;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    /* A send with nobody answering: the descriptor is posted, then the agent gives up. */
    a.op = NV_BENCH_OP_SEND_RECV;
    a.size = 4;
    a.timeout_us = 50;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_TIMEOUT);
    /* The agent posted from its own area, which it made the VI's (none refused by the card). */
    CHECK(fake_via.vi[vi].desc_base == FAKE_HOST_BASE + 0x100 &&
          fake_via.vi[vi].last_doorbell - fake_via.vi[vi].desc_base < fake_via.vi[vi].desc_size);
    CHECK(fake_via.vi[vi].sq_doorbells == 1 && fake_via.vi[vi].rq_doorbells == 1 &&
          fake_via.vi[vi].refused_doorbells == 0);
    CHECK(fake_via.vi[vi].last_doorbell >= FAKE_HOST_BASE + 0x100 &&
          fake_via.vi[vi].last_doorbell < FAKE_HOST_BASE + 0x1100 && !(fake_via.vi[vi].last_doorbell & 15));
    CHECK(r.post_recvs == 1 && r.post_recv_cycles > 0);
}

/* A stream over several VIs: every VI of the run must be connected and only streams spread; each
 * VI gets its own page of the area as its descriptor area, and the messages go on the VIs in turn,
 * STREAM_DEPTH (8) in flight on each before the agent waits for the first. */
static void test_bench_spreads_a_stream_over_consecutive_vis(void)
{
    setup();
    uint32_t tag = ptag(), first = new_vi(tag), second = new_vi(tag);
    CHECK(second == first + 1);
    fake_via.vi[first].state = NV_VI_STATE_CONNECTED;
    struct nv_bench_args a = {.role = 1,
                              .op = NV_BENCH_OP_WRITE_STREAM,
                              .vi = first,
                              .size = 4,
                              .iterations = 64,
                              .buf_pa = FAKE_HOST_BASE,
                              .desc = FAKE_HOST_BASE + 0x1000,
                              .timeout_us = 50,
                              .stream_vis = 2};
    struct nv_bench_result r;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER); /* the second VI is not connected */
    fake_via.vi[second].state = NV_VI_STATE_CONNECTED;
    a.op = NV_BENCH_OP_RDMA_WRITE; /* a ping-pong runs on one VI */
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    a.op = NV_BENCH_OP_WRITE_STREAM;
    a.desc = FAKE_HOST_BASE + FAKE_HOST_SIZE - 0x1000; /* one page, two wanted */
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    a.desc = FAKE_HOST_BASE + 0x1000;
    a.stream_vis = FAKE_VIS + 1;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    CHECK(fake_via.vi[first].sq_doorbells == 0 && fake_via.vi[second].sq_doorbells == 0);
    /* Their slots live in RAM the port lends: too little of it is a lack of resources. */
    a.stream_vis = 2;
    fake.lent_bytes = 2 * (16 + 8) * sizeof(struct nv_via_prebuilt) - 1;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_ERROR_RESOURCE);
    fake.lent_bytes = sizeof fake.lent;
    /* Nobody completes them: 8 posted on each VI, from its own page, then the wait times out. */
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_TIMEOUT);
    CHECK(fake_via.vi[first].sq_doorbells == 8 && fake_via.vi[second].sq_doorbells == 8);
    CHECK(fake_via.vi[first].refused_doorbells == 0 && fake_via.vi[second].refused_doorbells == 0);
    CHECK(fake_via.vi[first].desc_base == a.desc && fake_via.vi[second].desc_base == a.desc + 0x1000);
    CHECK(fake_via.vi[second].last_doorbell - fake_via.vi[second].desc_base < fake_via.vi[second].desc_size);
    /* A send stream's receives: one per message, on the VIs in turn, at most 16 on each. */
    a.role = 0;
    a.op = NV_BENCH_OP_SEND_STREAM;
    a.iterations = 2 * 16 + 1;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    a.iterations = 5;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_TIMEOUT);
    CHECK(fake_via.vi[first].rq_doorbells == 3 && fake_via.vi[second].rq_doorbells == 2 && r.post_recvs == 5);
}

/* The STREAM word of the BENCH command: its VIS and DEPTH fields shape the stream (DEPTH messages
 * in flight on each VI, at most NV_MBOX_BENCH_STREAM_DEPTH); a reserved byte this firmware does not
 * know, or a depth beyond the most, is refused before anything is posted. */
static void test_bench_command_shapes_a_stream_by_its_stream_word(void)
{
    setup();
    CHECK(nv_bench_register(&via) == NV_OK);
    uint32_t tag = ptag(), first = new_vi(tag), second = new_vi(tag);
    fake_via.vi[first].state = fake_via.vi[second].state = NV_VI_STATE_CONNECTED;
    uint32_t words[16] = {[NV_MBOX_BENCH_ARG_ROLE] = 1,
                          [NV_MBOX_BENCH_ARG_OP] = NV_BENCH_OP_WRITE_STREAM,
                          [NV_MBOX_BENCH_ARG_VI] = first,
                          [NV_MBOX_BENCH_ARG_SIZE] = 4,
                          [NV_MBOX_BENCH_ARG_ITERATIONS] = 64,
                          [NV_MBOX_BENCH_ARG_BUF_PA] = FAKE_HOST_BASE,
                          [NV_MBOX_BENCH_ARG_DESC] = FAKE_HOST_BASE + 0x1000,
                          [NV_MBOX_BENCH_ARG_TIMEOUT_US] = 50};
    uint32_t args[16];
    static const uint32_t refused[] = {
        2u | (NV_MBOX_BENCH_STREAM_DEPTH + 1u) << (8 * NV_BENCH_STREAM_ARG_DEPTH_OFFSET),
        2u | 3u << (8 * NV_BENCH_STREAM_ARG_DEPTH_OFFSET) | 1u << (8 * NV_BENCH_STREAM_ARG_RESERVED_OFFSET),
    };
    for (unsigned i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        memcpy(args, words, sizeof args);
        args[NV_MBOX_BENCH_ARG_STREAM] = refused[i];
        CHECK(nv_via_command(&via, NV_MBOX_BENCH, args) == NV_VIP_INVALID_PARAMETER);
        CHECK(fake_via.vi[first].sq_doorbells == 0 && fake_via.vi[second].sq_doorbells == 0);
    }
    /* Nobody completes them: 3 posted on each of the 2 VIs, then the wait for the first times out. */
    memcpy(args, words, sizeof args);
    args[NV_MBOX_BENCH_ARG_STREAM] = 2u | 3u << (8 * NV_BENCH_STREAM_ARG_DEPTH_OFFSET);
    CHECK(nv_via_command(&via, NV_MBOX_BENCH, args) == NV_VIP_TIMEOUT);
    CHECK(fake_via.vi[first].sq_doorbells == 3 && fake_via.vi[second].sq_doorbells == 3);
    CHECK(fake_via.vi[first].refused_doorbells == 0 && fake_via.vi[second].refused_doorbells == 0);
}

static uint32_t new_cq(void)
{
    uint32_t args[16] = {[NV_MBOX_CREATE_CQ_ARG_BASE] = FAKE_HOST_BASE + 0x800, [NV_MBOX_CREATE_CQ_ARG_ENTRIES] = 16};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_CQ, args) == NV_VIP_SUCCESS);
    return args[NV_MBOX_CREATE_CQ_RES_CQ];
}

static void test_completion_queue_notification_is_armed_taken_and_waited_for(void)
{
    setup();
    CHECK(nv_via_cq_arm(&via, 0) == NV_VIP_INVALID_PARAMETER && fake_via.cq[0].arms == 0); /* not created */
    CHECK(nv_via_cq_arm(&via, FAKE_CQS) == NV_VIP_INVALID_PARAMETER);
    uint32_t cq = new_cq();
    CHECK(nv_via_cq_arm(&via, cq) == NV_VIP_SUCCESS && fake_via.cq[cq].arms == 1);
    /* Another queue's notification is not this one's, and is left for its own waiter. */
    fake_via.cq_notified = 1u << (cq ^ 1);
    CHECK(!nv_via_cq_take_notification(cq) && fake_via.cq[cq].acks == 0);
    fake_via.cq_notified |= 1u << cq;
    CHECK(nv_via_cq_take_notification(cq) && fake_via.cq[cq].acks == 1);
    CHECK(fake_via.cq_notified == 1u << (cq ^ 1));
    /* All fired queues at once, each acknowledged (an interrupt handler's call). */
    fake_via.cq_notified |= 1u << cq;
    CHECK(nv_via_cq_take_notifications(UINT32_MAX) == (1u << cq | 1u << (cq ^ 1)) && fake_via.cq_notified == 0);
    CHECK(fake_via.cq[cq].acks == 2 && fake_via.cq[cq ^ 1].acks == 1);
    /* Waiting: the notification ends it at once; none ends it at the deadline. */
    fake_via.cq_notified |= 1u << cq;
    CHECK(nv_via_cq_wait_polled(cq, nv_card_cycles() + 100000) && fake_via.cq[cq].acks == 3);
    CHECK(!nv_via_cq_wait_polled(cq, nv_card_cycles() + 1000));
}

static void test_bench_sleeps_on_the_receive_queue_s_completion_queue(void)
{
    setup();
    uint32_t cq = new_cq();
    uint32_t vi = new_vi(ptag());
    fake_via.vi[vi].state = NV_VI_STATE_CONNECTED;
    struct nv_bench_args a = {.role = 0,
                              .op = NV_BENCH_OP_SEND_RECV,
                              .vi = vi,
                              .size = 4,
                              .iterations = 1,
                              .buf_pa = FAKE_HOST_BASE,
                              .desc = FAKE_HOST_BASE + 0x100,
                              .timeout_us = 50,
                              .wake_cq = cq + 1};
    struct nv_bench_result r;
    /* The queue must take the VI's receive completions, and only a send/receive ping-pong waits on it. */
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER && fake_via.vi[vi].rq_doorbells == 0);
    fake_via.vi[vi].cq_bind = cq << NV_VIA_VI_CQ_BIND_RECV_CQ_SHIFT | NV_VIA_VI_CQ_BIND_RECV_EN_MASK;
    a.op = NV_BENCH_OP_RDMA_WRITE;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    a.op = NV_BENCH_OP_SEND_RECV;
    a.wake_cq = FAKE_CQS + 1;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_INVALID_PARAMETER);
    /* Entries an earlier run left are taken first; then, nothing arriving, the responder arms the
     * queue and sleeps until its deadline. */
    a.wake_cq = cq + 1;
    fake_via.cq[cq].tail = 5;
    CHECK(nv_via_bench(&via, &a, &r) == NV_VIP_TIMEOUT);
    CHECK(fake_via.cq[cq].head == 5 && fake_via.cq[cq].arms >= 1 && r.polls == fake_via.cq[cq].arms);
    CHECK(fake_via.vi[vi].rq_doorbells == 1 && fake_via.vi[vi].sq_doorbells == 0);
}

/* A handler that records how it was called and answers in the first result word. */
struct recorder {
    unsigned calls;
    uint32_t code, first_arg;
    struct nv_via *via;
};

static uint32_t record(struct nv_via *v, void *context, uint32_t code, uint32_t args[16])
{
    struct recorder *r = context;
    r->calls++;
    r->via = v;
    r->code = code;
    r->first_arg = args[0];
    args[1] = args[0] + 1;
    return NV_VIP_NOT_DONE;
}

static uint32_t other(struct nv_via *v, void *context, uint32_t code, uint32_t args[16])
{
    (void)v, (void)context, (void)code, (void)args;
    return NV_VIP_ERROR;
}

#define AGENT_CODE 0x70u /* no command of the manager's */

static void test_mailbox_dispatches_to_a_registered_handler(void)
{
    setup();
    struct recorder r = {0};
    CHECK(nv_via_register_command(&via, AGENT_CODE, record, &r) == NV_OK);
    uint32_t args[16] = {[0] = 41};
    CHECK(nv_via_command(&via, AGENT_CODE, args) == NV_VIP_NOT_DONE);
    CHECK(r.calls == 1 && r.via == &via && r.code == AGENT_CODE && r.first_arg == 41 && args[1] == 42);
    /* Through the mailbox registers, as the host sends it. */
    fake_via.mbox_cmd = 9u << NV_VIA_MBOX_CMD_SEQ_SHIFT | AGENT_CODE;
    fake_via.mbox_data[0] = 7;
    nv_via_poll(&via);
    CHECK(r.calls == 2 && fake_via.mbox_data[1] == 8);
    CHECK(fake_via.mbox_status == (9u << NV_VIA_MBOX_STATUS_SEQ_SHIFT | NV_VIP_NOT_DONE));
    /* The manager's own commands still reach the manager. */
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, args) == NV_VIP_SUCCESS && via.ptags == 1 && r.calls == 2);
}

static void test_mailbox_refuses_a_command_nobody_registered(void)
{
    setup();
    uint32_t args[16] = {[0] = 5, [1] = 6};
    CHECK(nv_via_command(&via, AGENT_CODE, args) == NV_VIP_INVALID_FUNCTION);
    CHECK(args[0] == 5 && args[1] == 6); /* untouched */
    /* The benchmark agent's command exists once the agent registered it, as the ports do. */
    CHECK(nv_via_command(&via, NV_MBOX_BENCH, args) == NV_VIP_INVALID_FUNCTION);
    CHECK(nv_bench_register(&via) == NV_OK);
    uint32_t bench[16] = {
        [NV_MBOX_BENCH_ARG_OP] = NV_BENCH_OP_SEND_RECV, [NV_MBOX_BENCH_ARG_VI] = 0, [NV_MBOX_BENCH_ARG_ITERATIONS] = 1};
    CHECK(nv_via_command(&via, NV_MBOX_BENCH, bench) == NV_VIP_INVALID_PARAMETER); /* VI 0 is not connected */
    CHECK(nv_bench_register(&via) == NV_ERR_EXISTS);
}

static void test_register_refuses_a_duplicate(void)
{
    setup();
    struct recorder r = {0};
    CHECK(nv_via_register_command(&via, AGENT_CODE, record, &r) == NV_OK);
    CHECK(nv_via_register_command(&via, AGENT_CODE, other, NULL) == NV_ERR_EXISTS);
    CHECK(nv_via_register_command(&via, NV_MBOX_CREATE_PTAG, other, NULL) == NV_ERR_EXISTS);
    CHECK(nv_via_register_command(&via, AGENT_CODE + 1, NULL, NULL) == NV_ERR_ARG);
    uint32_t args[16] = {0};
    CHECK(nv_via_command(&via, AGENT_CODE, args) == NV_VIP_NOT_DONE && r.calls == 1); /* the first one kept */
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, args) == NV_VIP_SUCCESS);
    CHECK(nv_via_command(&via, AGENT_CODE + 1, args) == NV_VIP_INVALID_FUNCTION);
}

static void test_register_refuses_when_the_table_is_full(void)
{
    setup();
    struct recorder r = {0};
    unsigned free_entries = NV_VIA_MAX_COMMANDS - via.command_count;
    CHECK(free_entries >= 2); /* room for the benchmark agent and one more */
    for (unsigned i = 0; i < free_entries; i++)
        CHECK(nv_via_register_command(&via, AGENT_CODE + i, record, &r) == NV_OK);
    CHECK(nv_via_register_command(&via, AGENT_CODE + free_entries, record, &r) == NV_ERR_FULL);
    CHECK(via.command_count == NV_VIA_MAX_COMMANDS);
    uint32_t args[16] = {0};
    CHECK(nv_via_command(&via, AGENT_CODE + free_entries, args) == NV_VIP_INVALID_FUNCTION);
    CHECK(nv_via_command(&via, AGENT_CODE + free_entries - 1, args) == NV_VIP_NOT_DONE && r.calls == 1);
    CHECK(nv_via_command(&via, NV_MBOX_NOP, args) == NV_VIP_SUCCESS);
}

/* An RDMA write of 4 bytes from handle 2 to the peer's handle 3, as words. */
static void rdma_write_words(uint32_t *w)
{
    memset(w, 0, 16 * 4);
    put(w, NV_DESC_CONTROL_SEG_COUNT_OFFSET, NV_DESC_CONTROL_SEG_COUNT_BYTES, 1);
    put(w, NV_DESC_CONTROL_CONTROL_OFFSET, NV_DESC_CONTROL_CONTROL_BYTES, NV_CONTROL_OP_RDMA_WRITE);
    put(w, NV_DESC_CONTROL_STATUS_OFFSET, NV_DESC_CONTROL_STATUS_BYTES, 0xdead); /* built as 0 */
    put(w, NV_DESC_CONTROL_SIZE + NV_DESC_ADDRESS_REMOTE_HANDLE_OFFSET, NV_DESC_ADDRESS_REMOTE_HANDLE_BYTES, 3);
    put(w, 48 + NV_DESC_DATA_HANDLE_OFFSET, NV_DESC_DATA_HANDLE_BYTES, 2);
    put(w, 48 + NV_DESC_DATA_LENGTH_OFFSET, NV_DESC_DATA_LENGTH_BYTES, 4);
}

static void test_prebuilt_descriptor_is_written_once_and_posted_by_its_changes(void)
{
    setup();
    const uint32_t tag = ptag(), vi = new_vi(tag), vi2 = new_vi(tag);
    const uint32_t desc = DESC_AREA + 0x100, status_at = desc + NV_DESC_CONTROL_STATUS_OFFSET;
    const uint32_t length_at = desc + 48 + NV_DESC_DATA_LENGTH_OFFSET,
                   handle_at = desc + 48 + NV_DESC_DATA_HANDLE_OFFSET;
    uint32_t w[16], status = 0;
    rdma_write_words(w);
    struct nv_via_prebuilt p = {0};
    unsigned forgets = fake_via.forgets;
    CHECK(nv_via_prebuild(&via, &p, vi, 1, desc, w, 16) == NV_VIP_SUCCESS);
    CHECK(nv_host_read32(status_at) == 0 && nv_host_read32(length_at) == 4 && nv_host_read32(handle_at) == 2);
    CHECK(fake_via.vi[vi].sq_doorbells == 0); /* building posts nothing... */
    CHECK(fake_via.forgets == forgets + 1);   /* ... and makes the card forget its copies */

    /* A post writes STATUS (and LENGTH when it changed), then rings SQ_REPOST when nothing else
     * changed (the card has no copy since the build, so it fetches the descriptor), SQ_DOORBELL
     * when LENGTH did. */
    fake_host_put32(handle_at, 0x77); /* a field a post must not write again */
    fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_SUCCESS);
    CHECK(nv_host_read32(status_at) == 0 && nv_host_read32(handle_at) == 0x77 && nv_host_read32(length_at) == 4);
    CHECK(fake_via.vi[vi].sq_doorbells == 1 && fake_via.vi[vi].sq_reposts == 1 &&
          fake_via.vi[vi].last_doorbell == desc);
    CHECK(nv_via_prebuilt_done(&via, &p, &status) == NV_VIP_NOT_DONE);

    /* Posted again while in flight: refused, nothing written, no doorbell. */
    CHECK(nv_via_post_prebuilt(&via, &p, 8) == NV_VIP_INVALID_STATE);
    CHECK(nv_via_prebuilt_release(&p) == NV_VIP_INVALID_STATE);
    CHECK(nv_host_read32(length_at) == 4 && fake_via.vi[vi].sq_doorbells == 1);

    fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK | 0x40000);
    CHECK(nv_via_prebuilt_done(&via, &p, &status) == NV_VIP_SUCCESS &&
          status == (NV_DESC_CONTROL_STATUS_DONE_MASK | 0x40000));
    CHECK(nv_via_prebuilt_done(&via, &p, NULL) == NV_VIP_INVALID_STATE); /* not posted */
    CHECK(nv_via_post_prebuilt(&via, &p, 8) == NV_VIP_SUCCESS && nv_host_read32(length_at) == 8);
    CHECK(fake_via.vi[vi].sq_doorbells == 2 && fake_via.vi[vi].sq_reposts == 1); /* LENGTH changed */
    fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK);
    CHECK(nv_via_prebuilt_done(&via, &p, NULL) == NV_VIP_SUCCESS);
    /* Unchanged since its last post: through SQ_REPOST (the card may send its copy). */
    CHECK(nv_via_post_prebuilt(&via, &p, 8) == NV_VIP_SUCCESS && nv_host_read32(status_at) == 0);
    CHECK(fake_via.vi[vi].sq_doorbells == 3 && fake_via.vi[vi].sq_reposts == 2 &&
          fake_via.vi[vi].last_doorbell == desc);
    fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK);
    CHECK(nv_via_prebuilt_done(&via, &p, NULL) == NV_VIP_SUCCESS);

    /* A deregistration after it was built makes it stale: refused until built again. */
    uint32_t handle;
    CHECK(register_paper_region(tag, &handle) == NV_VIP_SUCCESS);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_SUCCESS); /* a registration changes nothing */
    fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK);
    CHECK(nv_via_prebuilt_done(&via, &p, NULL) == NV_VIP_SUCCESS);
    CHECK(nv_via_deregister_mem(&via, handle) == NV_VIP_SUCCESS);
    fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_STALE && nv_via_prebuilt_done(&via, &p, NULL) == NV_VIP_STALE);
    CHECK(nv_host_read32(status_at) == NV_DESC_CONTROL_STATUS_DONE_MASK && fake_via.vi[vi].sq_doorbells == 4);
    CHECK(nv_via_prebuild(&via, &p, vi, 1, desc, w, 16) == NV_VIP_SUCCESS && fake_via.forgets == forgets + 2);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_SUCCESS && fake_via.vi[vi].sq_doorbells == 5);
    CHECK(fake_via.vi[vi].sq_reposts == 3); /* built again with the LENGTH it is posted with */

    /* Receive queues ring their own doorbell. */
    struct nv_via_prebuilt r = {0};
    uint32_t rw[12] = {0};
    put(rw, NV_DESC_CONTROL_SEG_COUNT_OFFSET, NV_DESC_CONTROL_SEG_COUNT_BYTES, 1);
    CHECK(nv_via_prebuild(&via, &r, vi2, 0, desc + 0x80, rw, 12) == NV_VIP_SUCCESS);
    CHECK(nv_via_post_prebuilt(&via, &r, 16) == NV_VIP_SUCCESS);
    CHECK(fake_via.vi[vi2].rq_doorbells == 1 && fake_via.vi[vi2].sq_doorbells == 0);
    fake_host_put32(desc + 0x80 + NV_DESC_CONTROL_STATUS_OFFSET, NV_DESC_CONTROL_STATUS_DONE_MASK);
    CHECK(nv_via_prebuilt_done(&via, &r, NULL) == NV_VIP_SUCCESS);
    CHECK(nv_via_post_prebuilt(&via, &r, 16) == NV_VIP_SUCCESS); /* unchanged: still RQ_DOORBELL */
    CHECK(fake_via.vi[vi2].rq_doorbells == 2 && fake_via.vi[vi2].sq_doorbells == 0);
    CHECK(nv_host_read32(desc + 0x80 + 32 + NV_DESC_DATA_LENGTH_OFFSET) == 16);
}

static void test_prebuilt_wait_reads_only_the_status_until_done_or_timeout(void)
{
    setup();
    const uint32_t vi = new_vi(ptag()), desc = DESC_AREA + 0x100, status_at = desc + NV_DESC_CONTROL_STATUS_OFFSET;
    const uint32_t done = NV_DESC_CONTROL_STATUS_DONE_MASK | 0x40000;
    uint32_t w[16], status = 0, polls = 3;
    rdma_write_words(w);
    struct nv_via_prebuilt p = {0}, q = {0};
    CHECK(nv_via_prebuild(&via, &p, vi, 1, desc, w, 16) == NV_VIP_SUCCESS);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_SUCCESS);

    /* The card writes DONE as the fifth poll reads: five reads of host memory, nothing else. */
    const unsigned reads = fake_via.host_reads, writes = fake_via.host_writes;
    fake_via.host_later.at = status_at, fake_via.host_later.value = done, fake_via.host_later.at_read = reads + 5;
    CHECK(nv_via_prebuilt_wait(&via, &p, 1000, &status, &polls) == NV_VIP_SUCCESS);
    CHECK(status == done && polls == 3 + 5 && fake_via.host_reads == reads + 5 && fake_via.host_writes == writes);
    CHECK(nv_via_prebuilt_wait(&via, &p, 1000, &status, &polls) == NV_VIP_INVALID_STATE); /* seen: not posted */

    /* Never done: gives up once the card's clock ran past the timeout, and the card keeps it. */
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_SUCCESS);
    polls = 0;
    CHECK(nv_via_prebuilt_wait(&via, &p, 1000, &status, &polls) == NV_VIP_TIMEOUT);
    CHECK(polls > NV_CLOCK_POLLS * 10 && fake_via.host_reads == reads + 5 + polls);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_INVALID_STATE);
    fake_host_put32(status_at, done);
    CHECK(nv_via_prebuilt_wait(&via, &p, 1000, NULL, &polls) == NV_VIP_SUCCESS);

    /* Not a prebuilt descriptor, or a stale one: refused before any read. */
    const unsigned before = fake_via.host_reads;
    CHECK(nv_via_prebuilt_wait(&via, &q, 1000, NULL, &polls) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_prebuilt_wait(&via, NULL, 1000, NULL, &polls) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_SUCCESS);
    via.generation++;
    CHECK(nv_via_prebuilt_wait(&via, &p, 1000, NULL, &polls) == NV_VIP_STALE);
    CHECK(fake_via.host_reads == before);
}

static void test_prebuilt_descriptor_refuses_bad_handles_and_arguments(void)
{
    setup();
    const uint32_t vi = new_vi(ptag()), desc = DESC_AREA + 0x100;
    uint32_t w[16];
    rdma_write_words(w);
    struct nv_via_prebuilt p = {0}, q = {0};
    /* Not a prebuilt descriptor: never built, NULL, released. */
    CHECK(nv_via_post_prebuilt(&via, &q, 4) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_post_prebuilt(&via, NULL, 4) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_prebuilt_done(&via, &q, NULL) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_prebuilt_release(&q) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_prebuild(&via, &p, vi, 1, desc, w, 16) == NV_VIP_SUCCESS);
    CHECK(nv_via_prebuilt_release(&p) == NV_VIP_SUCCESS);
    CHECK(nv_via_post_prebuilt(&via, &p, 4) == NV_VIP_INVALID_PARAMETER);
    CHECK(fake_via.vi[vi].sq_doorbells == 0);

    /* Bad arguments build nothing and write nothing. */
    fake_host_put32(desc, 0x5a5a5a5a);
    CHECK(nv_via_prebuild(&via, &q, FAKE_VIS, 1, desc, w, 16) == NV_VIP_INVALID_PARAMETER); /* no such VI */
    CHECK(nv_via_prebuild(&via, &q, vi, 1, desc + 4, w, 16) == NV_VIP_INVALID_PARAMETER);   /* misaligned */
    CHECK(nv_via_prebuild(&via, &q, vi, 1, FAKE_HOST_BASE + FAKE_HOST_SIZE - 32, w, 16) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_via_prebuild(&via, &q, vi, 1, desc, w, 15) == NV_VIP_INVALID_PARAMETER); /* not the whole descriptor */
    CHECK(nv_via_prebuild(&via, &q, vi, 1, desc, w, 4) ==
          NV_VIP_INVALID_PARAMETER); /* shorter than a control segment */
    put(w, NV_DESC_CONTROL_SEG_COUNT_OFFSET, NV_DESC_CONTROL_SEG_COUNT_BYTES, via.max_segments + 1);
    CHECK(nv_via_prebuild(&via, &q, vi, 1, desc, w, 16) ==
          NV_VIP_INVALID_PARAMETER); /* more segments than the card takes */
    CHECK(nv_via_prebuild(&via, NULL, vi, 1, desc, w, 16) == NV_VIP_INVALID_PARAMETER);
    CHECK(nv_host_read32(desc) == 0x5a5a5a5a && q.magic == 0);
}

int main(void)
{
    test_init_reads_the_card_and_enables_the_engine();
    test_init_refuses_a_card_with_more_vis_than_the_build_holds();
    test_protection_tags();
    test_register_writes_both_levels_valid_last();
    test_register_refuses_bad_arguments_and_writes_nothing();
    test_completion_queues_and_vis();
    test_client_connects_with_buffer_exchange();
    test_client_retries_then_times_out_or_is_rejected();
    test_server_accepts_once_and_answers_repeats();
    test_server_accepts_more_connections_than_its_request_table();
    test_disconnect_both_ways();
    test_mailbox_runs_each_command_once();
    test_interrupt_driven_port_acknowledges_before_reading_the_mailbox();
    test_next_timer_is_the_earliest_retry_or_timeout();
    test_bench_refuses_an_unconnected_vi();
    test_completion_queue_notification_is_armed_taken_and_waited_for();
    test_bench_sleeps_on_the_receive_queue_s_completion_queue();
    test_bench_spreads_a_stream_over_consecutive_vis();
    test_bench_command_shapes_a_stream_by_its_stream_word();
    test_mailbox_dispatches_to_a_registered_handler();
    test_mailbox_refuses_a_command_nobody_registered();
    test_register_refuses_a_duplicate();
    test_register_refuses_when_the_table_is_full();
    test_prebuilt_descriptor_is_written_once_and_posted_by_its_changes();
    test_prebuilt_descriptor_refuses_bad_handles_and_arguments();
    test_prebuilt_wait_reads_only_the_status_until_done_or_timeout();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
