/* The benchmark agent (numavia/via_bench.h): NetPIPE-style ping-pong between two nodes' agents,
 * timed by the card.
 *
 * The agent is what a host process does with VIPL, done by the node's CPU so that nothing slower
 * than the CPU sits in the timed loop: it posts prebuilt descriptors (numavia/via_post.h: each is
 * written into host memory once, a post writes its STATUS and rings the doorbell) and waits for
 * their DONE bits (or, for RDMA write, the last byte of its buffer). It counts the cycles of the
 * whole run and of the receive-side call the paper compares (VipPostRecv), and the card cycle at
 * which the last iteration saw its message arrive (for the latency breakdown of the host tool).
 * Polling host memory costs one bus read: the bare-metal port reaches host memory through the
 * SoC's uncached window (a PC's coherent cache gives the same). */
#include <stddef.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia/pushpull.h"
#include "numavia/via.h"
#include "numavia/via_bench.h"
#include "numavia/via_post.h"
#include "numavia_regs.h"
#include "numavia_via.h"
#include "via_internal.h"

/* The agent's descriptor area (a page per VI): ping-pongs use one send slot and one receive slot,
 * two for send/receive (it keeps a receive posted ahead); a send stream has all its receives posted
 * beforehand (at most RECV_SLOTS per VI) and up to STREAM_DEPTH sends in flight on each VI. */
#define AREA_BYTES NV_ATT_PAGE_SIZE
#define SLOT_BYTES 128u
#define STREAM_DEPTH NV_MBOX_BENCH_STREAM_DEPTH
#define RECV_SLOTS NV_MBOX_BENCH_STREAM_RECEIVES
_Static_assert(RECV_SLOTS >= 2, "the send/receive ping-pong keeps a receive posted ahead");
#define RECV_DESC 0u
#define SEND_DESC (RECV_SLOTS * SLOT_BYTES)
#define DESC_WORDS 16u
#define CTRL(field) NV_DESC_CONTROL_##field##_OFFSET, NV_DESC_CONTROL_##field##_BYTES
/* The timed loops and everything they call, kept together in the image (numavia/platform.h). */
#define TIMED NV_TIMED(via_bench)
#define TIMED_LOOP NV_TIMED_ENTRY(via_bench)

struct agent {
    struct nv_via *via;
    const struct nv_bench_args *a;
    struct nv_bench_result *r;
    uint32_t timeout_cycles;
    uint32_t cq_head; /* with a->wake_cq: the entries of that queue taken (its HEAD) */
    uint32_t vis;     /* VIs a->vi.. of a stream (1 for the ping-pongs) */
    uint32_t depth;   /* a stream's messages in flight on each VI (at most STREAM_DEPTH) */
    /* RECV_SLOTS and `depth` send slots for each VI, interleaved: a stream's message i (on VI
     * a->vi + i % vis) takes slot i modulo their count. In `one_*` for one VI, else in the RAM the
     * port lends (nv_platform_scratch: too many for the stack). */
    struct nv_via_prebuilt *recv, *send;
    struct nv_via_prebuilt one_recv[RECV_SLOTS], one_send[STREAM_DEPTH];
};

/* A descriptor with one data segment (and the address segment of an RDMA), as words. */
static unsigned build(const struct nv_bench_args *a, uint32_t op, uint32_t *w)
{
    int rdma = op != NV_CONTROL_OP_SENDRECV;
    uint32_t at = NV_DESC_CONTROL_SIZE;
    for (unsigned i = 0; i < DESC_WORDS; i++)
        w[i] = 0;
    nv_put_field(w, CTRL(SEG_COUNT), 1);
    nv_put_field(w, CTRL(CONTROL), op << NV_DESC_CONTROL_CONTROL_OP_SHIFT);
    if (rdma) {
        nv_put_field(w, at + NV_DESC_ADDRESS_REMOTE_VA_OFFSET, NV_DESC_ADDRESS_REMOTE_VA_BYTES, a->remote_va);
        nv_put_field(w, at + NV_DESC_ADDRESS_REMOTE_HANDLE_OFFSET, NV_DESC_ADDRESS_REMOTE_HANDLE_BYTES,
                     a->remote_handle);
        at += NV_DESC_ADDRESS_SIZE;
    }
    nv_put_field(w, at + NV_DESC_DATA_VA_OFFSET, NV_DESC_DATA_VA_BYTES, a->buf_va);
    nv_put_field(w, at + NV_DESC_DATA_HANDLE_OFFSET, NV_DESC_DATA_HANDLE_BYTES, a->buf_handle);
    nv_put_field(w, at + NV_DESC_DATA_LENGTH_OFFSET, NV_DESC_DATA_LENGTH_BYTES, a->size);
    return (at + NV_DESC_DATA_SIZE) / 4;
}

/* The slots of the agent's descriptors: a receive or send slot (index below the run's count). */
static TIMED struct nv_via_prebuilt *slot(struct agent *g, int send_queue, uint32_t index)
{
    return send_queue ? &g->send[index] : &g->recv[index];
}

/* Post a slot's prebuilt descriptor again: its STATUS and the doorbell (numavia/via_post.h).
 * Inline, as the waits are: on the 100 MHz CPU a call and its slot arithmetic cost as much as the
 * post's two bus writes, and every message takes one. */
static inline __attribute__((always_inline)) TIMED uint32_t post_slot(struct agent *g, int send_queue, uint32_t index)
{
    return nv_via_post_prebuilt(g->via, slot(g, send_queue, index), g->a->size);
}

static TIMED uint32_t post_recv_slot(struct agent *g, uint32_t index)
{
    uint32_t t0 = nv_card_cycles32();
    uint32_t result = post_slot(g, 0, index);
    g->r->post_recv_cycles += nv_card_cycles32() - t0;
    g->r->post_recvs++;
    return result;
}

static inline __attribute__((always_inline)) TIMED uint32_t post_send(struct agent *g)
{
    return post_slot(g, 1, 0);
}

/* A descriptor that completed in error: out of line and off the timed group, so that the waits
 * which call it in their tails need no stack frame (every store is a bus write: the data cache
 * writes through). */
static __attribute__((noinline, cold)) uint32_t completed_in_error(uint32_t status)
{
    nv_log("bench: descriptor completed with status 0x%08lx\n", (unsigned long)status);
    return NV_VIP_ERROR;
}

/* Wait for a prebuilt descriptor's DONE; VIP_ERROR if it completed in error, VIP_TIMEOUT if it
 * never did. A stream's wait usually finds its message done at the first poll, so that poll is all
 * it costs (nv_via_prebuilt_done, without the set-up of the loop that follows a miss). */
static inline __attribute__((always_inline)) TIMED uint32_t wait_prebuilt(struct agent *g, struct nv_via_prebuilt *p)
{
    uint32_t status;
    uint32_t result = nv_via_prebuilt_done(g->via, p, &status);
    if (result == NV_VIP_NOT_DONE)
        result = nv_via_prebuilt_wait(g->via, p, g->timeout_cycles, &status, &g->r->polls);
    g->r->polls++;
    if (result == NV_VIP_SUCCESS && (status & NV_DESC_STATUS_ERROR_MASK))
        return completed_in_error(status);
    return result;
}

/* Wait for a slot's DONE (wait_prebuilt). */
static TIMED uint32_t wait_done(struct agent *g, int send_queue, uint32_t index)
{
    return wait_prebuilt(g, slot(g, send_queue, index));
}

/* Wait for the receive in `index`'s DONE. With WAKE_CQ, sleep until the receive queue's completion
 * queue has an entry (nv_platform_wait_cq: Zephyr wakes on the card's interrupt) instead of
 * polling: receives complete in the order posted, and the ping-pong's next message comes only
 * after its answer, so a new entry is the oldest receive's completion, whose DONE the card wrote
 * before it. */
static TIMED uint32_t wait_recv(struct agent *g, uint32_t index)
{
    if (!g->a->wake_cq)
        return wait_done(g, 0, index);
    uint32_t cq = g->a->wake_cq - 1;
    uint64_t deadline = nv_card_cycles() + g->timeout_cycles;
    for (;;) {
        uint32_t tail = nv_reg_read(NV_VIA_CQ_TAIL_AT(cq));
        if (tail != g->cq_head) {
            g->cq_head = tail;
            nv_reg_write(NV_VIA_CQ_HEAD_AT(cq), tail);
            return wait_done(g, 0, index);
        }
        g->r->polls++; /* here: sleeps */
        /* Armed (the queue was checked before the loops): fires at once if the entry came after
         * TAIL was read. The sleep is the one call out of the group: its cost is the figure. */
        nv_reg_write(NV_VIA_CQ_CTRL_AT(cq), NV_VIA_CQ_CTRL_ARM_MASK);
        if (!nv_platform_wait_cq(cq, deadline))
            return NV_VIP_TIMEOUT;
    }
}

/* The last iteration's arrival, for the host's latency breakdown: one counter read, once a run. */
static inline __attribute__((always_inline)) TIMED void seen(struct agent *g, uint32_t i)
{
    if (i + 1 == g->a->iterations)
        g->r->seen_cycles = nv_card_cycles32();
}

/* RDMA-write ping-pong: the last byte of each transfer is a marker the receiver polls for. Message
 * k (2 i + initiator) carries k % 255 + 1, never 0: stepped by two for the next iteration, since on
 * this CPU the modulo's division takes 34 cycles, a third of the responder's post. */
static TIMED uint8_t next_marker(uint8_t m)
{
    return m > 253 ? m - 253 : m + 2;
}

/* Where the marker is: the message's last word, and the marker's shift in it. */
struct marker_at {
    uint32_t word;
    unsigned shift;
};

static TIMED struct marker_at marker_at(const struct nv_bench_args *a)
{
    uint32_t last = a->buf_pa + a->size - 1;
    return (struct marker_at){last & ~3u, 8 * (last & 3u)};
}

/* The message's last word is written whole, the marker in its last byte, as a program writes its
 * message before posting it: one bus write, no read of what the peer wrote there. */
static TIMED void set_marker(struct marker_at at, uint8_t m)
{
    nv_host_write32(at.word, (uint32_t)m << at.shift);
}

static inline __attribute__((always_inline)) TIMED uint32_t wait_marker(struct agent *g, struct marker_at at, uint8_t m)
{
    /* The peer's marker is rarely there at the first poll, so the wait has time to spare: the clock
     * is read before the first poll, and each poll is counted in memory as it goes, leaving the
     * path from the marker's arrival to the return bare. */
    uint32_t start = nv_card_cycles32(), timeout = g->timeout_cycles;
    for (;;) {
        uint32_t polls = ++g->r->polls;
        nv_host_sync();
        if (((nv_host_read32(at.word) >> at.shift) & 0xff) == m)
            return NV_VIP_SUCCESS;
        if (nv_poll_timed_out(polls, &start, timeout))
            return NV_VIP_TIMEOUT;
    }
}

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        uint32_t r_ = (x);                                                                                             \
        if (r_ != NV_VIP_SUCCESS)                                                                                      \
            return r_;                                                                                                 \
    } while (0)

/* Send/receive ping-pong. Each side keeps a receive posted ahead, in the other of two slots, as a
 * VIA program keeps a ring of receives: VipPostRecv runs while a message is in flight, not between
 * a message's arrival and its answer, and every receive is still posted before the send it takes
 * can leave the peer (that send follows an answer this side sends after the post). A send's
 * completion (the peer card's acknowledgement) is taken after the post too, as RDMA write's. */
static TIMED_LOOP uint32_t send_recv(struct agent *g)
{
    uint32_t n = g->a->iterations;
    int initiator = g->a->role != 0;
    CHECK(post_recv_slot(g, 0));
    if (!initiator && n > 1)
        CHECK(post_recv_slot(g, 1));
    uint64_t t0 = nv_card_cycles();
    for (uint32_t i = 0; i < n; i++) {
        uint32_t this_slot = i & 1;
        if (initiator) {
            CHECK(post_send(g));
            if (i + 1 < n) /* the next answer's, in the slot the last answer has left */
                CHECK(post_recv_slot(g, this_slot ^ 1));
            CHECK(wait_done(g, 1, 0));
            CHECK(wait_recv(g, this_slot));
            seen(g, i);
        } else {
            CHECK(wait_recv(g, this_slot));
            seen(g, i);
            CHECK(post_send(g));
            if (i + 2 < n) /* the message after the next, in the slot this one has left */
                CHECK(post_recv_slot(g, this_slot));
            CHECK(wait_done(g, 1, 0));
        }
    }
    g->r->cycles = nv_card_cycles() - t0;
    return NV_VIP_SUCCESS;
}

static TIMED_LOOP uint32_t rdma_write(struct agent *g)
{
    uint32_t n = g->a->iterations;
    int initiator = g->a->role != 0;
    if (g->a->size == 0)
        return NV_VIP_INVALID_PARAMETER; /* the marker needs a byte */
    struct marker_at at = marker_at(g->a);
    uint8_t ours = initiator ? 2 : 1, theirs = initiator ? 1 : 2;
    uint64_t t0 = nv_card_cycles();
    for (uint32_t i = 0; i < n; i++, ours = next_marker(ours), theirs = next_marker(theirs)) {
        if (!initiator) {
            CHECK(wait_marker(g, at, theirs));
            seen(g, i);
        }
        set_marker(at, ours);
        CHECK(post_send(g));
        /* Its completion (the peer card's acknowledgement) comes while the peer's CPU answers,
         * so it is taken here rather than between the answer's arrival and the next post. */
        CHECK(wait_done(g, 1, 0));
        if (initiator) {
            CHECK(wait_marker(g, at, theirs));
            seen(g, i);
        }
    }
    g->r->cycles = nv_card_cycles() - t0;
    return NV_VIP_SUCCESS;
}

/* Streaming: the initiator keeps `depth` sends (or RDMA writes) in flight on each of its VIs,
 * spreading the messages over them in turn, until ITERATIONS completed (in the order posted).
 * Each message in flight has its slot, read at its post and at its completion: a window larger
 * than the data cache holds (64 VIs at 8 deep: 512 slots) reads both from memory. For
 * sends the responder posts a receive for every message first (VIA has no flow control: a send that
 * finds no receive breaks the connection), then waits for them all; the host starts the initiator
 * once they are posted. */
static TIMED_LOOP uint32_t stream(struct agent *g, int with_receives)
{
    uint32_t n = g->a->iterations;
    if (with_receives && n > RECV_SLOTS * g->vis)
        return NV_VIP_INVALID_PARAMETER;
    if (g->a->role == 0) {
        if (!with_receives)
            return NV_VIP_SUCCESS; /* RDMA writes need no remote CPU */
        for (uint32_t i = 0; i < n; i++)
            CHECK(post_recv_slot(g, i));
        uint64_t t0 = nv_card_cycles();
        for (uint32_t i = 0; i < n; i++)
            CHECK(wait_done(g, 0, i));
        g->r->cycles = nv_card_cycles() - t0;
        return NV_VIP_SUCCESS;
    }
    /* Message i's slot, i modulo `slots`, stepped as a pointer (no division, no multiplication). */
    uint32_t slots = g->depth * g->vis, posted = 0, completed = 0;
    struct nv_via_prebuilt *first = g->send, *end = first + slots, *post_at = first, *done_at = first;
    uint64_t t0 = nv_card_cycles();
    while (completed < n) {
        for (; posted < n && posted - completed < slots; posted++) {
            CHECK(nv_via_post_prebuilt(g->via, post_at, g->a->size));
            post_at = post_at + 1 == end ? first : post_at + 1;
        }
        CHECK(wait_prebuilt(g, done_at));
        done_at = done_at + 1 == end ? first : done_at + 1;
        completed++;
    }
    g->r->cycles = nv_card_cycles() - t0;
    return NV_VIP_SUCCESS;
}

static TIMED_LOOP uint32_t rdma_read(struct agent *g)
{
    if (g->a->role == 0)
        return NV_VIP_SUCCESS; /* the remote side of a read needs no CPU */
    uint64_t t0 = nv_card_cycles();
    for (uint32_t i = 0; i < g->a->iterations; i++) {
        CHECK(post_send(g));
        CHECK(wait_done(g, 1, 0));
        seen(g, i);
    }
    g->r->cycles = nv_card_cycles() - t0;
    return NV_VIP_SUCCESS;
}

/* Every slot's descriptor of every VI of the run, written once (outside the timed loops), in the
 * VI's page of the area, which becomes the VI's descriptor area; slot j of the run's k-th VI is
 * the agent's slot j * vis + k. */
static uint32_t prebuild(struct agent *g, uint32_t send_op)
{
    const struct nv_bench_args *a = g->a;
    uint32_t recv_words[DESC_WORDS], send_words[DESC_WORDS];
    unsigned recv_count = build(a, NV_CONTROL_OP_SENDRECV, recv_words), send_count = build(a, send_op, send_words);
    for (unsigned k = 0; k < g->vis; k++) {
        uint32_t vi = a->vi + k, area = a->desc + k * AREA_BYTES;
        uint32_t result = nv_via_set_desc_area(g->via, vi, area, SEND_DESC + STREAM_DEPTH * SLOT_BYTES);
        for (unsigned i = 0; i < RECV_SLOTS && result == NV_VIP_SUCCESS; i++)
            result = nv_via_prebuild(g->via, slot(g, 0, i * g->vis + k), vi, 0, area + RECV_DESC + i * SLOT_BYTES,
                                     recv_words, recv_count);
        for (unsigned i = 0; i < g->depth && result == NV_VIP_SUCCESS; i++)
            result = nv_via_prebuild(g->via, slot(g, 1, i * g->vis + k), vi, 1, area + SEND_DESC + i * SLOT_BYTES,
                                     send_words, send_count);
        if (result != NV_VIP_SUCCESS)
            return result;
    }
    return NV_VIP_SUCCESS;
}

/* The run's VIs a->vi..a->vi+vis-1 (more than one only for a stream): all the card's, connected. */
static int vis_usable(const struct nv_via *via, const struct nv_bench_args *a, uint32_t vis)
{
    if (vis > 1 && a->op != NV_BENCH_OP_SEND_STREAM && a->op != NV_BENCH_OP_WRITE_STREAM)
        return 0;
    if (vis > NV_VIA_VI_CAPACITY || a->vi + vis < a->vi)
        return 0;
    for (uint32_t vi = a->vi; vi < a->vi + vis; vi++)
        if (!nv_via_vi_valid(via, vi) || nv_via_vi_state(vi) != NV_VI_STATE_CONNECTED)
            return 0;
    return 1;
}

uint32_t nv_via_bench(struct nv_via *via, const struct nv_bench_args *a, struct nv_bench_result *r)
{
    *r = (struct nv_bench_result){0};
    uint32_t vis = a->stream_vis ? a->stream_vis : 1, depth = a->stream_depth ? a->stream_depth : STREAM_DEPTH;
    if (!vis_usable(via, a, vis) || depth > STREAM_DEPTH || a->iterations == 0 ||
        (a->desc & (NV_DESCRIPTOR_ALIGN - 1)) ||
        !nv_via_host_range(via, a->desc, (vis - 1) * AREA_BYTES + SEND_DESC + STREAM_DEPTH * SLOT_BYTES) ||
        (a->size && !nv_via_host_range(via, a->buf_pa, a->size)))
        return NV_VIP_INVALID_PARAMETER;
    static const uint32_t ops[] = {[NV_BENCH_OP_SEND_RECV] = NV_CONTROL_OP_SENDRECV,
                                   [NV_BENCH_OP_RDMA_WRITE] = NV_CONTROL_OP_RDMA_WRITE,
                                   [NV_BENCH_OP_RDMA_READ] = NV_CONTROL_OP_RDMA_READ,
                                   [NV_BENCH_OP_SEND_STREAM] = NV_CONTROL_OP_SENDRECV,
                                   [NV_BENCH_OP_WRITE_STREAM] = NV_CONTROL_OP_RDMA_WRITE};
    if (a->op >= sizeof ops / sizeof ops[0])
        return NV_VIP_INVALID_PARAMETER;
    uint32_t timeout_us = a->timeout_us ? a->timeout_us : 1000000u;
    if (timeout_us > 20000000u)
        timeout_us = 20000000u; /* the 32-bit cycle counter wraps after 42 s */
    /* On the stack, beside the caller's arguments and result: all the loops touch in RAM is a few
     * hundred contiguous bytes, which cannot conflict in the data cache wherever the stack is. */
    struct agent g = {.via = via,
                      .a = a,
                      .r = r,
                      .timeout_cycles = timeout_us * (via->clk_freq_hz / 1000000u),
                      .vis = vis,
                      .depth = depth};
    g.recv = g.one_recv;
    g.send = g.one_send;
    if (vis > 1) {
        size_t lent;
        struct nv_via_prebuilt *slots = nv_platform_scratch(&lent);
        if (slots == NULL || lent / sizeof *slots < vis * (RECV_SLOTS + depth))
            return NV_VIP_ERROR_RESOURCE;
        g.recv = slots;
        g.send = slots + vis * RECV_SLOTS;
    }
    if (a->wake_cq) {
        /* The queue must exist and take this VI's receive completions (nothing else's matter:
         * only the entries' count is read). Entries left by an earlier run are taken first. */
        uint32_t cq = a->wake_cq - 1, bind = nv_reg_read(NV_VIA_VI_CQ_BIND_AT(a->vi));
        if (a->op != NV_BENCH_OP_SEND_RECV || !(bind & NV_VIA_VI_CQ_BIND_RECV_EN_MASK) ||
            (bind & NV_VIA_VI_CQ_BIND_RECV_CQ_MASK) >> NV_VIA_VI_CQ_BIND_RECV_CQ_SHIFT != cq ||
            !nv_via_cq_valid(via, cq))
            return NV_VIP_INVALID_PARAMETER;
        g.cq_head = nv_reg_read(NV_VIA_CQ_TAIL_AT(cq));
        nv_reg_write(NV_VIA_CQ_HEAD_AT(cq), g.cq_head);
    }
    uint32_t result = prebuild(&g, ops[a->op]);
    if (result != NV_VIP_SUCCESS)
        return result;
    switch (a->op) {
    case NV_BENCH_OP_SEND_RECV: return send_recv(&g);
    case NV_BENCH_OP_RDMA_WRITE: return rdma_write(&g);
    case NV_BENCH_OP_RDMA_READ: return rdma_read(&g);
    case NV_BENCH_OP_SEND_STREAM: return stream(&g, 1);
    case NV_BENCH_OP_WRITE_STREAM: return stream(&g, 0);
    }
    return NV_VIP_INVALID_PARAMETER;
}

#define ARG(name) args[NV_MBOX_BENCH_ARG_##name]
#define RES(name) args[NV_MBOX_BENCH_RES_##name]

/* A field of the command's STREAM word (a BENCH_STREAM_ARG). */
static uint32_t stream_field(const uint32_t args[16], unsigned offset, unsigned bytes)
{
    return (uint32_t)nv_get_field(&args[NV_MBOX_BENCH_ARG_STREAM], offset, bytes);
}

/* The BENCH mailbox command: its words in, the run's figures out. */
static uint32_t bench_command(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)context, (void)code;
    struct nv_bench_args a = {
        .role = ARG(ROLE),
        .op = ARG(OP),
        .vi = ARG(VI),
        .size = ARG(SIZE),
        .iterations = ARG(ITERATIONS),
        .buf_va = (uint64_t)ARG(BUF_VA_HI) << 32 | ARG(BUF_VA_LO),
        .buf_handle = ARG(BUF_HANDLE),
        .buf_pa = ARG(BUF_PA),
        .remote_va = (uint64_t)ARG(REMOTE_VA_HI) << 32 | ARG(REMOTE_VA_LO),
        .remote_handle = ARG(REMOTE_HANDLE),
        .desc = ARG(DESC),
        .timeout_us = ARG(TIMEOUT_US),
        .wake_cq = args[NV_MBOX_BENCH_ARG_WAKE_CQ],
        .stream_vis = stream_field(args, NV_BENCH_STREAM_ARG_VIS_OFFSET, NV_BENCH_STREAM_ARG_VIS_BYTES),
        .stream_depth = stream_field(args, NV_BENCH_STREAM_ARG_DEPTH_OFFSET, NV_BENCH_STREAM_ARG_DEPTH_BYTES),
    };
    struct nv_bench_result r = {0};
    uint32_t result;
    if (a.op == NV_PP_BENCH_OP_ORIGINAL || a.op == NV_PP_BENCH_OP_ADVANCED)
        result = nv_pp_bench(via, &a, args, &r); /* push-pull: two more words each way */
    else if (stream_field(args, NV_BENCH_STREAM_ARG_RESERVED_OFFSET, NV_BENCH_STREAM_ARG_RESERVED_BYTES))
        result = NV_VIP_INVALID_PARAMETER; /* a stream's shape this firmware does not know */
    else
        result = nv_via_bench(via, &a, &r);
    RES(CYCLES_LO) = (uint32_t)r.cycles;
    RES(CYCLES_HI) = (uint32_t)(r.cycles >> 32);
    RES(POST_RECV_CYCLES) = r.post_recv_cycles;
    RES(POST_RECVS) = r.post_recvs;
    RES(POLLS) = r.polls;
    RES(SEEN_CYCLES) = r.seen_cycles;
    return result;
}

nv_status nv_bench_register(struct nv_via *via)
{
    return nv_via_register_command(via, NV_MBOX_BENCH, bench_command, NULL);
}
