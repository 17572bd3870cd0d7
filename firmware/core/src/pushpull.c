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
 *             the pulled part is translated), and a message of at most NV_PP_REGISTER_BYTES is one
 *             word behind a short header, written by one store, pushed by a descriptor that never
 *             changes (the early-message register path). The sender does not wait for its push
 *             (reaped before the slot is reused).
 *             receiver, translation masking: the destination beyond bytes_to_push is translated
 *             when the receive is posted, while the push is still on its way; send/ack overlap:
 *             the ACK is queued behind the RDMA read (the engine holds a VI's queue until a read's
 *             response is in, so the ACK leaves the moment the data is in, with no CPU turn), and
 *             the pushed part is copied while the pull is on the wire.
 *
 * A message that arrives before its receive waits in its pushed-buffer slot; the pull waits for
 * the receive. Slots are credits: every header returns the slots its sender re-posted.
 *
 * An uncached read of host memory costs the 100 MHz CPU about 19 cycles (a write a few: the bus
 * takes it and the CPU goes on), so a small message touches as few words as it can: each
 * descriptor and outgoing header has a fixed place, is written whole when the endpoint opens and
 * afterwards only in the words that change (a slot's re-post is its STATUS and the doorbell; a
 * tiny push its word and STATUS), a descriptor posted unchanged is reposted (SQ_REPOST: the card
 * neither fetches nor validates it again), a message below 256 bytes carries an 8-byte header whose
 * first word holds its length, the receiver reads each header word it needs once, and only a
 * message the caller stamps reads the card's counter (for the one-way figure). The path of such a
 * message is inline in send_message (or push_register) and nv_pp_recv, one stretch of code that
 * the 4 KiB direct-mapped instruction cache holds whole (RARE below). */
#include <stddef.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia/pushpull.h"
#include "numavia_regs.h"
#include "numavia_via.h"
#include "via_internal.h"

#define DESC_BYTES 128u
#define RECV_DESC(slot) ((slot)*DESC_BYTES)
#define SEND_DESC(use) ((NV_PP_SLOTS + (use)) * DESC_BYTES)
#define DESC_AREA ((NV_PP_SLOTS + NV_PP_SENDS) * DESC_BYTES)
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
/* The group is larger than the instruction cache: what a small message does not run (long
 * messages, translation, refusals, the benchmark's checking) is kept out of line, so that the path
 * of a small message is short and does not evict itself. */
#define RARE NV_TIMED(pushpull) __attribute__((noinline, cold))
/* Inline on a small message's path. What RARE code needs of it goes through one out-of-line copy,
 * NAME_rare (or wait_for for wait_done): inline in every RARE caller, the HOT helpers made the
 * image too large for the boards' 32 KiB ROM. */
#define HOT NV_TIMED(pushpull) __attribute__((always_inline))
/* The two functions a 1-4 byte message's receive and push run through, compiled for speed where
 * the image is compiled for size (-Os, for the boards' ROM): 4 B ping-pong 4.39-4.46 us at -Os,
 * 4.31-4.36 at -O2, for 168 bytes (docs/benchmarks.md). GCC's attribute: clang (the fuzz target's
 * compiler) has no optimisation level per function. */
#if defined(__GNUC__) && !defined(__clang__)
#define SMALL_PATH NV_TIMED(pushpull) __attribute__((noinline, optimize("O2")))
#else
#define SMALL_PATH NV_TIMED(pushpull) __attribute__((noinline))
#endif
#define WORD(field) (NV_PP_HEADER_##field##_OFFSET / 4)

/* Records (descriptors, headers) are little-endian with every field inside one 32-bit word, or
 * two whole words for 8-byte addresses (checked below), so fields are set with word operations:
 * nv_put_field's byte loop with 64-bit shifts costs hundreds of cycles per field on this core, too
 * much for a library that builds several records per message. */
#define FITS(prefix) (prefix##_OFFSET % 4 + prefix##_BYTES <= 4 || (prefix##_BYTES == 8 && prefix##_OFFSET % 4 == 0))
_Static_assert(FITS(NV_PP_HEADER_KIND) && FITS(NV_PP_HEADER_FLAGS) && FITS(NV_PP_HEADER_CREDITS) &&
                   FITS(NV_PP_HEADER_SHORT_LENGTH) && FITS(NV_PP_HEADER_SEQ) && FITS(NV_PP_HEADER_LENGTH) &&
                   FITS(NV_PP_HEADER_PUSHED) && FITS(NV_PP_HEADER_PULL_VA) && FITS(NV_PP_HEADER_PULL_HANDLE) &&
                   FITS(NV_PP_HEADER_SENT_CYCLES),
               "push-pull header fields must sit inside words");
_Static_assert(FITS(NV_DESC_CONTROL_SEG_COUNT) && FITS(NV_DESC_CONTROL_CONTROL) && FITS(NV_DESC_ADDRESS_REMOTE_VA) &&
                   FITS(NV_DESC_ADDRESS_REMOTE_HANDLE) && FITS(NV_DESC_DATA_VA) && FITS(NV_DESC_DATA_HANDLE) &&
                   FITS(NV_DESC_DATA_LENGTH) && NV_DESC_CONTROL_SIZE % 4 == 0 && NV_DESC_ADDRESS_SIZE % 4 == 0 &&
                   NV_DESC_DATA_SIZE % 4 == 0,
               "descriptor fields must sit inside words");
/* A header's first word holds KIND, FLAGS, CREDITS and SHORT_LENGTH (set and read at once); SEQ, LENGTH,
 * PUSHED, PULL_HANDLE and SENT_CYCLES are whole words (a message without a pulled part has PUSHED
 * = LENGTH, taken from LENGTH's word); so is a data segment's LENGTH. */
#define WHOLE(prefix) (prefix##_OFFSET % 4 == 0 && prefix##_BYTES == 4)
#define SHORT_LIMIT (1u << 8 * NV_PP_HEADER_SHORT_LENGTH_BYTES)
_Static_assert(WORD(KIND) == 0 && WORD(FLAGS) == 0 && WORD(CREDITS) == 0 && WORD(SHORT_LENGTH) == 0 &&
                   NV_PP_SLOTS < (1u << 8 * NV_PP_HEADER_CREDITS_BYTES) && WHOLE(NV_PP_HEADER_SEQ) &&
                   WHOLE(NV_PP_HEADER_LENGTH) && WHOLE(NV_PP_HEADER_PUSHED) && WHOLE(NV_PP_HEADER_PULL_HANDLE) &&
                   WHOLE(NV_PP_HEADER_SENT_CYCLES) && WHOLE(NV_DESC_DATA_LENGTH),
               "push-pull header words as the library sets and reads them");
_Static_assert(NV_PP_SHORT_HEADER % 4 == 0 && WORD(SENT_CYCLES) < NV_PP_SHORT_HEADER / 4 &&
                   NV_PP_SHORT_HEADER + SHORT_LIMIT <= NV_PP_SLOT_BYTES,
               "a SHORT message's header is its first word and SENT_CYCLES");
_Static_assert(NV_PP_REGISTER_BYTES == 4 && NV_PP_REGISTER_PUSH == NV_PP_SHORT_HEADER + 4,
               "a register push is a short header and one word");
_Static_assert(4 * NV_PP_RECORD_WORDS >= NV_DESC_CONTROL_SIZE + 2 * NV_DESC_DATA_SIZE &&
                   4 * NV_PP_RECORD_WORDS >= NV_DESC_CONTROL_SIZE + NV_DESC_ADDRESS_SIZE + NV_DESC_DATA_SIZE &&
                   4 * NV_PP_RECORD_WORDS >= NV_PP_HEADER_SIZE && 4 * NV_PP_RECORD_WORDS <= DESC_BYTES,
               "a record holds the library's longest descriptor and a header");

static inline TIMED uint64_t get_field(const uint32_t *w, unsigned offset, unsigned bytes)
{
    if (bytes == 8)
        return (uint64_t)w[offset / 4 + 1] << 32 | w[offset / 4];
    uint32_t v = w[offset / 4] >> (8 * (offset % 4));
    return bytes == 4 ? v : v & ((1u << (8 * bytes)) - 1u);
}

/* The advanced scheme's register path: all pushed (at most the threshold, which MAX_PUSH bounds
 * from above the register's size) and no more than one word. */
static inline HOT int register_path(unsigned scheme, uint32_t threshold, uint32_t length)
{
    return scheme == NV_PP_SCHEME_ADVANCED && length <= NV_PP_REGISTER_BYTES && length <= threshold;
}
_Static_assert(NV_PP_REGISTER_BYTES <= NV_PP_MAX_PUSH, "the register path is pushed whole");

static inline HOT void plan(unsigned scheme, uint32_t threshold, uint32_t length, struct nv_pp_plan *p)
{
    if (threshold > NV_PP_MAX_PUSH)
        threshold = NV_PP_MAX_PUSH;
    p->pushed = length < threshold ? length : threshold;
    p->pulled = length - p->pushed;
    if (scheme == NV_PP_SCHEME_ADVANCED) {
        p->path = register_path(scheme, threshold, length) ? NV_PP_PATH_REGISTER : NV_PP_PATH_BOUNCE;
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

TIMED void nv_pp_plan(unsigned scheme, uint32_t threshold, uint32_t length, struct nv_pp_plan *p)
{
    plan(scheme, threshold, length, p);
}

/* --- host memory ---------------------------------------------------------------------------- */

/* The `n` (at most 4) bytes at `pa`, little-endian: one word read, two across a word boundary;
 * the bytes past `n` masked off (they are not the message's to send). */
static inline HOT uint32_t read_bytes(uint32_t pa, uint32_t n)
{
    if (n == 0)
        return 0;
    uint32_t mask = ~0u >> (32u - 8u * n);
    if ((pa & 3u) == 0) /* a register push's word, the common case first */
        return nv_host_read32(pa) & mask;
    uint32_t shift = 8 * (pa & 3u), value = nv_host_read32(pa & ~3u) >> shift;
    if ((pa & 3u) + n > 4)
        value |= nv_host_read32((pa & ~3u) + 4) << (32 - shift);
    return value & mask;
}

/* Write the low `n` (at most 4) bytes of `value` at `pa`: a whole word as it is, a part of one in
 * halfword and byte stores (the bytes around them are neither read nor written). One copy, for the
 * code off a small message's path (long copies' ends, the benchmark's checks) and the parts
 * write_bytes does not take inline. */
static RARE void write_bytes_rare(uint32_t pa, uint32_t value, uint32_t n)
{
    if (n == 4 && (pa & 3u) == 0) {
        nv_host_write32(pa, value);
        return;
    }
    for (uint32_t k; n; n -= k, pa += k, value >>= 8 * k) {
        k = n >= 2 && (pa & 1u) == 0 ? 2u : 1u;
        if (k == 2)
            nv_host_write16(pa, (uint16_t)value);
        else
            nv_host_write8(pa, (uint8_t)value);
    }
}

/* The same on a register push's receive: 4 bytes at a word, 2 at an even address and 1 are each
 * one store inline, as fast as one another; 3 bytes, or a part across words, out of line. */
static inline HOT void write_bytes(uint32_t pa, uint32_t value, uint32_t n)
{
    if (n == 4 && (pa & 3u) == 0)
        nv_host_write32(pa, value);
    else if (n == 2 && (pa & 1u) == 0)
        nv_host_write16(pa, (uint16_t)value);
    else if (n == 1)
        nv_host_write8(pa, (uint8_t)value);
    else
        write_bytes_rare(pa, value, n);
}

/* A CPU copy through the uncached window: words where source and destination agree mod 4 (the
 * bytes up to the first whole word and after the last, apart), bytes where they do not. */
static RARE void copy_unaligned(uint32_t dst, uint32_t src, uint32_t n)
{
    int words = ((dst ^ src) & 3u) == 0;
    for (uint32_t k; n; n -= k, dst += k, src += k) {
        if (words && (dst & 3u) == 0 && n >= 4) {
            nv_host_write32(dst, nv_host_read32(src));
            k = 4;
        } else {
            k = words ? 4u - (dst & 3u) : 1u;
            if (k > n)
                k = n;
            write_bytes_rare(dst, read_bytes(src, k), k);
        }
    }
}

/* The same, inline for the whole words between two word-aligned ends (slots, the bounce slot and
 * the benchmark's buffers): its code stays with the message path's in the instruction cache. */
static inline HOT void host_copy(uint32_t dst, uint32_t src, uint32_t n)
{
    if (((dst | src) & 3u) == 0)
        for (; n >= 4; n -= 4, dst += 4, src += 4)
            nv_host_write32(dst, nv_host_read32(src));
    if (n)
        copy_unaligned(dst, src, n);
}

/* --- records: descriptors and headers in host memory, written where they change ------------- */

static inline HOT void set_word(struct nv_pp_record *r, unsigned i, uint32_t value)
{
    if (r->words[i] != value) {
        r->words[i] = value;
        r->changed = 1;
        nv_host_write32(r->pa + 4 * i, value);
    }
}

static inline TIMED void set_field(struct nv_pp_record *r, unsigned offset, unsigned bytes, uint64_t value)
{
    if (bytes == 8) {
        set_word(r, offset / 4, (uint32_t)value);
        set_word(r, offset / 4 + 1, (uint32_t)(value >> 32));
        return;
    }
    unsigned shift = 8 * (offset % 4);
    uint32_t mask = (bytes == 4 ? 0xffffffffu : (1u << (8 * bytes)) - 1u) << shift;
    set_word(r, offset / 4, (r->words[offset / 4] & ~mask) | (((uint32_t)value << shift) & mask));
}

/* A header's first word (each value fits its field). */
static inline HOT uint32_t first_word(uint32_t kind, uint32_t flags, uint32_t credits, uint32_t short_length)
{
    return kind << 8 * NV_PP_HEADER_KIND_OFFSET | flags << 8 * NV_PP_HEADER_FLAGS_OFFSET |
           credits << 8 * NV_PP_HEADER_CREDITS_OFFSET | short_length << 8 * NV_PP_HEADER_SHORT_LENGTH_OFFSET;
}

/* Make `r` the record at `pa`, `words` long, all zero in host memory as in `r`. */
static void clear_record(struct nv_pp_record *r, uint32_t pa, unsigned words)
{
    r->pa = pa;
    r->changed = 1;
    for (unsigned i = 0; i < NV_PP_RECORD_WORDS; i++)
        r->words[i] = 0;
    for (unsigned i = 0; i < words; i++)
        nv_host_write32(pa + 4 * i, 0);
}

static inline TIMED void set_segment(struct nv_pp_desc *d, unsigned i, uint64_t va, uint32_t handle, uint32_t length)
{
    unsigned at = NV_DESC_CONTROL_SIZE + (d->rdma ? NV_DESC_ADDRESS_SIZE : 0) + i * NV_DESC_DATA_SIZE;
    set_field(&d->r, at + NV_DESC_DATA_VA_OFFSET, NV_DESC_DATA_VA_BYTES, va);
    set_field(&d->r, at + NV_DESC_DATA_HANDLE_OFFSET, NV_DESC_DATA_HANDLE_BYTES, handle);
    set_field(&d->r, at + NV_DESC_DATA_LENGTH_OFFSET, NV_DESC_DATA_LENGTH_BYTES, length);
}

/* A descriptor of the library's page: `op` and one data segment (the second of a gathering push is
 * set per message). */
static void open_desc(struct nv_pp *pp, struct nv_pp_desc *d, uint32_t offset, int send_queue, uint32_t op, uint64_t va,
                      uint32_t length)
{
    clear_record(&d->r, pp->cfg.desc + offset, NV_PP_RECORD_WORDS);
    d->doorbell = send_queue ? NV_DOORBELL_VI_SQ_DOORBELL_AT(pp->cfg.vi) : NV_DOORBELL_VI_RQ_DOORBELL_AT(pp->cfg.vi);
    d->unchanged = send_queue ? NV_DOORBELL_VI_SQ_REPOST_AT(pp->cfg.vi) : d->doorbell;
    d->rdma = op != NV_CONTROL_OP_SENDRECV;
    d->posted = 0;
    set_field(&d->r, CTRL(CONTROL), op << NV_DESC_CONTROL_CONTROL_OP_SHIFT);
    set_field(&d->r, CTRL(SEG_COUNT), 1);
    set_segment(d, 0, va, pp->cfg.area_handle, length);
}

/* Hand the descriptor to the card: its STATUS (the card's DONE must be new) and the doorbell, the
 * repost's if nothing else changed since its last post. The first post after open fetches it, so
 * the card's copy of what was at this address before cannot be sent. */
static inline HOT void post(struct nv_pp_desc *d)
{
    nv_host_write32(d->r.pa + NV_DESC_CONTROL_STATUS_OFFSET, 0);
    d->posted = 1;
    nv_reg_write(d->r.changed ? d->doorbell : d->unchanged, d->r.pa);
    d->r.changed = 0;
}

static RARE uint32_t failed(uint32_t status)
{
    nv_log("pushpull: descriptor completed with status 0x%08lx\n", (unsigned long)status);
    return NV_VIP_ERROR;
}

/* NV_VIP_SUCCESS if the descriptor is not the card's (completed, or not posted), NV_VIP_NOT_DONE
 * while it is, NV_VIP_ERROR if it completed in error. */
static inline HOT uint32_t done(struct nv_pp_desc *d)
{
    if (!d->posted)
        return NV_VIP_SUCCESS;
    nv_host_sync();
    uint32_t status = nv_host_read32(d->r.pa + NV_DESC_CONTROL_STATUS_OFFSET);
    if (!(status & NV_DESC_CONTROL_STATUS_DONE_MASK))
        return NV_VIP_NOT_DONE;
    d->posted = 0;
    return status & NV_DESC_STATUS_ERROR_MASK ? failed(status) : NV_VIP_SUCCESS;
}

/* While a receive waits for its message anyway: take the last push's completion if it completed
 * well, so that the next send need not read it (one read per missed poll until then). One that
 * completed in error stays posted, for the send's wait_done to report. */
static inline HOT void reap(struct nv_pp_desc *d)
{
    if (d == NULL || !d->posted)
        return;
    nv_host_sync();
    uint32_t status = nv_host_read32(d->r.pa + NV_DESC_CONTROL_STATUS_OFFSET);
    if ((status & NV_DESC_CONTROL_STATUS_DONE_MASK) && !(status & NV_DESC_STATUS_ERROR_MASK))
        d->posted = 0;
}

/* A wait's timeout (nv_poll_timer_missed), one copy for the waits off a small message's path. */
static RARE int expired_rare(const struct nv_pp *pp, struct nv_poll_timer *t)
{
    return nv_poll_timer_missed(t, pp->timeout_cycles);
}

/* Wait until the card is done with `d`: one copy for the code off a small message's path. */
static RARE uint32_t wait_for(struct nv_pp *pp, struct nv_pp_desc *d)
{
    struct nv_poll_timer w = {0, 0};
    for (;;) {
        uint32_t r = done(d);
        if (r != NV_VIP_NOT_DONE)
            return r;
        if (expired_rare(pp, &w))
            return NV_VIP_TIMEOUT;
    }
}

/* The same inline, for a small message (most often the card is done: one read, no loop). */
static inline HOT uint32_t wait_done(struct nv_pp *pp, struct nv_pp_desc *d)
{
    uint32_t r = done(d);
    return r == NV_VIP_NOT_DONE ? wait_for(pp, d) : r;
}

static inline HOT uint32_t area_pa(const struct nv_pp *pp, uint32_t offset)
{
    return pp->cfg.area.pa + offset;
}

static inline HOT uint64_t area_va(const struct nv_pp *pp, uint32_t offset)
{
    return pp->cfg.area.va + offset;
}

static inline HOT uint32_t slot_offset(unsigned slot)
{
    return NV_PP_AREA_SLOTS + slot * NV_PP_SLOT_BYTES;
}

/* --- pushed-buffer slots and incoming messages ---------------------------------------------- */

static inline HOT void post_slot(struct nv_pp *pp, unsigned slot)
{
    post(&pp->slot[slot]);
    pp->posted[(pp->posted_head + pp->posted_count) % NV_PP_SLOTS] = (uint8_t)slot;
    pp->posted_count++;
}

/* Post a slot the library is done with again: the peer hears of it with our next header. */
static inline HOT void release_slot(struct nv_pp *pp, unsigned slot)
{
    post_slot(pp, slot);
    pp->owed++;
}

/* The same, one copy for the code off a small message's path. */
static RARE void release_slot_rare(struct nv_pp *pp, unsigned slot)
{
    release_slot(pp, slot);
}

/* Post the slot the last small message was taken from again (nv_pp.taken), for the calls off a
 * register push's path (recv_small does it inline). */
static TIMED __attribute__((noinline)) void release_taken(struct nv_pp *pp)
{
    if (pp->taken) {
        release_slot_rare(pp, pp->taken - 1u);
        pp->taken = 0;
    }
}

/* Read the header words that hold a field into `h`, the slot's copy. */
static inline HOT void fetch(uint32_t *h, uint32_t at, unsigned offset, unsigned bytes)
{
    for (unsigned i = offset / 4; i <= (offset + bytes - 1) / 4; i++)
        h[i] = nv_host_read32(at + 4 * i);
}

/* What a message with a pulled part has beyond a small message's header. */
static RARE void fetch_pull(uint32_t *h, uint32_t at)
{
    fetch(h, at, HDR(PUSHED));
    fetch(h, at, HDR(SEQ));
    fetch(h, at, HDR(PULL_VA));
    fetch(h, at, HDR(PULL_HANDLE));
}

/* An ACK or CREDIT (or a message of a kind we do not know) in `slot`: consumed, the slot posted
 * again. */
static RARE void take_control(struct nv_pp *pp, unsigned slot, uint32_t *h, uint32_t at, uint32_t kind)
{
    if (kind == NV_PP_KIND_ACK) {
        fetch(h, at, HDR(SEQ));
        uint32_t seq = (uint32_t)get_field(h, HDR(SEQ));
        if ((int32_t)(seq - pp->acked_seq) > 0)
            pp->acked_seq = seq;
    } else if (kind != NV_PP_KIND_CREDIT) {
        nv_log("pushpull: message of unknown kind %lu dropped\n", (unsigned long)kind);
    }
    release_slot_rare(pp, slot);
}

/* Take the oldest posted slot if the engine has filled it: its credits count at once; an ACK or
 * CREDIT is consumed (the slot posted again), a DATA message waits in the arrival queue for
 * recv_message with the header words it needs read. */
static RARE uint32_t poll_incoming(struct nv_pp *pp)
{
    if (pp->posted_count == 0)
        return NV_VIP_SUCCESS;
    unsigned slot = pp->posted[pp->posted_head];
    uint32_t d = done(&pp->slot[slot]);
    if (d != NV_VIP_SUCCESS)
        return d == NV_VIP_NOT_DONE ? NV_VIP_SUCCESS : d;
    pp->posted_head = (pp->posted_head + 1) % NV_PP_SLOTS;
    pp->posted_count--;
    uint32_t at = area_pa(pp, slot_offset(slot)), *h = pp->header[slot];
    fetch(h, at, HDR(KIND)); /* with FLAGS, CREDITS and SHORT_LENGTH */
    pp->credits += (uint32_t)get_field(h, HDR(CREDITS));
    uint32_t kind = (uint32_t)get_field(h, HDR(KIND));
    if (kind == NV_PP_KIND_DATA) {
        uint32_t flags = (uint32_t)get_field(h, HDR(FLAGS));
        if (flags & NV_PP_HEADER_FLAGS_STAMPED_MASK)
            fetch(h, at, HDR(SENT_CYCLES));
        if (flags & NV_PP_HEADER_FLAGS_SHORT_MASK)
            h[WORD(LENGTH)] = (uint32_t)get_field(h, HDR(SHORT_LENGTH));
        else
            fetch(h, at, HDR(LENGTH));
        if (flags & NV_PP_HEADER_FLAGS_PULL_MASK) {
            fetch_pull(h, at);
        } else {
            h[WORD(PUSHED)] = h[WORD(LENGTH)];
        }
        pp->arrived[(pp->arrived_head + pp->arrived_count) % NV_PP_SLOTS] = (uint8_t)slot;
        pp->arrived_count++;
    } else {
        take_control(pp, slot, h, at, kind);
    }
    return NV_VIP_SUCCESS;
}

/* Wait until the peer has a slot for us. */
static RARE uint32_t wait_for_credit(struct nv_pp *pp)
{
    struct nv_poll_timer w = {0, 0};
    pp->stats.credit_waits++;
    while (pp->credits == 0) {
        CHECK(poll_incoming(pp));
        if (expired_rare(pp, &w))
            return NV_VIP_TIMEOUT;
    }
    return NV_VIP_SUCCESS;
}

static inline HOT uint32_t wait_credit(struct nv_pp *pp)
{
    return pp->credits ? NV_VIP_SUCCESS : wait_for_credit(pp);
}

/* An ACK (for `seq`) or a CREDIT message: a header only. */
static RARE uint32_t send_control(struct nv_pp *pp, uint32_t kind, uint32_t seq)
{
    struct nv_pp_desc *d = &pp->send[NV_PP_SEND_CONTROL];
    CHECK(wait_for(pp, d)); /* its header's last message has left */
    CHECK(wait_credit(pp));
    set_word(&pp->control_header, 0, first_word(kind, 0, pp->owed, 0));
    set_word(&pp->control_header, WORD(SEQ), seq);
    post(d);
    pp->credits--;
    pp->owed = 0;
    return NV_VIP_SUCCESS;
}

/* --- translation: a user range into the card's ATT ------------------------------------------- */

static RARE uint32_t translate(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length, uint32_t list_offset,
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

static inline HOT void untranslate(struct nv_pp *pp, uint32_t *handle)
{
    if (*handle != NO_HANDLE)
        nv_via_deregister_mem(pp->via, *handle);
    *handle = NO_HANDLE;
}

static inline HOT struct nv_pp_buf at_offset(struct nv_pp_buf buf, uint32_t offset)
{
    return (struct nv_pp_buf){buf.va + offset, buf.pa + offset};
}

/* --- the API ---------------------------------------------------------------------------------- */

/* The scheme and threshold of an open endpoint, and what follows from them: register_below, the
 * lengths register_path takes being those below it. */
static void set_scheme(struct nv_pp *pp, unsigned scheme, uint32_t threshold)
{
    pp->cfg.scheme = scheme;
    pp->cfg.threshold = threshold;
    pp->register_below = scheme == NV_PP_SCHEME_ADVANCED
                             ? 1u + (threshold < NV_PP_REGISTER_BYTES ? threshold : NV_PP_REGISTER_BYTES)
                             : 0;
}

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
    enum { bounce = NV_PP_AREA_BOUNCE, push = NV_PP_AREA_HEADERS, control = push + NV_PP_HEADER_SIZE };
    for (unsigned i = 0; i < NV_PP_SLOTS; i++)
        open_desc(pp, &pp->slot[i], RECV_DESC(i), 0, NV_CONTROL_OP_SENDRECV, area_va(pp, slot_offset(i)),
                  NV_PP_SLOT_BYTES);
    /* Each send's first segment: its header (a register push's is short, and its word); a read's is
     * set per pull. */
    static const struct {
        uint32_t op, header, length;
    } sends[NV_PP_SENDS] = {
        [NV_PP_SEND_REGISTER] = {NV_CONTROL_OP_SENDRECV, bounce, NV_PP_REGISTER_PUSH},
        [NV_PP_SEND_BOUNCE] = {NV_CONTROL_OP_SENDRECV, bounce, NV_PP_HEADER_SIZE},
        [NV_PP_SEND_GATHER] = {NV_CONTROL_OP_SENDRECV, push, NV_PP_HEADER_SIZE},
        [NV_PP_SEND_CONTROL] = {NV_CONTROL_OP_SENDRECV, control, NV_PP_HEADER_SIZE},
        [NV_PP_SEND_READ] = {NV_CONTROL_OP_RDMA_READ, 0, 0},
    };
    for (unsigned i = 0; i < NV_PP_SENDS; i++)
        open_desc(pp, &pp->send[i], SEND_DESC(i), 1, sends[i].op, sends[i].header ? area_va(pp, sends[i].header) : 0,
                  sends[i].length);
    clear_record(&pp->bounce_header, area_pa(pp, bounce), NV_PP_HEADER_SIZE / 4);
    clear_record(&pp->gather_header, area_pa(pp, push), NV_PP_HEADER_SIZE / 4);
    clear_record(&pp->control_header, area_pa(pp, control), NV_PP_HEADER_SIZE / 4);
    for (unsigned i = 0; i < NV_PP_SLOTS; i++)
        post_slot(pp, i);
    set_scheme(pp, cfg->scheme, cfg->threshold);
    pp->open = 1;
    return NV_VIP_SUCCESS;
}

/* Write a header's words beyond a short message's back from what they last held (a short
 * message's pushed part overwrote them in the bounce slot), so that setting them compares with
 * what host memory holds again. */
static RARE void restore_tail(struct nv_pp_record *r)
{
    for (unsigned i = NV_PP_SHORT_HEADER / 4; i < NV_PP_HEADER_SIZE / 4; i++)
        nv_host_write32(r->pa + 4 * i, r->words[i]);
}

/* What a push has beyond a small advanced message's: the translation of what the peer pulls (or,
 * original, of the whole buffer the push gathers from), the gathered segment, the pull fields. */
static RARE uint32_t prepare_translated(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length,
                                        const struct nv_pp_plan *p, struct nv_pp_desc *d, struct nv_pp_record *h,
                                        uint32_t *handle)
{
    if (p->send_translates) {
        uint32_t from = p->send_translates == 1 ? 0 : p->pushed;
        CHECK(translate(pp, at_offset(buf, from), length - from, NV_PP_AREA_SEND_PAGES,
                        NV_ATT_L1_ATTRIBUTES_RDMA_READ_MASK, handle));
    }
    if (p->path == NV_PP_PATH_GATHER) {
        set_field(&d->r, CTRL(SEG_COUNT), p->pushed ? 2 : 1);
        if (p->pushed)
            set_segment(d, 1, buf.va, *handle, p->pushed);
    }
    if (p->pulled) {
        set_field(h, HDR(PULL_VA), buf.va + p->pushed);
        set_word(h, WORD(PULL_HANDLE), *handle);
    }
    return NV_VIP_SUCCESS;
}

/* After such a push: wait until the user buffer is free again (the gathering push done, the pull
 * acknowledged) and drop its translation. */
static RARE uint32_t finish_translated(struct nv_pp *pp, struct nv_pp_desc *d, const struct nv_pp_plan *p, uint32_t seq,
                                       uint32_t *handle)
{
    uint32_t r = NV_VIP_SUCCESS;
    if (p->path == NV_PP_PATH_GATHER)
        r = wait_for(pp, d);
    struct nv_poll_timer w = {0, 0};
    while (r == NV_VIP_SUCCESS && p->pulled && (int32_t)(seq - pp->acked_seq) > 0) {
        r = poll_incoming(pp);
        if (r == NV_VIP_SUCCESS && expired_rare(pp, &w))
            r = NV_VIP_TIMEOUT;
    }
    untranslate(pp, handle);
    return r;
}

/* SENT_CYCLES in header `h` if the caller asked for this message to be stamped (nv_pp.stamp_next):
 * the FLAGS bit that says so, else 0. */
static inline HOT uint32_t stamp(struct nv_pp *pp, struct nv_pp_record *h, uint32_t t0)
{
    if (!pp->stamp_next)
        return 0;
    pp->stamp_next = 0;
    set_word(h, WORD(SENT_CYCLES), t0);
    return NV_PP_HEADER_FLAGS_STAMPED_MASK;
}

/* The early-message register path, straight: the bytes as one word behind a short header in the
 * bounce slot, by a descriptor that never changes (REGISTER_PUSH bytes whatever the length), so it
 * goes out through SQ_REPOST. The caller has waited for the bounce slot; `t0` is the send's start. */
static SMALL_PATH uint32_t push_register(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length, uint32_t t0)
{
    uint32_t flags = stamp(pp, &pp->bounce_header, t0);
    set_word(&pp->bounce_header, 0,
             first_word(NV_PP_KIND_DATA, flags | NV_PP_HEADER_FLAGS_REGISTER_MASK | NV_PP_HEADER_FLAGS_SHORT_MASK,
                        pp->owed, length));
    nv_host_write32(area_pa(pp, NV_PP_AREA_BOUNCE + NV_PP_SHORT_HEADER), read_bytes(buf.pa, length));
    pp->bounce_clobbered = 1; /* the word is not the record's */
    post(&pp->send[NV_PP_SEND_REGISTER]);
    pp->last_push = &pp->send[NV_PP_SEND_REGISTER];
    pp->credits--;
    pp->owed = 0;
    return NV_VIP_SUCCESS;
}

/* Every send but nv_pp_send's straight one: the waits and every path. */
static TIMED __attribute__((noinline)) uint32_t send_message(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length,
                                                             uint32_t t0)
{
    if (!pp->open)
        return NV_VIP_INVALID_STATE;
    if (!pp->credits) /* the peer may be waiting for the slot we took last, to answer with credits */
        release_taken(pp);
    CHECK(wait_credit(pp));
    struct nv_pp_desc *d;
    struct nv_pp_record *h;
    if (pp->cfg.scheme == NV_PP_SCHEME_ADVANCED) { /* the bounce slot's last push has left */
        d = &pp->send[NV_PP_SEND_BOUNCE];
        h = &pp->bounce_header;
        CHECK(wait_done(pp, &pp->send[NV_PP_SEND_REGISTER]));
        CHECK(wait_done(pp, d));
        if (register_path(pp->cfg.scheme, pp->cfg.threshold, length))
            return push_register(pp, buf, length, t0);
    } else {
        d = &pp->send[NV_PP_SEND_GATHER];
        h = &pp->gather_header;
        CHECK(wait_done(pp, d));
    }
    struct nv_pp_plan p;
    plan(pp->cfg.scheme, pp->cfg.threshold, length, &p);
    uint32_t seq = ++pp->send_seq, handle = NO_HANDLE;
    int translated = p.path == NV_PP_PATH_GATHER || p.pulled, short_message = !p.pulled && length < SHORT_LIMIT;
    uint32_t header_bytes = short_message ? NV_PP_SHORT_HEADER : NV_PP_HEADER_SIZE;
    if (!short_message && h == &pp->bounce_header && pp->bounce_clobbered) {
        restore_tail(h);
        pp->bounce_clobbered = 0;
    }
    if (translated)
        CHECK(prepare_translated(pp, buf, length, &p, d, h, &handle));
    if (p.path == NV_PP_PATH_BOUNCE) {
        host_copy(area_pa(pp, NV_PP_AREA_BOUNCE + header_bytes), buf.pa, p.pushed);
        pp->stats.copied_bytes += p.pushed;
        pp->bounce_clobbered |= short_message && p.pushed;
    }
    /* The first segment: the header, and behind it in the bounce slot the pushed part. */
    set_word(&d->r, (NV_DESC_CONTROL_SIZE + NV_DESC_DATA_LENGTH_OFFSET) / 4,
             header_bytes + (p.path == NV_PP_PATH_BOUNCE ? p.pushed : 0));
    uint32_t flags = stamp(pp, h, t0) | (p.pulled ? NV_PP_HEADER_FLAGS_PULL_MASK : 0) |
                     (short_message ? NV_PP_HEADER_FLAGS_SHORT_MASK : 0);
    set_word(h, 0, first_word(NV_PP_KIND_DATA, flags, pp->owed, short_message ? length : 0));
    if (!short_message) {
        set_word(h, WORD(SEQ), seq);
        set_word(h, WORD(LENGTH), length);
        set_word(h, WORD(PUSHED), p.pushed);
    }
    post(d);
    pp->last_push = d;
    pp->credits--;
    pp->owed = 0;
    release_taken(pp); /* after the doorbell: its credit goes with the next message */
    return translated ? finish_translated(pp, d, &p, seq, &handle) : NV_VIP_SUCCESS;
}

TIMED uint32_t nv_pp_send(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length)
{
    uint32_t t0 = pp->stamp_next ? nv_card_cycles32() : 0;
    /* The common small message straight to its push when there is nothing to wait for: this and
     * push_register call nothing, so they save no registers (each a store that goes to the bus on
     * this core), and both calls are jumps. */
    if (length < pp->register_below && pp->credits && !pp->send[NV_PP_SEND_REGISTER].posted &&
        !pp->send[NV_PP_SEND_BOUNCE].posted)
        return push_register(pp, buf, length, t0);
    return send_message(pp, buf, length, t0);
}

/* Copy the `pushed` bytes behind a header of `header_bytes` out of `slot`. */
static TIMED __attribute__((noinline)) void copy_from_slot(struct nv_pp *pp, unsigned slot, uint32_t header_bytes,
                                                           uint32_t pushed, struct nv_pp_buf buf)
{
    host_copy(buf.pa, area_pa(pp, slot_offset(slot) + header_bytes), pushed);
    pp->stats.copied_bytes += pushed;
}

/* Copy a message's pushed part out of its slot and post the slot again (a message from the
 * arrival queue, or one with a whole header: recv_small takes a short one straight). */
static RARE void take_pushed(struct nv_pp *pp, unsigned slot, const uint32_t *h, struct nv_pp_buf buf)
{
    uint32_t pushed = (uint32_t)get_field(h, HDR(PUSHED));
    uint32_t flags = (uint32_t)get_field(h, HDR(FLAGS));
    if (flags & NV_PP_HEADER_FLAGS_REGISTER_MASK)
        write_bytes_rare(buf.pa, nv_host_read32(area_pa(pp, slot_offset(slot) + NV_PP_SHORT_HEADER)), pushed);
    else
        copy_from_slot(pp, slot, flags & NV_PP_HEADER_FLAGS_SHORT_MASK ? NV_PP_SHORT_HEADER : NV_PP_HEADER_SIZE, pushed,
                       buf);
    release_slot_rare(pp, slot);
}

/* The same for a message with a pulled part: it has a whole header and its pushed part behind it
 * in the slot (never a short header, never a register push: nv_pp_send). */
static RARE void take_pushed_of_pull(struct nv_pp *pp, unsigned slot, uint32_t pushed, struct nv_pp_buf buf)
{
    copy_from_slot(pp, slot, NV_PP_HEADER_SIZE, pushed, buf);
    release_slot_rare(pp, slot);
}

/* Pull a message's part beyond `pushed` into the user buffer (translated as `handle`). */
static RARE uint32_t post_pull(struct nv_pp *pp, const uint32_t *h, struct nv_pp_buf buf, uint32_t pushed,
                               uint32_t pulled, uint32_t handle)
{
    struct nv_pp_desc *d = &pp->send[NV_PP_SEND_READ];
    CHECK(wait_for(pp, d));
    set_field(&d->r, NV_DESC_CONTROL_SIZE + NV_DESC_ADDRESS_REMOTE_VA_OFFSET, NV_DESC_ADDRESS_REMOTE_VA_BYTES,
              get_field(h, HDR(PULL_VA)));
    set_field(&d->r, NV_DESC_CONTROL_SIZE + NV_DESC_ADDRESS_REMOTE_HANDLE_OFFSET, NV_DESC_ADDRESS_REMOTE_HANDLE_BYTES,
              get_field(h, HDR(PULL_HANDLE)));
    set_segment(d, 0, buf.va + pushed, handle, pulled);
    post(d);
    return NV_VIP_SUCCESS;
}

/* A message with a pulled part: translate the destination unless the receive did (`handle`, from
 * `early_from`), take the pushed part, pull the rest and acknowledge it, as the scheme says. */
static RARE uint32_t receive_pulled(struct nv_pp *pp, unsigned slot, const uint32_t *h, struct nv_pp_buf buf,
                                    uint32_t early_from, uint32_t *handle)
{
    uint32_t len = (uint32_t)get_field(h, HDR(LENGTH)), pushed = (uint32_t)get_field(h, HDR(PUSHED));
    uint32_t pulled = len - pushed, seq = (uint32_t)get_field(h, HDR(SEQ)), r;
    if (*handle == NO_HANDLE || pushed != early_from) {
        untranslate(pp, handle); /* original, or the sender pushed a different amount */
        CHECK(translate(pp, at_offset(buf, pushed), pulled, NV_PP_AREA_RECV_PAGES, 0, handle));
    }
    pp->stats.pulls++;
    if (pp->cfg.scheme == NV_PP_SCHEME_ADVANCED) {
        /* Send/ack overlap: the ACK waits behind the read in the engine, not in this CPU. */
        r = wait_for(pp, &pp->send[NV_PP_SEND_CONTROL]);
        if (r == NV_VIP_SUCCESS)
            r = wait_credit(pp);
        if (r == NV_VIP_SUCCESS)
            r = post_pull(pp, h, buf, pushed, pulled, *handle);
        if (r == NV_VIP_SUCCESS)
            r = send_control(pp, NV_PP_KIND_ACK, seq);
        if (r == NV_VIP_SUCCESS) {
            take_pushed_of_pull(pp, slot, pushed, buf); /* while the pull is on the wire */
            r = wait_for(pp, &pp->send[NV_PP_SEND_READ]);
        }
        return r;
    }
    take_pushed_of_pull(pp, slot, pushed, buf);
    r = post_pull(pp, h, buf, pushed, pulled, *handle);
    if (r == NV_VIP_SUCCESS)
        r = wait_for(pp, &pp->send[NV_PP_SEND_READ]);
    if (r == NV_VIP_SUCCESS)
        r = send_control(pp, NV_PP_KIND_ACK, seq);
    if (r == NV_VIP_SUCCESS)
        r = wait_for(pp, &pp->send[NV_PP_SEND_CONTROL]);
    return r;
}

/* A message that does not fit the receive (or claims more pushed than it has): its slot is posted
 * again, the message dropped. */
static RARE uint32_t refuse(struct nv_pp *pp, unsigned slot, uint32_t len, uint32_t pushed, uint32_t capacity)
{
    nv_log("pushpull: a message of %lu bytes (%lu pushed) refused: the receive holds %lu\n", (unsigned long)len,
           (unsigned long)pushed, (unsigned long)capacity);
    release_slot_rare(pp, slot);
    return NV_VIP_INVALID_PARAMETER;
}

/* A stamped message is in the user buffer: its one-way time, from the send's start its sender's
 * card counted (both cards' counters run from one clock and reset). */
static RARE void count_one_way(struct nv_pp *pp, uint32_t sent_cycles)
{
    pp->stats.arrived_cycles = nv_card_cycles32();
    pp->stats.one_way_cycles += pp->stats.arrived_cycles - sent_cycles;
    pp->stats.one_ways++;
}

/* Every receive but recv_small's: the arrival queue, control messages, long and pulled messages,
 * refusals, errors. */
static TIMED __attribute__((noinline)) uint32_t recv_message(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t capacity,
                                                             uint32_t *length)
{
    if (!pp->open)
        return NV_VIP_INVALID_STATE;
    release_taken(pp);
    uint32_t handle = NO_HANDLE, early_from = 0, r = NV_VIP_SUCCESS;
    if (pp->cfg.scheme == NV_PP_SCHEME_ADVANCED && capacity > pp->cfg.threshold) {
        /* Masking: translate what a long message will pull while its push is on its way. */
        early_from = pp->cfg.threshold;
        CHECK(translate(pp, at_offset(buf, early_from), capacity - early_from, NV_PP_AREA_RECV_PAGES, 0, &handle));
    }
    struct nv_poll_timer w = {0, 0};
    while (r == NV_VIP_SUCCESS && pp->arrived_count == 0) {
        r = poll_incoming(pp);
        /* Only a poll that missed counts (the timer reads the card's clock at the first miss). */
        if (r == NV_VIP_SUCCESS && pp->arrived_count == 0) {
            reap(pp->last_push);
            if (nv_poll_timer_missed(&w, pp->timeout_cycles))
                r = NV_VIP_TIMEOUT;
        }
    }
    if (r == NV_VIP_SUCCESS) {
        unsigned slot = pp->arrived[pp->arrived_head];
        pp->arrived_head = (pp->arrived_head + 1) % NV_PP_SLOTS;
        pp->arrived_count--;
        const uint32_t *h = pp->header[slot];
        uint32_t len = (uint32_t)get_field(h, HDR(LENGTH)), pushed = (uint32_t)get_field(h, HDR(PUSHED));
        if (pushed > len || pushed > NV_PP_MAX_PUSH || len > capacity)
            r = refuse(pp, slot, len, pushed, capacity);
        else if (pushed != len)
            r = receive_pulled(pp, slot, h, buf, early_from, &handle);
        else
            take_pushed(pp, slot, h, buf);
        if (r == NV_VIP_SUCCESS) {
            if (get_field(h, HDR(FLAGS)) & NV_PP_HEADER_FLAGS_STAMPED_MASK)
                count_one_way(pp, (uint32_t)get_field(h, HDR(SENT_CYCLES)));
            *length = len;
        }
    }
    untranslate(pp, &handle);
    CHECK(r);
    if (pp->owed >= NV_PP_SLOTS - 1) /* a receiver that owes most of its slots tells its peer */
        CHECK(send_control(pp, NV_PP_KIND_CREDIT, 0));
    return NV_VIP_SUCCESS;
}

/* The end of a small message's receive: its length out and, if it was stamped, its one-way time. */
static TIMED __attribute__((noinline)) uint32_t small_taken(struct nv_pp *pp, uint32_t at, uint32_t flags, uint32_t len,
                                                            uint32_t *length)
{
    if (flags & NV_PP_HEADER_FLAGS_STAMPED_MASK)
        count_one_way(pp, nv_host_read32(at + NV_PP_HEADER_SENT_CYCLES_OFFSET));
    *length = len;
    return NV_VIP_SUCCESS;
}

/* A small message's receive, straight: poll the oldest posted slot and take a short message with
 * nothing pulled from it (its length in the first word, its bytes behind it) with no header copy,
 * no arrival queue, and the slot's re-post left to the next call (nv_pp.taken). It calls nothing
 * on a message's way, its copy inline, so the path from the message's DONE to the data in the
 * user buffer is this function's (a stamp's one-way time is counted in small_taken). Anything else
 * in the slot (a control message, a long or pulled message, one that does not fit, an error) is
 * left for recv_message, which reads it again. */
static SMALL_PATH uint32_t recv_small(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t capacity, uint32_t *length)
{
    if (pp->taken) { /* here, while the message is on its way, not between a message and its answer */
        release_slot(pp, pp->taken - 1u);
        pp->taken = 0;
    }
    if (pp->owed >= NV_PP_SLOTS - 1) /* the peer must hear of them (a CREDIT): recv_message's end */
        return recv_message(pp, buf, capacity, length);
    unsigned slot = pp->posted[pp->posted_head];
    struct nv_pp_desc *d = &pp->slot[slot];
    uint32_t at = area_pa(pp, slot_offset(slot)), status;
    struct nv_poll_timer w = {0, 0};
    nv_host_sync();
    while (!((status = nv_host_read32(d->r.pa + NV_DESC_CONTROL_STATUS_OFFSET)) & NV_DESC_CONTROL_STATUS_DONE_MASK)) {
        /* Only a poll that missed counts (the timer reads the card's clock at the first miss). */
        reap(pp->last_push);
        if (nv_poll_timer_missed(&w, pp->timeout_cycles))
            return NV_VIP_TIMEOUT;
        nv_host_sync();
    }
    uint32_t h[1] = {nv_host_read32(at)};
    uint32_t flags = (uint32_t)get_field(h, HDR(FLAGS)), len = (uint32_t)get_field(h, HDR(SHORT_LENGTH));
    uint32_t register_push = flags & NV_PP_HEADER_FLAGS_REGISTER_MASK;
    if ((status & NV_DESC_STATUS_ERROR_MASK) || get_field(h, HDR(KIND)) != NV_PP_KIND_DATA ||
        (flags & (NV_PP_HEADER_FLAGS_SHORT_MASK | NV_PP_HEADER_FLAGS_PULL_MASK)) != NV_PP_HEADER_FLAGS_SHORT_MASK ||
        len > capacity || (register_push && len > NV_PP_REGISTER_BYTES))
        return recv_message(pp, buf, capacity, length);
    d->posted = 0;
    pp->posted_head = (pp->posted_head + 1) % NV_PP_SLOTS;
    pp->posted_count--;
    pp->credits += (uint32_t)get_field(h, HDR(CREDITS));
    pp->taken = (uint8_t)(slot + 1u);
    if (register_push) {
        write_bytes(buf.pa, nv_host_read32(at + NV_PP_SHORT_HEADER), len);
    } else { /* the pushed part after the short header, inline with the rest of the path */
        host_copy(buf.pa, at + NV_PP_SHORT_HEADER, len);
        pp->stats.copied_bytes += len;
    }
    if (flags & NV_PP_HEADER_FLAGS_STAMPED_MASK)
        return small_taken(pp, at, flags, len, length);
    *length = len;
    return NV_VIP_SUCCESS;
}

TIMED uint32_t nv_pp_recv(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t capacity, uint32_t *length)
{
    /* A receive that may take a small message straight: nothing waiting in the arrival queue, a
     * slot posted, and nothing to translate ahead (masking, for a message that may be pulled). */
    if (pp->arrived_count == 0 && (pp->posted_count || pp->taken) && pp->open &&
        !(pp->cfg.scheme == NV_PP_SCHEME_ADVANCED && capacity > pp->cfg.threshold))
        return recv_small(pp, buf, capacity, length);
    return recv_message(pp, buf, capacity, length);
}

TIMED uint32_t nv_pp_drain(struct nv_pp *pp)
{
    release_taken(pp);
    for (unsigned i = 0; i < NV_PP_SENDS; i++)
        CHECK(wait_for(pp, &pp->send[i]));
    return NV_VIP_SUCCESS;
}

/* --- the benchmark agent's push-pull ping-pong --------------------------------------------- */

/* The test pattern, four bytes at a time (byte k of message m from sender s: 7k + 13m + 101s + 1),
 * so that checking a message costs a few cycles per byte on this core, not tens. */
static TIMED uint32_t pattern_word(uint32_t message, uint32_t sender, uint32_t k)
{
    uint32_t x = k * 7u + message * 13u + sender * 101u + 1u;
    return (x & 0xffu) | ((x + 7u) & 0xffu) << 8 | ((x + 14u) & 0xffu) << 16 | (x + 21u) << 24;
}

static RARE void fill(struct nv_pp_buf buf, uint32_t size, uint32_t message, uint32_t sender)
{
    for (uint32_t k = 0; k < size; k += 4) {
        write_bytes_rare(buf.pa + k, pattern_word(message, sender, k), size - k < 4 ? size - k : 4);
    }
}

/* Bytes of the message that differ from the pattern (a word at a time: the buffer is aligned). */
static RARE uint32_t bad_bytes(struct nv_pp_buf buf, uint32_t size, uint32_t message, uint32_t sender)
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
static RARE void scribble(struct nv_pp_buf buf, uint32_t size)
{
    for (uint32_t k = 0; k + 4 <= size; k += 4)
        nv_host_write32(buf.pa + k, 0xa5a5a5a5u);
    write_bytes_rare(buf.pa + (size & ~3u), 0xa5a5a5a5u, size & 3u);
}

static inline HOT uint32_t receive_one(struct nv_pp *pp, struct nv_pp_buf user, uint32_t size, uint32_t message,
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
 * delay before each receive. Each side stamps its last message: its one-way time, warm, is the
 * figure (stamping every message would put two counter reads into every ping-pong). `*received`
 * counts the messages this side received (in a register until the end: no store on the path). */
static TIMED_LOOP uint32_t ping_pong(struct nv_pp *pp, const struct nv_bench_args *a, struct nv_pp_buf user,
                                     uint32_t flags, uint64_t late, uint32_t *bad, uint64_t *cycles, uint32_t *received)
{
    uint32_t got = 0;
    int initiator = a->role != 0, verify = (flags & NV_PP_BENCH_FLAG_VERIFY) != 0;
    int burst = (flags & NV_PP_BENCH_FLAG_BURST) != 0;
    uint64_t t0 = nv_card_cycles();
    for (uint32_t i = 0; i < a->iterations; i++) {
        if (initiator) {
            if (verify)
                fill(user, a->size, i, 1);
            pp->stamp_next = i + 1 == a->iterations;
            CHECK(nv_pp_send(pp, user, a->size));
            if (!burst) {
                CHECK(receive_one(pp, user, a->size, i, 0, verify, bad));
                got++;
            }
        } else {
            if (late) { /* the receive is posted late: the push waits in its slot */
                uint64_t until = nv_card_cycles() + late;
                while (nv_card_cycles() < until)
                    ;
            }
            CHECK(receive_one(pp, user, a->size, i, 1, verify, bad));
            got++;
            if (!burst) {
                if (verify)
                    fill(user, a->size, i, 0);
                pp->stamp_next = i + 1 == a->iterations;
                CHECK(nv_pp_send(pp, user, a->size));
            }
        }
    }
    CHECK(nv_pp_drain(pp));
    *cycles = nv_card_cycles() - t0;
    *received = got;
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
        set_scheme(&pp, cfg.scheme, cfg.threshold);
    }
    pp.stats = (struct nv_pp_stats){0};
    uint64_t late = (uint64_t)(flags >> NV_PP_FLAGS_LATE_US_SHIFT) * (via->clk_freq_hz / 1000000u);
    uint32_t bad = 0;
    uint32_t received = 0;
    CHECK(ping_pong(&pp, a, at_offset(cfg.area, NV_PP_AREA_BYTES), flags, late, &bad, &r->cycles, &received));
    r->polls = pp.stats.credit_waits;
    r->seen_cycles = pp.stats.arrived_cycles; /* the last message in: the latency breakdown's start or end */
    words[NV_PP_RES_ONE_WAY_CYCLES_LO] = (uint32_t)pp.stats.one_way_cycles;
    words[NV_PP_RES_ONE_WAY_CYCLES_HI] = (uint32_t)(pp.stats.one_way_cycles >> 32);
    words[NV_PP_RES_ONE_WAYS] = pp.stats.one_ways;
    words[NV_PP_RES_BAD_BYTES] = bad;
    words[NV_PP_RES_TRANSLATED_PAGES] = pp.stats.translated_pages;
    words[NV_PP_RES_COPIED_BYTES] = pp.stats.copied_bytes;
    words[NV_PP_RES_PULLS] = pp.stats.pulls;
    words[NV_PP_RES_RECEIVED] = received;
    return NV_VIP_SUCCESS;
}
