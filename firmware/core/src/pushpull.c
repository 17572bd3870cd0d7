/* Push-pull messaging over the VIA engine: the original scheme and the push-pull paper's advanced scheme.
 *
 * What each scheme does with one message of LENGTH bytes, PUSHED = min(LENGTH, bytes_to_push),
 * PULLED = the rest (nv_pp_plan; docs/via.md "Push-pull messaging"):
 *
 *   original  sender: translate the whole user buffer (ATT entries for its pages), push header +
 *             PUSHED bytes gathered from it, wait for the push, wait for the ACK if anything is
 *             pulled, drop the translation.
 *             receiver: wait for the push; only then translate the destination's pulled part,
 *             copy the pushed part, pull (RDMA read), then send the ACK and wait for it.
 *   advanced  sender, variable zero buffer: the pushed part is copied behind the header into a
 *             pre-registered bounce slot (no translation for a message up to bytes_to_push; only
 *             the pulled part is translated), and a message of at most NV_PP_REGISTER_BYTES rides
 *             in the descriptor's immediate data (the early-message register path). The sender
 *             does not wait for its push (reaped before the slot is reused).
 *             receiver, translation masking: the destination beyond bytes_to_push is translated
 *             when the receive is posted, while the push is still on its way; send/ack overlap:
 *             the ACK is queued behind the RDMA read (the engine holds a VI's queue until a read's
 *             response is in, so the ACK leaves the moment the data is in, with no CPU turn), and
 *             the pushed part is copied while the pull is on the wire.
 *
 * A message that arrives before its receive waits in its pushed-buffer slot; the pull waits for
 * the receive. Slots are credits: every header returns the slots its sender re-posted. */
#include <stddef.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia/pushpull.h"
#include "numavia_regs.h"
#include "numavia_via.h"
#include "via_internal.h"

#define DESC_BYTES 128u
#define RECV_DESC(slot) ((slot)*DESC_BYTES)
#define SEND_DESC(n) ((NV_PP_SLOTS + (n) % NV_PP_SEND_DESCS) * DESC_BYTES)
#define DESC_AREA ((NV_PP_SLOTS + NV_PP_SEND_DESCS) * DESC_BYTES)
#define MAX_DESC_WORDS 20u
#define NO_HANDLE 0xffffffffu
#define PAGE_MASK (NV_ATT_PAGE_SIZE - 1u)
#define HDR(field) NV_PP_HEADER_##field##_OFFSET, NV_PP_HEADER_##field##_BYTES
#define CTRL(field) NV_DESC_CONTROL_##field##_OFFSET, NV_DESC_CONTROL_##field##_BYTES
#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        uint32_t r_ = (x);                                                                                             \
        if (r_ != NV_VIP_SUCCESS)                                                                                      \
            return r_;                                                                                                 \
    } while (0)
/* A message's path, kept together in the image (numavia/platform.h): the benchmark times it. */
#define TIMED NV_TIMED(pushpull)
#define TIMED_LOOP NV_TIMED_ENTRY(pushpull)

/* Records (descriptors, headers) are little-endian with every field inside one 32-bit word, or
 * two whole words for 8-byte addresses (checked below), so fields are set with word operations:
 * nv_put_field's byte loop with 64-bit shifts costs hundreds of cycles per field on this core, too
 * much for a library that builds several records per message. */
#define FITS(prefix) (prefix##_OFFSET % 4 + prefix##_BYTES <= 4 || (prefix##_BYTES == 8 && prefix##_OFFSET % 4 == 0))
_Static_assert(FITS(NV_PP_HEADER_KIND) && FITS(NV_PP_HEADER_FLAGS) && FITS(NV_PP_HEADER_CREDITS) &&
                   FITS(NV_PP_HEADER_SEQ) && FITS(NV_PP_HEADER_LENGTH) && FITS(NV_PP_HEADER_PUSHED) &&
                   FITS(NV_PP_HEADER_PULL_VA) && FITS(NV_PP_HEADER_PULL_HANDLE) && FITS(NV_PP_HEADER_SENT_CYCLES),
               "push-pull header fields must sit inside words");
_Static_assert(FITS(NV_DESC_CONTROL_SEG_COUNT) && FITS(NV_DESC_CONTROL_CONTROL) &&
                   FITS(NV_DESC_CONTROL_IMMEDIATE_DATA) && FITS(NV_DESC_ADDRESS_REMOTE_VA) &&
                   FITS(NV_DESC_ADDRESS_REMOTE_HANDLE) && FITS(NV_DESC_DATA_VA) && FITS(NV_DESC_DATA_HANDLE) &&
                   FITS(NV_DESC_DATA_LENGTH) && NV_DESC_CONTROL_SIZE % 4 == 0 && NV_DESC_ADDRESS_SIZE % 4 == 0 &&
                   NV_DESC_DATA_SIZE % 4 == 0,
               "descriptor fields must sit inside words");

static inline TIMED void put_field(uint32_t *w, unsigned offset, unsigned bytes, uint64_t value)
{
    if (bytes == 8) {
        w[offset / 4] = (uint32_t)value;
        w[offset / 4 + 1] = (uint32_t)(value >> 32);
        return;
    }
    unsigned shift = 8 * (offset % 4);
    uint32_t mask = (bytes == 4 ? 0xffffffffu : (1u << (8 * bytes)) - 1u) << shift;
    w[offset / 4] = (w[offset / 4] & ~mask) | (((uint32_t)value << shift) & mask);
}

static inline TIMED uint64_t get_field(const uint32_t *w, unsigned offset, unsigned bytes)
{
    if (bytes == 8)
        return (uint64_t)w[offset / 4 + 1] << 32 | w[offset / 4];
    uint32_t v = w[offset / 4] >> (8 * (offset % 4));
    return bytes == 4 ? v : v & ((1u << (8 * bytes)) - 1u);
}

TIMED void nv_pp_plan(unsigned scheme, uint32_t threshold, uint32_t length, struct nv_pp_plan *p)
{
    if (threshold > NV_PP_MAX_PUSH)
        threshold = NV_PP_MAX_PUSH;
    p->pushed = length < threshold ? length : threshold;
    p->pulled = length - p->pushed;
    if (scheme == NV_PP_SCHEME_ADVANCED) {
        p->path = p->pulled == 0 && length <= NV_PP_REGISTER_BYTES ? NV_PP_PATH_REGISTER : NV_PP_PATH_BOUNCE;
        p->send_translates = p->pulled ? 2 : 0;
        p->recv_translates_early = 1;
        p->ack_overlaps_pull = 1;
    } else {
        p->path = NV_PP_PATH_GATHER;
        p->send_translates = length ? 1 : 0;
        p->recv_translates_early = 0;
        p->ack_overlaps_pull = 0;
    }
}

/* --- host memory ---------------------------------------------------------------------------- */

static TIMED uint8_t read_byte(uint32_t pa)
{
    return (uint8_t)(nv_host_read32(pa & ~3u) >> (8 * (pa & 3u)));
}

static TIMED void write_byte(uint32_t pa, uint8_t value)
{
    uint32_t shift = 8 * (pa & 3u), word = nv_host_read32(pa & ~3u);
    nv_host_write32(pa & ~3u, (word & ~(0xffu << shift)) | (uint32_t)value << shift);
}

/* A CPU copy through the uncached window: words where source and destination agree mod 4. */
static TIMED void host_copy(uint32_t dst, uint32_t src, uint32_t n)
{
    if (((dst ^ src) & 3u) == 0) {
        for (; n && (dst & 3u); n--)
            write_byte(dst++, read_byte(src++));
        for (; n >= 4; n -= 4, dst += 4, src += 4)
            nv_host_write32(dst, nv_host_read32(src));
    }
    for (; n; n--)
        write_byte(dst++, read_byte(src++));
}

/* --- descriptors ---------------------------------------------------------------------------- */

struct seg {
    uint64_t va;
    uint32_t handle, length;
};

struct desc {
    uint32_t op, immediate;
    int has_immediate, rdma;
    uint64_t remote_va;
    uint32_t remote_handle;
    struct seg segs[2];
    unsigned nsegs;
};

/* Write the descriptor (STATUS zero) at `offset` of the descriptor page and ring the doorbell. */
static TIMED void post(const struct nv_pp *pp, int send_queue, uint32_t offset, const struct desc *d)
{
    uint32_t w[MAX_DESC_WORDS] = {0};
    uint32_t at = NV_DESC_CONTROL_SIZE;
    put_field(w, CTRL(SEG_COUNT), d->nsegs);
    put_field(w, CTRL(CONTROL),
              d->op << NV_DESC_CONTROL_CONTROL_OP_SHIFT |
                  (d->has_immediate ? NV_DESC_CONTROL_CONTROL_IMMEDIATE_MASK : 0));
    put_field(w, CTRL(IMMEDIATE_DATA), d->immediate);
    if (d->rdma) {
        put_field(w, at + NV_DESC_ADDRESS_REMOTE_VA_OFFSET, NV_DESC_ADDRESS_REMOTE_VA_BYTES, d->remote_va);
        put_field(w, at + NV_DESC_ADDRESS_REMOTE_HANDLE_OFFSET, NV_DESC_ADDRESS_REMOTE_HANDLE_BYTES, d->remote_handle);
        at += NV_DESC_ADDRESS_SIZE;
    }
    for (unsigned i = 0; i < d->nsegs; i++, at += NV_DESC_DATA_SIZE) {
        put_field(w, at + NV_DESC_DATA_VA_OFFSET, NV_DESC_DATA_VA_BYTES, d->segs[i].va);
        put_field(w, at + NV_DESC_DATA_HANDLE_OFFSET, NV_DESC_DATA_HANDLE_BYTES, d->segs[i].handle);
        put_field(w, at + NV_DESC_DATA_LENGTH_OFFSET, NV_DESC_DATA_LENGTH_BYTES, d->segs[i].length);
    }
    uint32_t addr = pp->cfg.desc + offset;
    for (unsigned i = 0; i < at / 4; i++)
        nv_host_write32(addr + 4 * i, w[i]);
    nv_reg_write(send_queue ? NV_DOORBELL_VI_SQ_DOORBELL_AT(pp->cfg.vi) : NV_DOORBELL_VI_RQ_DOORBELL_AT(pp->cfg.vi),
                 addr);
}

/* 1 if the descriptor is done, 0 if not yet; VIP_ERROR (>1) if it completed in error. */
static TIMED uint32_t done(const struct nv_pp *pp, uint32_t offset)
{
    nv_host_sync();
    uint32_t status = nv_host_read32(pp->cfg.desc + offset + NV_DESC_CONTROL_STATUS_OFFSET);
    if (!(status & NV_DESC_CONTROL_STATUS_DONE_MASK))
        return 0;
    if (status & NV_DESC_STATUS_ERROR_MASK) {
        nv_log("pushpull: descriptor completed with status 0x%08lx\n", (unsigned long)status);
        return NV_VIP_ERROR;
    }
    return 1;
}

static TIMED int expired(const struct nv_pp *pp, uint32_t start)
{
    return nv_card_cycles32() - start > pp->timeout_cycles;
}

/* Reap send descriptors, in order, until `count` have completed. */
static TIMED uint32_t reap_sends(struct nv_pp *pp, uint32_t count)
{
    uint32_t start = nv_card_cycles32();
    while ((int32_t)(count - pp->sends_reaped) > 0) {
        uint32_t d = done(pp, SEND_DESC(pp->sends_reaped));
        if (d == 1)
            pp->sends_reaped++;
        else if (d != 0)
            return d;
        else if (expired(pp, start))
            return NV_VIP_TIMEOUT;
    }
    return NV_VIP_SUCCESS;
}

/* Post a send-queue descriptor; its number in *index. */
static TIMED uint32_t post_send(struct nv_pp *pp, const struct desc *d, uint32_t *index)
{
    if (pp->sends_posted - pp->sends_reaped >= NV_PP_SEND_DESCS)
        CHECK(reap_sends(pp, pp->sends_reaped + 1));
    *index = pp->sends_posted++;
    post(pp, 1, SEND_DESC(*index), d);
    return NV_VIP_SUCCESS;
}

static TIMED uint32_t area_pa(const struct nv_pp *pp, uint32_t offset)
{
    return pp->cfg.area.pa + offset;
}

static TIMED uint64_t area_va(const struct nv_pp *pp, uint32_t offset)
{
    return pp->cfg.area.va + offset;
}

/* --- pushed-buffer slots and incoming messages ---------------------------------------------- */

static TIMED void post_slot(struct nv_pp *pp, unsigned slot)
{
    struct desc d = {
        .op = NV_CONTROL_OP_SENDRECV,
        .nsegs = 1,
        .segs = {{area_va(pp, NV_PP_AREA_SLOTS + slot * NV_PP_SLOT_BYTES), pp->cfg.area_handle, NV_PP_SLOT_BYTES}}};
    post(pp, 0, RECV_DESC(slot), &d);
    pp->posted[(pp->posted_head + pp->posted_count) % NV_PP_SLOTS] = (uint8_t)slot;
    pp->posted_count++;
}

static TIMED void read_header(const struct nv_pp *pp, unsigned slot, uint32_t w[8])
{
    uint32_t at = area_pa(pp, NV_PP_AREA_SLOTS + slot * NV_PP_SLOT_BYTES);
    for (unsigned i = 0; i < NV_PP_HEADER_SIZE / 4; i++)
        w[i] = nv_host_read32(at + 4 * i);
}

/* Take the oldest posted slot if the engine has filled it: its credits count at once; an ACK or
 * CREDIT is consumed (the slot posted again), a DATA message waits for nv_pp_recv. */
static TIMED uint32_t poll_incoming(struct nv_pp *pp)
{
    if (pp->posted_count == 0)
        return NV_VIP_SUCCESS;
    unsigned slot = pp->posted[pp->posted_head];
    uint32_t d = done(pp, RECV_DESC(slot));
    if (d != 1)
        return d;
    pp->posted_head = (pp->posted_head + 1) % NV_PP_SLOTS;
    pp->posted_count--;
    uint32_t w[8];
    read_header(pp, slot, w);
    pp->credits += (uint32_t)get_field(w, HDR(CREDITS));
    uint32_t kind = (uint32_t)get_field(w, HDR(KIND));
    if (kind == NV_PP_KIND_DATA) {
        pp->arrived[(pp->arrived_head + pp->arrived_count) % NV_PP_SLOTS] = (uint8_t)slot;
        pp->arrived_count++;
        return NV_VIP_SUCCESS;
    }
    if (kind == NV_PP_KIND_ACK) {
        uint32_t seq = (uint32_t)get_field(w, HDR(SEQ));
        if ((int32_t)(seq - pp->acked_seq) > 0)
            pp->acked_seq = seq;
    } else if (kind != NV_PP_KIND_CREDIT) {
        nv_log("pushpull: message of unknown kind %lu dropped\n", (unsigned long)kind);
    }
    post_slot(pp, slot);
    pp->owed++;
    return NV_VIP_SUCCESS;
}

/* Wait until the peer has a slot for us. */
static TIMED uint32_t wait_credit(struct nv_pp *pp)
{
    uint32_t start = nv_card_cycles32();
    if (pp->credits == 0)
        pp->stats.credit_waits++;
    while (pp->credits == 0) {
        CHECK(poll_incoming(pp));
        if (expired(pp, start))
            return NV_VIP_TIMEOUT;
    }
    return NV_VIP_SUCCESS;
}

/* An ACK (for `seq`) or a CREDIT message: a header only, from the ack header area. */
static TIMED uint32_t send_control(struct nv_pp *pp, uint32_t kind, uint32_t seq, uint32_t *index)
{
    CHECK(reap_sends(pp, pp->ack_user));
    CHECK(wait_credit(pp));
    uint32_t w[8] = {0};
    put_field(w, HDR(KIND), kind);
    put_field(w, HDR(CREDITS), pp->owed);
    put_field(w, HDR(SEQ), seq);
    uint32_t at = NV_PP_AREA_HEADERS + NV_PP_HEADER_SIZE;
    for (unsigned i = 0; i < 8; i++)
        nv_host_write32(area_pa(pp, at) + 4 * i, w[i]);
    struct desc d = {
        .op = NV_CONTROL_OP_SENDRECV, .nsegs = 1, .segs = {{area_va(pp, at), pp->cfg.area_handle, NV_PP_HEADER_SIZE}}};
    CHECK(post_send(pp, &d, index));
    pp->ack_user = *index + 1;
    pp->credits--;
    pp->owed = 0;
    return NV_VIP_SUCCESS;
}

/* --- translation: a user range into the card's ATT ------------------------------------------- */

static TIMED uint32_t translate(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length, uint32_t list_offset,
                                uint32_t attributes, uint32_t *handle)
{
    *handle = NO_HANDLE;
    if (length == 0)
        return NV_VIP_SUCCESS;
    if ((buf.va & PAGE_MASK) != (buf.pa & PAGE_MASK))
        return NV_VIP_INVALID_PARAMETER;
    uint32_t pages = (uint32_t)(((buf.va + length - 1) >> NV_ATT_PAGE_SHIFT) - (buf.va >> NV_ATT_PAGE_SHIFT) + 1);
    if (pages > NV_PP_MAX_PAGES)
        return NV_VIP_INVALID_PARAMETER;
    uint32_t list = area_pa(pp, list_offset);
    for (uint32_t i = 0; i < pages; i++)
        nv_host_write32(list + 4 * i, i == 0 ? buf.pa : (buf.pa & ~PAGE_MASK) + i * NV_ATT_PAGE_SIZE);
    CHECK(nv_via_register_mem(pp->via, buf.va, length, pp->via->vi[pp->cfg.vi].ptag, attributes, list, pages, handle));
    pp->stats.translated_pages += pages;
    return NV_VIP_SUCCESS;
}

static TIMED void untranslate(struct nv_pp *pp, uint32_t *handle)
{
    if (*handle != NO_HANDLE)
        nv_via_deregister_mem(pp->via, *handle);
    *handle = NO_HANDLE;
}

static TIMED struct nv_pp_buf at_offset(struct nv_pp_buf buf, uint32_t offset)
{
    return (struct nv_pp_buf){buf.va + offset, buf.pa + offset};
}

/* --- the API ---------------------------------------------------------------------------------- */

uint32_t nv_pp_open(struct nv_pp *pp, struct nv_via *via, const struct nv_pp_config *cfg)
{
    if (!nv_via_vi_valid(via, cfg->vi) || nv_via_vi_state(cfg->vi) != NV_VI_STATE_CONNECTED ||
        cfg->threshold > NV_PP_MAX_PUSH || cfg->scheme > NV_PP_SCHEME_ADVANCED ||
        (cfg->desc & (NV_DESCRIPTOR_ALIGN - 1)) || !nv_via_host_range(via, cfg->desc, DESC_AREA) ||
        (cfg->area.pa & 3u) || !nv_via_host_range(via, cfg->area.pa, NV_PP_AREA_BYTES))
        return NV_VIP_INVALID_PARAMETER;
    uint32_t result = nv_via_set_desc_area(via, cfg->vi, cfg->desc, DESC_AREA);
    if (result != NV_VIP_SUCCESS)
        return result;
    *pp = (struct nv_pp){.via = via, .cfg = *cfg, .credits = NV_PP_SLOTS};
    uint32_t timeout_us = cfg->timeout_us ? cfg->timeout_us : 1000000u;
    if (timeout_us > 20000000u)
        timeout_us = 20000000u; /* the 32-bit cycle counter wraps after 42 s */
    pp->timeout_cycles = timeout_us * (via->clk_freq_hz / 1000000u);
    for (unsigned i = 0; i < NV_PP_SLOTS; i++)
        post_slot(pp, i);
    pp->open = 1;
    return NV_VIP_SUCCESS;
}

TIMED uint32_t nv_pp_send(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length)
{
    uint32_t t0 = nv_card_cycles32();
    if (!pp->open)
        return NV_VIP_INVALID_STATE;
    struct nv_pp_plan p;
    nv_pp_plan(pp->cfg.scheme, pp->cfg.threshold, length, &p);
    CHECK(wait_credit(pp));
    uint32_t seq = ++pp->send_seq, handle = NO_HANDLE, index;
    uint32_t w[8] = {0};
    put_field(w, HDR(KIND), NV_PP_KIND_DATA);
    put_field(w, HDR(SEQ), seq);
    put_field(w, HDR(LENGTH), length);
    put_field(w, HDR(PUSHED), p.pushed);
    put_field(w, HDR(SENT_CYCLES), t0);
    if (p.send_translates) {
        uint32_t from = p.send_translates == 1 ? 0 : p.pushed;
        CHECK(translate(pp, at_offset(buf, from), length - from, NV_PP_AREA_SEND_PAGES,
                        NV_ATT_L1_ATTRIBUTES_RDMA_READ_MASK, &handle));
    }
    if (p.pulled) {
        put_field(w, HDR(PULL_VA), buf.va + p.pushed);
        put_field(w, HDR(PULL_HANDLE), handle);
    }
    struct desc d = {.op = NV_CONTROL_OP_SENDRECV, .nsegs = 1};
    uint32_t header = p.path == NV_PP_PATH_GATHER ? NV_PP_AREA_HEADERS : NV_PP_AREA_BOUNCE;
    if (p.path == NV_PP_PATH_GATHER) {
        d.segs[0] = (struct seg){area_va(pp, header), pp->cfg.area_handle, NV_PP_HEADER_SIZE};
        if (p.pushed)
            d.segs[d.nsegs++] = (struct seg){buf.va, handle, p.pushed};
    } else {
        CHECK(reap_sends(pp, pp->bounce_user)); /* the bounce slot's last push has left */
        uint32_t bytes = 0;
        if (p.path == NV_PP_PATH_REGISTER) {
            uint32_t value = 0;
            for (uint32_t i = 0; i < length; i++)
                value |= (uint32_t)read_byte(buf.pa + i) << (8 * i);
            d.immediate = value;
            d.has_immediate = 1;
            put_field(w, HDR(FLAGS), NV_PP_HEADER_FLAGS_REGISTER_MASK);
        } else {
            host_copy(area_pa(pp, header + NV_PP_HEADER_SIZE), buf.pa, p.pushed);
            pp->stats.copied_bytes += p.pushed;
            bytes = p.pushed;
        }
        d.segs[0] = (struct seg){area_va(pp, header), pp->cfg.area_handle, NV_PP_HEADER_SIZE + bytes};
    }
    put_field(w, HDR(CREDITS), pp->owed);
    for (unsigned i = 0; i < 8; i++)
        nv_host_write32(area_pa(pp, header) + 4 * i, w[i]);
    uint32_t r = post_send(pp, &d, &index);
    if (r != NV_VIP_SUCCESS) {
        untranslate(pp, &handle);
        return r;
    }
    pp->credits--;
    pp->owed = 0;
    if (p.path == NV_PP_PATH_GATHER)
        r = reap_sends(pp, index + 1); /* the push gathered from the user buffer */
    else
        pp->bounce_user = index + 1;
    uint32_t start = nv_card_cycles32();
    while (r == NV_VIP_SUCCESS && p.pulled && (int32_t)(seq - pp->acked_seq) > 0) {
        r = poll_incoming(pp);
        if (r == NV_VIP_SUCCESS && expired(pp, start))
            r = NV_VIP_TIMEOUT;
    }
    untranslate(pp, &handle);
    return r;
}

/* Copy a message's pushed part out of its slot (or its immediate data) and post the slot again;
 * a receiver that owes most of its slots tells its peer (it may be sending only). */
static TIMED uint32_t take_pushed(struct nv_pp *pp, unsigned slot, const uint32_t *w, struct nv_pp_buf buf)
{
    uint32_t pushed = (uint32_t)get_field(w, HDR(PUSHED));
    if (get_field(w, HDR(FLAGS)) & NV_PP_HEADER_FLAGS_REGISTER_MASK) {
        uint32_t value = nv_host_read32(pp->cfg.desc + RECV_DESC(slot) + NV_DESC_CONTROL_IMMEDIATE_DATA_OFFSET);
        for (uint32_t i = 0; i < pushed; i++)
            write_byte(buf.pa + i, (uint8_t)(value >> (8 * i)));
    } else {
        host_copy(buf.pa, area_pa(pp, NV_PP_AREA_SLOTS + slot * NV_PP_SLOT_BYTES + NV_PP_HEADER_SIZE), pushed);
        pp->stats.copied_bytes += pushed;
    }
    post_slot(pp, slot);
    pp->owed++;
    return NV_VIP_SUCCESS;
}

TIMED uint32_t nv_pp_recv(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t capacity, uint32_t *length)
{
    if (!pp->open)
        return NV_VIP_INVALID_STATE;
    int advanced = pp->cfg.scheme == NV_PP_SCHEME_ADVANCED;
    uint32_t handle = NO_HANDLE, early_from = 0, r = NV_VIP_SUCCESS;
    if (advanced && capacity > pp->cfg.threshold) {
        /* Masking: translate what a long message will pull while its push is on its way. */
        early_from = pp->cfg.threshold;
        CHECK(translate(pp, at_offset(buf, early_from), capacity - early_from, NV_PP_AREA_RECV_PAGES, 0, &handle));
    }
    uint32_t start = nv_card_cycles32();
    while (r == NV_VIP_SUCCESS && pp->arrived_count == 0) {
        r = poll_incoming(pp);
        if (r == NV_VIP_SUCCESS && expired(pp, start))
            r = NV_VIP_TIMEOUT;
    }
    if (r != NV_VIP_SUCCESS) {
        untranslate(pp, &handle);
        return r;
    }
    unsigned slot = pp->arrived[pp->arrived_head];
    pp->arrived_head = (pp->arrived_head + 1) % NV_PP_SLOTS;
    pp->arrived_count--;
    uint32_t w[8];
    read_header(pp, slot, w);
    uint32_t len = (uint32_t)get_field(w, HDR(LENGTH)), pushed = (uint32_t)get_field(w, HDR(PUSHED));
    uint32_t seq = (uint32_t)get_field(w, HDR(SEQ)), sent = (uint32_t)get_field(w, HDR(SENT_CYCLES));
    if (pushed > len || pushed > NV_PP_MAX_PUSH || len > capacity) {
        nv_log("pushpull: message %lu of %lu bytes (%lu pushed) refused: the receive holds %lu\n", (unsigned long)seq,
               (unsigned long)len, (unsigned long)pushed, (unsigned long)capacity);
        post_slot(pp, slot);
        pp->owed++;
        untranslate(pp, &handle);
        return NV_VIP_INVALID_PARAMETER;
    }
    uint32_t pulled = len - pushed;
    if (pulled && (handle == NO_HANDLE || pushed != early_from)) {
        untranslate(pp, &handle); /* original, or the sender pushed a different amount */
        CHECK(translate(pp, at_offset(buf, pushed), pulled, NV_PP_AREA_RECV_PAGES, 0, &handle));
    }
    struct desc read = {.op = NV_CONTROL_OP_RDMA_READ,
                        .rdma = 1,
                        .nsegs = 1,
                        .remote_va = get_field(w, HDR(PULL_VA)),
                        .remote_handle = (uint32_t)get_field(w, HDR(PULL_HANDLE)),
                        .segs = {{buf.va + pushed, handle, pulled}}};
    uint32_t read_index = 0, ack_index = 0;
    if (!pulled) {
        r = take_pushed(pp, slot, w, buf);
    } else if (advanced) {
        /* Send/ack overlap: the ACK waits behind the read in the engine, not in this CPU. */
        r = reap_sends(pp, pp->ack_user);
        if (r == NV_VIP_SUCCESS)
            r = wait_credit(pp);
        if (r == NV_VIP_SUCCESS)
            r = post_send(pp, &read, &read_index);
        if (r == NV_VIP_SUCCESS)
            r = send_control(pp, NV_PP_KIND_ACK, seq, &ack_index);
        if (r == NV_VIP_SUCCESS)
            r = take_pushed(pp, slot, w, buf); /* while the pull is on the wire */
        if (r == NV_VIP_SUCCESS)
            r = reap_sends(pp, read_index + 1);
        pp->stats.pulls++;
    } else {
        r = take_pushed(pp, slot, w, buf);
        if (r == NV_VIP_SUCCESS)
            r = post_send(pp, &read, &read_index);
        if (r == NV_VIP_SUCCESS)
            r = reap_sends(pp, read_index + 1);
        if (r == NV_VIP_SUCCESS)
            r = send_control(pp, NV_PP_KIND_ACK, seq, &ack_index);
        if (r == NV_VIP_SUCCESS)
            r = reap_sends(pp, ack_index + 1);
        pp->stats.pulls++;
    }
    untranslate(pp, &handle);
    CHECK(r);
    pp->stats.one_way_cycles += nv_card_cycles32() - sent;
    pp->stats.one_ways++;
    if (pp->owed >= NV_PP_SLOTS - 1)
        CHECK(send_control(pp, NV_PP_KIND_CREDIT, 0, &ack_index));
    *length = len;
    return NV_VIP_SUCCESS;
}

TIMED uint32_t nv_pp_drain(struct nv_pp *pp)
{
    return reap_sends(pp, pp->sends_posted);
}

/* --- the benchmark agent's push-pull ping-pong --------------------------------------------- */

/* The test pattern, four bytes at a time (byte k of message m from sender s: 7k + 13m + 101s + 1),
 * so that checking a message costs a few cycles per byte on this core, not tens. */
static TIMED uint32_t pattern_word(uint32_t message, uint32_t sender, uint32_t k)
{
    uint32_t x = k * 7u + message * 13u + sender * 101u + 1u;
    return (x & 0xffu) | ((x + 7u) & 0xffu) << 8 | ((x + 14u) & 0xffu) << 16 | (x + 21u) << 24;
}

static TIMED void fill(struct nv_pp_buf buf, uint32_t size, uint32_t message, uint32_t sender)
{
    for (uint32_t k = 0; k < size; k += 4) {
        uint32_t word = pattern_word(message, sender, k);
        if (size - k >= 4)
            nv_host_write32(buf.pa + k, word);
        else
            for (uint32_t b = 0; k + b < size; b++)
                write_byte(buf.pa + k + b, (uint8_t)(word >> (8 * b)));
    }
}

/* Bytes of the message that differ from the pattern (a word at a time: the buffer is aligned). */
static TIMED uint32_t bad_bytes(struct nv_pp_buf buf, uint32_t size, uint32_t message, uint32_t sender)
{
    uint32_t bad = 0;
    nv_host_sync();
    for (uint32_t k = 0; k < size; k += 4) {
        uint32_t diff = nv_host_read32(buf.pa + k) ^ pattern_word(message, sender, k);
        for (uint32_t b = 0; diff && b < 4 && k + b < size; b++)
            bad += ((diff >> (8 * b)) & 0xffu) != 0;
    }
    return bad;
}

/* Scribble over the receive buffer so a message that did not arrive is not found there. */
static TIMED void scribble(struct nv_pp_buf buf, uint32_t size)
{
    for (uint32_t k = 0; k + 4 <= size; k += 4)
        nv_host_write32(buf.pa + k, 0xa5a5a5a5u);
    for (uint32_t k = size & ~3u; k < size; k++)
        write_byte(buf.pa + k, 0xa5);
}

static TIMED uint32_t receive_one(struct nv_pp *pp, struct nv_pp_buf user, uint32_t size, uint32_t message,
                                  uint32_t sender, int verify, uint32_t *bad)
{
    uint32_t length = 0;
    if (verify)
        scribble(user, size);
    CHECK(nv_pp_recv(pp, user, size, &length));
    if (length != size)
        *bad += size > length ? size - length : length - size;
    if (verify)
        *bad += bad_bytes(user, size, message, sender);
    return NV_VIP_SUCCESS;
}

/* The timed run: ITERATIONS ping-pongs (or one-way messages, in a burst), drained; `late` cycles of
 * delay before each receive. */
static TIMED_LOOP uint32_t ping_pong(struct nv_pp *pp, const struct nv_bench_args *a, struct nv_pp_buf user,
                                     uint32_t flags, uint64_t late, uint32_t *bad, uint64_t *cycles)
{
    int initiator = a->role != 0, verify = (flags & NV_PP_BENCH_FLAG_VERIFY) != 0;
    int burst = (flags & NV_PP_BENCH_FLAG_BURST) != 0;
    uint64_t t0 = nv_card_cycles();
    for (uint32_t i = 0; i < a->iterations; i++) {
        if (initiator) {
            if (verify)
                fill(user, a->size, i, 1);
            CHECK(nv_pp_send(pp, user, a->size));
            if (!burst)
                CHECK(receive_one(pp, user, a->size, i, 0, verify, bad));
        } else {
            if (late) { /* the receive is posted late: the push waits in its slot */
                uint64_t until = nv_card_cycles() + late;
                while (nv_card_cycles() < until)
                    ;
            }
            CHECK(receive_one(pp, user, a->size, i, 1, verify, bad));
            if (!burst) {
                if (verify)
                    fill(user, a->size, i, 0);
                CHECK(nv_pp_send(pp, user, a->size));
            }
        }
    }
    CHECK(nv_pp_drain(pp));
    *cycles = nv_card_cycles() - t0;
    return NV_VIP_SUCCESS;
}

uint32_t nv_pp_bench(struct nv_via *via, const struct nv_bench_args *a, uint32_t words[16], struct nv_bench_result *r)
{
    static struct nv_pp pp;
    *r = (struct nv_bench_result){0};
    uint32_t threshold = words[NV_PP_ARG_THRESHOLD], flags = words[NV_PP_ARG_FLAGS];
    if (a->iterations == 0 || (a->buf_pa & 3u) || threshold > NV_PP_MAX_PUSH ||
        a->size > 0x7fffffffu - NV_PP_AREA_BYTES || !nv_via_host_range(via, a->buf_pa, NV_PP_AREA_BYTES + a->size))
        return NV_VIP_INVALID_PARAMETER;
    struct nv_pp_config cfg = {
        .scheme = a->op == NV_PP_BENCH_OP_ADVANCED ? NV_PP_SCHEME_ADVANCED : NV_PP_SCHEME_ORIGINAL,
        .threshold = threshold,
        .vi = a->vi,
        .area = {a->buf_va, a->buf_pa},
        .area_handle = a->buf_handle,
        .desc = a->desc,
        .timeout_us = a->timeout_us,
    };
    if (flags & NV_PP_BENCH_FLAG_OPEN) {
        CHECK(nv_pp_open(&pp, via, &cfg));
    } else {
        /* The slots stay posted between runs: the same VI, descriptor page and area only. */
        if (!pp.open || pp.cfg.vi != cfg.vi || pp.cfg.desc != cfg.desc || pp.cfg.area.pa != cfg.area.pa ||
            nv_via_vi_state(cfg.vi) != NV_VI_STATE_CONNECTED)
            return NV_VIP_INVALID_STATE;
        pp.cfg.scheme = cfg.scheme;
        pp.cfg.threshold = cfg.threshold;
    }
    pp.stats = (struct nv_pp_stats){0};
    uint64_t late = (uint64_t)(flags >> NV_PP_FLAGS_LATE_US_SHIFT) * (via->clk_freq_hz / 1000000u);
    uint32_t bad = 0;
    CHECK(ping_pong(&pp, a, at_offset(cfg.area, NV_PP_AREA_BYTES), flags, late, &bad, &r->cycles));
    r->polls = pp.stats.credit_waits;
    words[NV_PP_RES_ONE_WAY_CYCLES_LO] = (uint32_t)pp.stats.one_way_cycles;
    words[NV_PP_RES_ONE_WAY_CYCLES_HI] = (uint32_t)(pp.stats.one_way_cycles >> 32);
    words[NV_PP_RES_ONE_WAYS] = pp.stats.one_ways;
    words[NV_PP_RES_BAD_BYTES] = bad;
    words[NV_PP_RES_TRANSLATED_PAGES] = pp.stats.translated_pages;
    words[NV_PP_RES_COPIED_BYTES] = pp.stats.copied_bytes;
    words[NV_PP_RES_PULLS] = pp.stats.pulls;
    return NV_VIP_SUCCESS;
}
