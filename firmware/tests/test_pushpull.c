/* Host unit tests of the push-pull library's protocol (firmware/core/src/pushpull.c): the plan at
 * the threshold's edges, and two endpoints on two VIs of the fake card joined by a minimal model
 * of the engine (below) that moves data at each doorbell, checks every segment against the ATT
 * the library wrote, sends a repost (SQ_REPOST) from its copy of the descriptor as the card does
 * (so a descriptor changed and then reposted sends what it held before), and flags a SEND that
 * finds no receive (fatal on the real card). The real
 * engine and firmware run the same library end to end in tests/test_pushpull_system.py. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fake_card.h"
#include "fake_via.h"
#include "numavia/pushpull.h"
#include "numavia/via.h"
#include "numavia_regs.h"
#include "numavia_via.h"

static uint64_t field(const uint32_t *words, unsigned offset, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)((words[(offset + i) / 4] >> (8 * ((offset + i) % 4))) & 0xff) << (8 * i);
    return v;
}

static void put(uint32_t *words, unsigned offset, unsigned bytes, uint64_t value)
{
    for (unsigned i = 0; i < bytes; i++) {
        unsigned at = offset + i;
        words[at / 4] = (words[at / 4] & ~(0xffu << (8 * (at % 4)))) | (uint32_t)((value >> (8 * i)) & 0xff)
                                                                           << (8 * (at % 4));
    }
}

/* --- the plan ------------------------------------------------------------------------------- */

static void test_plan_at_the_threshold(void)
{
    struct nv_pp_plan p;
    const uint32_t t = 512;
    for (unsigned scheme = 0; scheme < 2; scheme++) {
        nv_pp_plan(scheme, t, t - 1, &p);
        CHECK(p.pushed == t - 1 && p.pulled == 0);
        nv_pp_plan(scheme, t, t, &p);
        CHECK(p.pushed == t && p.pulled == 0);
        nv_pp_plan(scheme, t, t + 1, &p);
        CHECK(p.pushed == t && p.pulled == 1);
        nv_pp_plan(scheme, t, 0, &p);
        CHECK(p.pushed == 0 && p.pulled == 0);
        nv_pp_plan(scheme, 0, 100, &p); /* bytes_to_push 0: everything is pulled */
        CHECK(p.pushed == 0 && p.pulled == 100);
        nv_pp_plan(scheme, 100000, 5000, &p); /* clamped to what a slot holds */
        CHECK(p.pushed == NV_PP_MAX_PUSH && p.pulled == 5000 - NV_PP_MAX_PUSH);
    }
    /* Original: the user buffer is always translated and gathered from; nothing overlaps. */
    nv_pp_plan(NV_PP_SCHEME_ORIGINAL, t, t, &p);
    CHECK(p.path == NV_PP_PATH_GATHER && p.send_translates == 1 && !p.recv_translates_early && !p.ack_overlaps_pull);
    nv_pp_plan(NV_PP_SCHEME_ORIGINAL, t, 1, &p);
    CHECK(p.path == NV_PP_PATH_GATHER && p.send_translates == 1);
    nv_pp_plan(NV_PP_SCHEME_ORIGINAL, t, 0, &p);
    CHECK(p.send_translates == 0);
    /* Advanced: register path up to NV_PP_REGISTER_BYTES, bounce to the threshold, then only the
     * pulled part is translated. */
    nv_pp_plan(NV_PP_SCHEME_ADVANCED, t, NV_PP_REGISTER_BYTES, &p);
    CHECK(p.path == NV_PP_PATH_REGISTER && p.send_translates == 0);
    nv_pp_plan(NV_PP_SCHEME_ADVANCED, t, NV_PP_REGISTER_BYTES + 1, &p);
    CHECK(p.path == NV_PP_PATH_BOUNCE && p.send_translates == 0);
    nv_pp_plan(NV_PP_SCHEME_ADVANCED, t, t, &p);
    CHECK(p.path == NV_PP_PATH_BOUNCE && p.send_translates == 0 && p.recv_translates_early && p.ack_overlaps_pull);
    nv_pp_plan(NV_PP_SCHEME_ADVANCED, t, t + 1, &p);
    CHECK(p.path == NV_PP_PATH_BOUNCE && p.send_translates == 2);
    nv_pp_plan(NV_PP_SCHEME_ADVANCED, 2, 3, &p); /* tiny but longer than the threshold: pulled */
    CHECK(p.path == NV_PP_PATH_BOUNCE && p.pulled == 1);
}

/* --- a minimal engine: two VIs joined back to back, data moved at each doorbell -------------- */

#define MAX_POSTED 16
static struct nv_via via;
static struct {
    uint32_t recv[MAX_POSTED];
    unsigned head, count;
} rq[FAKE_VIS];
static unsigned vis[2];
static unsigned sends_without_receive, refused_segments;
/* The descriptor each VI's engine last fetched, as the card keeps it for SQ_REPOST. */
static struct {
    uint32_t desc, words[20], reposts_seen;
} kept[FAKE_VIS];
static struct nv_pp ep[2];
static struct nv_pp_buf user[2];
static int auto_receive = -1; /* endpoint that receives as soon as a push reaches it */
static uint32_t auto_capacity, auto_length, auto_result;

static void host_read(uint32_t pa, void *out, uint32_t n)
{
    memcpy(out, &fake_via.host[pa - FAKE_HOST_BASE], n);
}

static void host_write(uint32_t pa, const void *in, uint32_t n)
{
    memcpy(&fake_via.host[pa - FAKE_HOST_BASE], in, n);
}

/* The physical address of [va, va+n) in region `handle` with `right` (0: local use), as the
 * engine's ATT lookup; 0 if refused. Test buffers are identity mapped (va == pa). */
static uint32_t lookup(uint64_t va, uint32_t handle, uint32_t n, uint32_t right)
{
    if (handle >= FAKE_REGIONS)
        return 0;
    const uint32_t *l1 = &fake_via.att[handle * NV_ATT_L1_STRIDE_WORDS];
    uint64_t start = field(l1, NV_ATT_L1_START_VA_OFFSET, NV_ATT_L1_START_VA_BYTES);
    uint64_t length = field(l1, NV_ATT_L1_LENGTH_OFFSET, NV_ATT_L1_LENGTH_BYTES);
    uint32_t attrs = (uint32_t)field(l1, NV_ATT_L1_ATTRIBUTES_OFFSET, NV_ATT_L1_ATTRIBUTES_BYTES);
    if (!(attrs & NV_ATT_L1_ATTRIBUTES_VALID_MASK) || (right && !(attrs & right)) || va < start ||
        va + n > start + length)
        return 0;
    return (uint32_t)va;
}

static void complete(uint32_t desc, uint32_t length, uint32_t status_bits)
{
    uint32_t w[8];
    host_read(desc, w, sizeof w);
    put(w, NV_DESC_CONTROL_LENGTH_OFFSET, NV_DESC_CONTROL_LENGTH_BYTES, length);
    put(w, NV_DESC_CONTROL_STATUS_OFFSET, NV_DESC_CONTROL_STATUS_BYTES, NV_DESC_CONTROL_STATUS_DONE_MASK | status_bits);
    host_write(desc, w, sizeof w);
}

static void engine(unsigned vi, int send_queue, uint32_t desc)
{
    if (!send_queue) {
        rq[vi].recv[(rq[vi].head + rq[vi].count++) % MAX_POSTED] = desc;
        return;
    }
    unsigned peer = vi == vis[0] ? vis[1] : vis[0];
    uint32_t w[20];
    int repost = fake_via.vi[vi].sq_reposts != kept[vi].reposts_seen;
    kept[vi].reposts_seen = fake_via.vi[vi].sq_reposts;
    if (repost && kept[vi].desc == desc) {
        memcpy(w, kept[vi].words, sizeof w);
    } else {
        host_read(desc, w, sizeof w);
        kept[vi].desc = desc;
        memcpy(kept[vi].words, w, sizeof w);
    }
    unsigned op = (unsigned)(field(w, NV_DESC_CONTROL_CONTROL_OFFSET, 2) & NV_DESC_CONTROL_CONTROL_OP_MASK) >>
                  NV_DESC_CONTROL_CONTROL_OP_SHIFT;
    unsigned nsegs = (unsigned)field(w, NV_DESC_CONTROL_SEG_COUNT_OFFSET, NV_DESC_CONTROL_SEG_COUNT_BYTES);
    unsigned at = NV_DESC_CONTROL_SIZE + (op == NV_CONTROL_OP_SENDRECV ? 0 : NV_DESC_ADDRESS_SIZE);
    static uint8_t data[16384];
    uint32_t total = 0;
    if (op == NV_CONTROL_OP_RDMA_READ) {
        uint64_t rva = field(w, NV_DESC_CONTROL_SIZE + NV_DESC_ADDRESS_REMOTE_VA_OFFSET, 8);
        uint32_t rh = (uint32_t)field(w, NV_DESC_CONTROL_SIZE + NV_DESC_ADDRESS_REMOTE_HANDLE_OFFSET, 4);
        uint32_t n = (uint32_t)field(w, at + NV_DESC_DATA_LENGTH_OFFSET, 4);
        uint32_t src = lookup(rva, rh, n, NV_ATT_L1_ATTRIBUTES_RDMA_READ_MASK);
        uint32_t dst = lookup(field(w, at + NV_DESC_DATA_VA_OFFSET, 8),
                              (uint32_t)field(w, at + NV_DESC_DATA_HANDLE_OFFSET, 4), n, 0);
        if (!src || !dst) {
            refused_segments++;
            complete(desc, 0, NV_DESC_STATUS_ERROR_MASK & -NV_DESC_STATUS_ERROR_MASK); /* some error bit */
            return;
        }
        host_read(src, data, n);
        host_write(dst, data, n);
        complete(desc, n, 0);
        return;
    }
    for (unsigned i = 0; i < nsegs; i++, at += NV_DESC_DATA_SIZE) {
        uint32_t n = (uint32_t)field(w, at + NV_DESC_DATA_LENGTH_OFFSET, 4);
        uint32_t pa = lookup(field(w, at + NV_DESC_DATA_VA_OFFSET, 8),
                             (uint32_t)field(w, at + NV_DESC_DATA_HANDLE_OFFSET, 4), n, 0);
        if (!pa) {
            refused_segments++;
            return;
        }
        host_read(pa, data + total, n);
        total += n;
    }
    if (rq[peer].count == 0) { /* VIA: the connection breaks */
        sends_without_receive++;
        return;
    }
    uint32_t rdesc = rq[peer].recv[rq[peer].head];
    rq[peer].head = (rq[peer].head + 1) % MAX_POSTED;
    rq[peer].count--;
    uint32_t r[12];
    host_read(rdesc, r, sizeof r);
    uint32_t n = (uint32_t)field(r, NV_DESC_CONTROL_SIZE + NV_DESC_DATA_LENGTH_OFFSET, 4);
    uint32_t pa = lookup(field(r, NV_DESC_CONTROL_SIZE + NV_DESC_DATA_VA_OFFSET, 8),
                         (uint32_t)field(r, NV_DESC_CONTROL_SIZE + NV_DESC_DATA_HANDLE_OFFSET, 4), n, 0);
    CHECK(pa != 0 && total <= n);
    host_write(pa, data, total);
    uint32_t imm_bits = 0;
    if (field(w, NV_DESC_CONTROL_CONTROL_OFFSET, 2) & NV_DESC_CONTROL_CONTROL_IMMEDIATE_MASK) {
        put(r, NV_DESC_CONTROL_IMMEDIATE_DATA_OFFSET, 4, field(w, NV_DESC_CONTROL_IMMEDIATE_DATA_OFFSET, 4));
        host_write(rdesc, r, 32);
        imm_bits = NV_DESC_CONTROL_STATUS_IMMEDIATE_MASK;
    }
    complete(rdesc, total, imm_bits);
    complete(desc, total, 0);
    if (auto_receive >= 0 && peer == vis[auto_receive]) { /* the receiver was waiting */
        int who = auto_receive;
        auto_receive = -1;
        auto_result = nv_pp_recv(&ep[who], user[who], auto_capacity, &auto_length);
    }
}

#define AREA(i) (FAKE_HOST_BASE + (i)*NV_PP_AREA_BYTES)
#define DESC(i) (FAKE_HOST_BASE + 0x8000u + (i)*0x800u)
#define USER(i) (FAKE_HOST_BASE + 0x9000u + (i)*0x2000u)
#define PAGE_LIST (FAKE_HOST_BASE + 0xf000u)

static uint32_t register_area(uint32_t tag, uint32_t pa, uint32_t length)
{
    uint32_t pages = (length + NV_ATT_PAGE_SIZE - 1) / NV_ATT_PAGE_SIZE, handle = 0;
    for (uint32_t i = 0; i < pages; i++)
        fake_host_put32(PAGE_LIST + 4 * i, pa + i * NV_ATT_PAGE_SIZE);
    CHECK(nv_via_register_mem(&via, pa, length, tag, 0, PAGE_LIST, pages, &handle) == NV_VIP_SUCCESS);
    return handle;
}

static unsigned valid_regions(void)
{
    unsigned n = 0;
    for (unsigned h = 0; h < FAKE_REGIONS; h++)
        n += lookup(field(&fake_via.att[h * NV_ATT_L1_STRIDE_WORDS], 0, 8), h, 1, 0) != 0;
    return n;
}

static void open_pair(unsigned scheme, uint32_t threshold, uint32_t timeout_us)
{
    fake_card_reset(0);
    fake_via_reset();
    fake.cycles_per_read = 10;
    CHECK(nv_via_init(&via, 0, 100000000u) == NV_OK);
    memset(rq, 0, sizeof rq);
    memset(kept, 0, sizeof kept);
    sends_without_receive = refused_segments = 0;
    auto_receive = -1;
    fake_via.doorbell_hook = engine;
    uint32_t args[16] = {0};
    CHECK(nv_via_command(&via, NV_MBOX_CREATE_PTAG, args) == NV_VIP_SUCCESS);
    uint32_t tag = args[NV_MBOX_CREATE_PTAG_RES_PTAG];
    for (unsigned i = 0; i < 2; i++) {
        uint32_t a[16] = {[NV_MBOX_CREATE_VI_ARG_PTAG] = tag,
                          [NV_MBOX_CREATE_VI_ARG_SEND_CQ] = NV_MBOX_NONE,
                          [NV_MBOX_CREATE_VI_ARG_RECV_CQ] = NV_MBOX_NONE,
                          [NV_MBOX_CREATE_VI_ARG_DESC_BASE] = DESC(i),
                          [NV_MBOX_CREATE_VI_ARG_DESC_SIZE] = NV_DESC_CONTROL_SIZE};
        CHECK(nv_via_command(&via, NV_MBOX_CREATE_VI, a) == NV_VIP_SUCCESS);
        vis[i] = a[NV_MBOX_CREATE_VI_RES_VI];
        fake_via.vi[vis[i]].state = NV_VI_STATE_CONNECTED;
        user[i] = (struct nv_pp_buf){USER(i), USER(i)};
    }
    for (unsigned i = 0; i < 2; i++) {
        struct nv_pp_config cfg = {.scheme = scheme,
                                   .threshold = threshold,
                                   .vi = vis[i],
                                   .area = {AREA(i), AREA(i)},
                                   .area_handle = register_area(tag, AREA(i), NV_PP_AREA_BYTES),
                                   .desc = DESC(i),
                                   .timeout_us = timeout_us};
        CHECK(nv_pp_open(&ep[i], &via, &cfg) == NV_VIP_SUCCESS);
        CHECK(rq[vis[i]].count == NV_PP_SLOTS);
    }
}

static void fill(unsigned who, uint32_t n, uint32_t seed)
{
    for (uint32_t k = 0; k < n; k++)
        fake_via.host[user[who].pa - FAKE_HOST_BASE + k] = (uint8_t)(k * 31u + seed);
}

static int intact(unsigned who, uint32_t n, uint32_t seed)
{
    for (uint32_t k = 0; k < n; k++)
        if (fake_via.host[user[who].pa - FAKE_HOST_BASE + k] != (uint8_t)(k * 31u + seed))
            return 0;
    return 1;
}

static void test_every_size_class_under_both_schemes(void)
{
    const uint32_t t = 64;
    const uint32_t sizes[] = {0, 1, NV_PP_REGISTER_BYTES, NV_PP_REGISTER_BYTES + 1, t - 1, t, t + 1, 3 * t + 5, 5000};
    for (unsigned scheme = 0; scheme < 2; scheme++) {
        open_pair(scheme, t, 1000);
        unsigned regions = valid_regions();
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            uint32_t n = sizes[i];
            struct nv_pp_plan p;
            nv_pp_plan(scheme, t, n, &p);
            fill(0, n, i + 10 * scheme);
            memset(&fake_via.host[user[1].pa - FAKE_HOST_BASE], 0xee, n + 8);
            struct nv_pp_stats s0 = ep[0].stats, s1 = ep[1].stats;
            auto_receive = 1;
            auto_capacity = n + 8;
            auto_length = 0xffffffffu;
            ep[0].stamp_next = i % 2 == 0; /* one-way times of the stamped messages only */
            CHECK(nv_pp_send(&ep[0], user[0], n) == NV_VIP_SUCCESS);
            CHECK(ep[1].stats.one_ways - s1.one_ways == (i % 2 == 0 ? 1u : 0u));
            CHECK(auto_receive == -1 && auto_result == NV_VIP_SUCCESS && auto_length == n);
            CHECK(intact(1, n, i + 10 * scheme));
            CHECK(fake_via.host[user[1].pa - FAKE_HOST_BASE + n] == 0xee); /* nothing past the message */
            CHECK(ep[1].stats.pulls - s1.pulls == (p.pulled ? 1u : 0u));
            /* What was translated, and what was copied, is what the scheme says. */
            uint32_t sender_pages = ep[0].stats.translated_pages - s0.translated_pages;
            if (scheme == NV_PP_SCHEME_ORIGINAL)
                CHECK((sender_pages > 0) == (n > 0) && ep[0].stats.copied_bytes == s0.copied_bytes);
            else
                CHECK((sender_pages > 0) == (p.pulled > 0) &&
                      ep[0].stats.copied_bytes - s0.copied_bytes == (p.path == NV_PP_PATH_BOUNCE ? p.pushed : 0));
            CHECK(valid_regions() == regions); /* every translation was dropped */
            /* And back (the ping-pong's pong), receiver posted early the other way. */
            fill(1, n, 99 + i);
            auto_receive = 0;
            auto_capacity = n;
            ep[1].stamp_next = 1;
            CHECK(nv_pp_send(&ep[1], user[1], n) == NV_VIP_SUCCESS);
            CHECK(auto_result == NV_VIP_SUCCESS && auto_length == n && intact(0, n, 99 + i));
        }
        CHECK(nv_pp_drain(&ep[0]) == NV_VIP_SUCCESS && nv_pp_drain(&ep[1]) == NV_VIP_SUCCESS);
        CHECK(sends_without_receive == 0 && refused_segments == 0);
        CHECK(ep[0].stats.one_ways == 9 && ep[1].stats.one_ways == 5);
    }
}

static void test_receiver_not_posted_yet_and_credits(void)
{
    const uint32_t t = 64;
    for (unsigned scheme = 0; scheme < 2; scheme++) {
        open_pair(scheme, t, 200);
        /* Short messages wait in the pushed buffer until the receive is posted; the sender never
         * sends without a slot: after NV_PP_SLOTS it waits for credits (here: times out). */
        for (unsigned i = 0; i < NV_PP_SLOTS; i++) {
            fill(0, t, 40 + i);
            CHECK(nv_pp_send(&ep[0], user[0], t - i) == NV_VIP_SUCCESS);
        }
        CHECK(nv_pp_send(&ep[0], user[0], 1) == NV_VIP_TIMEOUT);
        CHECK(sends_without_receive == 0 && ep[0].credits == 0);
        fill(0, t, 0); /* the sender's buffer changes: what was pushed must not */
        for (unsigned i = 0; i < NV_PP_SLOTS; i++) {
            uint32_t length = 0;
            CHECK(nv_pp_recv(&ep[1], user[1], t, &length) == NV_VIP_SUCCESS);
            CHECK(length == t - i && intact(1, t - i, 40 + i));
        }
        /* The receiver owed most of its slots and said so (CREDIT): the sender can go on. */
        CHECK(ep[1].owed < NV_PP_SLOTS - 1);
        fill(0, 5, 7);
        CHECK(nv_pp_send(&ep[0], user[0], 5) == NV_VIP_SUCCESS);
        uint32_t length = 0;
        CHECK(nv_pp_recv(&ep[1], user[1], t, &length) == NV_VIP_SUCCESS && length == 5 && intact(1, 5, 7));
        CHECK(sends_without_receive == 0 && refused_segments == 0);
    }
}

static void test_long_message_waits_for_its_pull(void)
{
    /* A long message whose receive is not posted: the pushed part waits, the sender keeps its
     * buffer (no ACK) and gives up at its timeout; the pushed part is still there afterwards. */
    const uint32_t t = 64;
    open_pair(NV_PP_SCHEME_ADVANCED, t, 100);
    fill(0, 300, 3);
    CHECK(nv_pp_send(&ep[0], user[0], 300) == NV_VIP_TIMEOUT);
    CHECK(ep[1].stats.pulls == 0 && valid_regions() == 2); /* the pull region was dropped */
    CHECK(ep[1].posted_count == NV_PP_SLOTS);              /* not yet looked at */
}

/* A message below 256 bytes with nothing pulled carries its length in the header's first word
 * (SHORT); from 256 bytes the receiver reads LENGTH: both sides of that edge arrive whole. */
static void test_short_length_edge(void)
{
    const uint32_t t = 512, sizes[] = {255, 256, 257, t};
    for (unsigned scheme = 0; scheme < 2; scheme++) {
        open_pair(scheme, t, 1000);
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            fill(0, sizes[i], 20 + i);
            memset(&fake_via.host[user[1].pa - FAKE_HOST_BASE], 0xee, t + 8);
            CHECK(nv_pp_send(&ep[0], user[0], sizes[i]) == NV_VIP_SUCCESS);
            uint32_t length = 0;
            CHECK(nv_pp_recv(&ep[1], user[1], t + 8, &length) == NV_VIP_SUCCESS && length == sizes[i]);
            CHECK(intact(1, sizes[i], 20 + i) && fake_via.host[user[1].pa - FAKE_HOST_BASE + sizes[i]] == 0xee);
            uint32_t flags = fake_via.host[AREA(0) - FAKE_HOST_BASE + NV_PP_AREA_BOUNCE + NV_PP_HEADER_FLAGS_OFFSET];
            CHECK(scheme == NV_PP_SCHEME_ORIGINAL || !(flags & NV_PP_HEADER_FLAGS_SHORT_MASK) == (sizes[i] >= 256));
        }
        CHECK(ep[1].stats.pulls == 0 && sends_without_receive == 0 && refused_segments == 0);
    }
}

/* A small message touches only the host-memory words that change: every descriptor and header
 * was written whole when the endpoint opened, and one posted unchanged is reposted. Each access is
 * an uncached bus access on the card; a message nobody stamped reads no counter. */
static void test_small_message_writes_only_what_changed(void)
{
    const uint32_t t = 64;
    for (unsigned scheme = 0; scheme < 2; scheme++) {
        open_pair(scheme, t, 1000);
        for (unsigned i = 0; i < 2; i++) { /* two: the receiver does not owe enough to send a CREDIT */
            fill(0, 1, 5 + i);             /* a new byte each message */
            unsigned writes = fake_via.host_writes, reads = fake_via.host_reads;
            unsigned doorbells = fake_via.vi[vis[1]].rq_doorbells, reposts = fake_via.vi[vis[0]].sq_reposts;
            unsigned counter_reads = fake.cycles_reads;
            CHECK(nv_pp_send(&ep[0], user[0], 1) == NV_VIP_SUCCESS);
            unsigned sender_writes = fake_via.host_writes - writes, sender_reads = fake_via.host_reads - reads;
            if (scheme == NV_PP_SCHEME_ADVANCED) {
                /* The word and STATUS (a short message sends no SEQ); the last push's STATUS and the
                 * byte. The first push after open fetches its descriptor; the second is a repost. */
                CHECK(i == 0 || (sender_writes == 2 && sender_reads == 2));
                CHECK(fake_via.vi[vis[0]].sq_reposts - reposts == i);
            }
            writes = fake_via.host_writes, reads = fake_via.host_reads;
            uint32_t length = 0;
            CHECK(nv_pp_recv(&ep[1], user[1], 1, &length) == NV_VIP_SUCCESS && length == 1 && intact(1, 1, 5 + i));
            /* The byte into the user buffer (a byte store: the word around it is not read) and,
             * from the second on, the last message's slot posted again before the poll (its STATUS;
             * the doorbell is a card register); the slot's STATUS, the header's first word (with the
             * length of a short message) and the word behind it. The slot this message came in
             * waits for the library's next call: nothing between a message and its answer re-posts
             * it. */
            CHECK(fake_via.host_writes - writes == 1 + i && fake_via.host_reads - reads == 3);
            CHECK(fake_via.vi[vis[1]].rq_doorbells == doorbells + i);
            CHECK(ep[1].taken != 0 && ep[1].posted_count == NV_PP_SLOTS - 1);
            CHECK(fake.cycles_reads == counter_reads);
        }
        unsigned doorbells = fake_via.vi[vis[1]].rq_doorbells;
        CHECK(nv_pp_drain(&ep[1]) == NV_VIP_SUCCESS); /* the endpoint's slots all posted again */
        CHECK(ep[1].taken == 0 && ep[1].posted_count == NV_PP_SLOTS &&
              fake_via.vi[vis[1]].rq_doorbells == doorbells + 1);
        /* The original scheme registered and dropped the user buffer for every message. */
        CHECK(scheme == NV_PP_SCHEME_ADVANCED || ep[0].stats.translated_pages == 2);
        CHECK(sends_without_receive == 0 && refused_segments == 0);
    }
}

/* A message of 1 to 3 bytes goes into the user buffer in as few stores as hold it: 1 or 2 bytes at
 * an even address in one (a byte or a halfword), as 4 bytes in one word; 3 bytes in two. The byte
 * after the message is not touched. Ping-pongs, so that the answers carry the credits back. */
static void test_a_few_bytes_go_in_one_store_or_two(void)
{
    const uint32_t t = 64, sizes[] = {4, 2, 1, 3, 2}, stores[] = {1, 1, 1, 2, 1};
    open_pair(NV_PP_SCHEME_ADVANCED, t, 1000);
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t n = sizes[i], length = 0;
        fill(0, n, 40 + i);
        memset(&fake_via.host[user[1].pa - FAKE_HOST_BASE], 0xee, 8);
        CHECK(nv_pp_send(&ep[0], user[0], n) == NV_VIP_SUCCESS);
        unsigned writes = fake_via.host_writes;
        CHECK(nv_pp_recv(&ep[1], user[1], n, &length) == NV_VIP_SUCCESS && length == n);
        /* ... and from the second message on, the last one's slot posted again (its STATUS) */
        CHECK(fake_via.host_writes - writes == stores[i] + (i > 0));
        CHECK(intact(1, n, 40 + i) && fake_via.host[user[1].pa - FAKE_HOST_BASE + n] == 0xee);
        CHECK(nv_pp_send(&ep[1], user[1], n) == NV_VIP_SUCCESS);
        CHECK(nv_pp_recv(&ep[0], user[0], n, &length) == NV_VIP_SUCCESS && length == n && intact(0, n, 40 + i));
    }
}

/* A receive that waits takes the last push's completion, so the next send reads it no more; a push
 * that completed in error is left for that send to report, not lost. */
static void test_a_waiting_receive_takes_the_last_pushs_completion(void)
{
    const uint32_t t = 64;
    open_pair(NV_PP_SCHEME_ADVANCED, t, 50);
    for (unsigned bad = 0; bad < 2; bad++) {
        fill(0, 4, 1);
        CHECK(nv_pp_send(&ep[0], user[0], 4) == NV_VIP_SUCCESS);
        struct nv_pp_desc *push = &ep[0].send[NV_PP_SEND_REGISTER];
        CHECK(push->posted);
        uint32_t status_at = push->r.pa + NV_DESC_CONTROL_STATUS_OFFSET;
        if (bad) /* as the card reports a push it gave up on */
            fake_host_put32(status_at, NV_DESC_CONTROL_STATUS_DONE_MASK | NV_DESC_CONTROL_STATUS_TRANSPORT_ERROR_MASK);
        uint32_t length = 0;
        CHECK(nv_pp_recv(&ep[0], user[0], t, &length) == NV_VIP_TIMEOUT); /* nothing comes back */
        CHECK(push->posted == bad);
        unsigned reads = fake_via.host_reads;
        uint32_t sent = nv_pp_send(&ep[0], user[0], 4);
        if (bad) {
            CHECK(sent == NV_VIP_ERROR);
        } else {
            CHECK(sent == NV_VIP_SUCCESS);
            CHECK(fake_via.host_reads - reads == 1); /* the user's word; no STATUS */
            for (unsigned k = 0; k < 2; k++) {       /* both pushes arrive, the second from its copy */
                CHECK(nv_pp_recv(&ep[1], user[1], t, &length) == NV_VIP_SUCCESS && length == 4);
                CHECK(intact(1, 4, 1));
            }
            CHECK(fake_via.vi[vis[0]].sq_reposts == 1 && sends_without_receive == 0);
        }
    }
}

/* A receive that polls the oldest slot straight and finds a control message there (here the peer's
 * CREDIT, ahead of its data) hands it to the general receive: the credits count, the data after it
 * arrives whole, and both slots are posted again at once. */
static void test_a_control_message_ahead_of_a_small_one(void)
{
    const uint32_t t = 64;
    open_pair(NV_PP_SCHEME_ADVANCED, t, 200);
    for (unsigned i = 0; i < NV_PP_SLOTS; i++) { /* the peer fills our slots; we take them all */
        fill(1, 4, 60 + i);
        CHECK(nv_pp_send(&ep[1], user[1], 4) == NV_VIP_SUCCESS);
    }
    CHECK(ep[1].credits == 0);
    for (unsigned i = 0; i < NV_PP_SLOTS; i++) {
        uint32_t length = 0;
        CHECK(nv_pp_recv(&ep[0], user[0], t, &length) == NV_VIP_SUCCESS && length == 4 && intact(0, 4, 60 + i));
    }
    /* The last receive owed most of our slots and sent a CREDIT, which waits in the peer's oldest
     * slot; our data follows it. */
    CHECK(ep[0].owed == 0 && ep[0].taken == 0);
    fill(0, 3, 77);
    CHECK(nv_pp_send(&ep[0], user[0], 3) == NV_VIP_SUCCESS);
    unsigned doorbells = fake_via.vi[vis[1]].rq_doorbells;
    uint32_t length = 0;
    CHECK(nv_pp_recv(&ep[1], user[1], t, &length) == NV_VIP_SUCCESS && length == 3 && intact(1, 3, 77));
    CHECK(ep[1].credits == NV_PP_SLOTS); /* all four of its pushes' slots came back with the CREDIT */
    CHECK(fake_via.vi[vis[1]].rq_doorbells == doorbells + 2 && ep[1].taken == 0 && ep[1].owed == 2);
    fill(1, 2, 88); /* and the answer goes, telling of both */
    CHECK(nv_pp_send(&ep[1], user[1], 2) == NV_VIP_SUCCESS);
    CHECK(nv_pp_recv(&ep[0], user[0], t, &length) == NV_VIP_SUCCESS && length == 2 && intact(0, 2, 88));
    CHECK(ep[0].credits == 2 + 2); /* the CREDIT and the data took two of its four; both told back */
    CHECK(sends_without_receive == 0 && refused_segments == 0);
}

static void test_refuses_what_does_not_fit(void)
{
    const uint32_t t = 64;
    open_pair(NV_PP_SCHEME_ORIGINAL, t, 200);
    fill(0, 40, 1);
    CHECK(nv_pp_send(&ep[0], user[0], 40) == NV_VIP_SUCCESS);
    uint32_t length = 0;
    CHECK(nv_pp_recv(&ep[1], user[1], 39, &length) == NV_VIP_INVALID_PARAMETER);
    CHECK(ep[1].posted_count == NV_PP_SLOTS); /* its slot is posted again */
    struct nv_pp_config bad = ep[0].cfg;
    bad.threshold = NV_PP_MAX_PUSH + 1;
    struct nv_pp other;
    CHECK(nv_pp_open(&other, &via, &bad) == NV_VIP_INVALID_PARAMETER);
    bad = ep[0].cfg;
    bad.desc += 4;
    CHECK(nv_pp_open(&other, &via, &bad) == NV_VIP_INVALID_PARAMETER);
    fake_via.vi[vis[0]].state = NV_VI_STATE_IDLE;
    CHECK(nv_pp_open(&other, &via, &ep[0].cfg) == NV_VIP_INVALID_PARAMETER);
    /* The benchmark's push-pull runs need the endpoint opened first on that VI. */
    struct nv_bench_args a = {.role = 1,
                              .op = NV_PP_BENCH_OP_ADVANCED,
                              .vi = vis[1],
                              .size = 4,
                              .iterations = 1,
                              .buf_va = AREA(1),
                              .buf_pa = AREA(1),
                              .desc = DESC(1) + 0x100};
    uint32_t words[16] = {[NV_PP_ARG_THRESHOLD] = t};
    struct nv_bench_result r;
    CHECK(nv_pp_bench(&via, &a, words, &r) == NV_VIP_INVALID_STATE);
    words[NV_PP_ARG_THRESHOLD] = NV_PP_MAX_PUSH + 1;
    CHECK(nv_pp_bench(&via, &a, words, &r) == NV_VIP_INVALID_PARAMETER);
}

int main(void)
{
    test_plan_at_the_threshold();
    test_every_size_class_under_both_schemes();
    test_receiver_not_posted_yet_and_credits();
    test_long_message_waits_for_its_pull();
    test_small_message_writes_only_what_changed();
    test_a_few_bytes_go_in_one_store_or_two();
    test_short_length_edge();
    test_a_waiting_receive_takes_the_last_pushs_completion();
    test_a_control_message_ahead_of_a_small_one();
    test_refuses_what_does_not_fit();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
