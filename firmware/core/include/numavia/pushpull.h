/* Push-pull messaging over the VIA engine (the push-pull paper, docs/references.md; docs/via.md "Push-pull messaging").
 *
 * A portable library on the firmware's VIA API: it writes descriptors into host memory, rings
 * doorbells and polls completions the way a VIPL library in a host process would. The benchmark
 * agent drives it, so its latency comes from the card's cycle counter with nothing slower than
 * the node's CPU in the loop.
 *
 * A message's first min(length, bytes_to_push) bytes are pushed (a SEND) into a pushed-buffer
 * slot the receiver keeps posted; the rest is pulled by the receiver (an RDMA read) straight into
 * the user buffer once the receive is posted, then acknowledged. A message that arrives before
 * its receive waits in its slot. Formats and layout: numavia_pushpull.h (generated from
 * host/numavia/base/pushpull_format.py). User buffers are physically contiguous (va, pa) ranges of
 * host memory: translating one is writing its pages into the card's ATT. */
#ifndef NUMAVIA_PUSHPULL_H
#define NUMAVIA_PUSHPULL_H

#include <stdint.h>

#include "numavia/via.h"
#include "numavia/via_bench.h"
#include "numavia_pushpull.h"

/* The library's send descriptors, one per use, each at its own place in the descriptor page: a
 * use waits for its descriptor's last post to complete before posting it again. The two advanced
 * pushes (they share the bounce slot) come first. */
enum nv_pp_send {
    NV_PP_SEND_REGISTER, /* advanced push of a word: short header and the word from the bounce slot */
    NV_PP_SEND_BOUNCE,   /* advanced push: header and pushed part from the bounce slot */
    NV_PP_SEND_GATHER,   /* original push: header, then the pushed part from the user buffer */
    NV_PP_SEND_CONTROL,  /* ACK or CREDIT: a header only */
    NV_PP_SEND_READ,     /* the pull: an RDMA read into the user buffer */
    NV_PP_SENDS
};
#define NV_PP_RECORD_WORDS 16u /* the longest record: a SEND with two data segments, an RDMA with one */

/* How one message of `length` bytes travels (pure: the unit tests check the edge cases). */
enum nv_pp_path {
    NV_PP_PATH_REGISTER = 0, /* advanced, tiny: one word behind the short header, a descriptor that never changes */
    NV_PP_PATH_BOUNCE,       /* advanced, pushed part copied behind the header: no translation */
    NV_PP_PATH_GATHER,       /* original: the push gathers from the translated user buffer */
};
struct nv_pp_plan {
    uint32_t pushed, pulled;
    uint8_t path;                  /* enum nv_pp_path */
    uint8_t send_translates;       /* the sender writes the ATT: 0 none, 1 the whole buffer, 2 the pulled part */
    uint8_t recv_translates_early; /* the receiver translates before the push arrives (masked) */
    uint8_t ack_overlaps_pull;     /* the ack is queued behind the pull, before it completes */
};
void nv_pp_plan(unsigned scheme, uint32_t threshold, uint32_t length, struct nv_pp_plan *plan);

struct nv_pp_buf {
    uint64_t va;
    uint32_t pa; /* physically contiguous from here */
};

struct nv_pp_config {
    unsigned scheme;       /* NV_PP_SCHEME_* */
    uint32_t threshold;    /* bytes_to_push, at most NV_PP_MAX_PUSH */
    unsigned vi;           /* a connected VI */
    struct nv_pp_buf area; /* NV_PP_AREA_BYTES of a registered region: slots, bounce, page lists */
    uint32_t area_handle;
    uint32_t desc; /* a 4 KiB host page for the descriptors */
    uint32_t timeout_us;
};

struct nv_pp_stats {
    uint64_t one_way_cycles; /* sum over received stamped messages of (arrival in the user buffer - send start) */
    uint32_t arrived_cycles; /* card cycle (low word) the last stamped message was in the user buffer */
    uint32_t one_ways, translated_pages, copied_bytes, pulls, credit_waits;
};

/* A record of the library in host memory (a descriptor or a header) and the words it last wrote
 * there: setting a field writes its word only when the word changes, so a message posts what
 * differs from the last one and nothing else (each write is an uncached bus access). The words
 * the card writes (a descriptor's LENGTH, STATUS, a receive's immediate data) are not kept. */
struct nv_pp_record {
    uint32_t pa;
    uint32_t words[NV_PP_RECORD_WORDS];
    uint8_t changed; /* a word was written since the record was last posted */
};

/* A descriptor posted unchanged since its last post rings `unchanged`: a send's SQ_REPOST, so the
 * card sends it from the copy it kept, if it still holds one, with neither fetch nor validation. */
struct nv_pp_desc {
    struct nv_pp_record r;
    uint32_t doorbell, unchanged; /* card registers of its queue: SQ_DOORBELL and SQ_REPOST (RQ_DOORBELL twice) */
    uint8_t rdma, posted;
};

struct nv_pp {
    struct nv_via *via;
    struct nv_pp_config cfg;
    uint8_t open;
    uint32_t timeout_cycles;
    uint32_t credits, owed;       /* slots the peer has for us; slots we re-posted and not yet told */
    uint32_t send_seq, acked_seq; /* of send_message's messages (a register push carries no SEQ) */
    /* A message shorter than this is a register push (advanced scheme: at most
     * NV_PP_REGISTER_BYTES and the threshold); 0: none. nv_pp_send's test, in one compare. */
    uint32_t register_below;
    /* Receive slots in the order they were posted (the engine completes them in that order), and
     * DATA messages that arrived, in arrival order, with the header words read from their slot. */
    uint8_t posted[NV_PP_SLOTS], arrived[NV_PP_SLOTS];
    unsigned posted_head, posted_count, arrived_head, arrived_count;
    uint32_t header[NV_PP_SLOTS][NV_PP_HEADER_SIZE / 4];
    /* The slot a small message was taken from (slot + 1; 0: none), posted again by the next
     * receive before it polls, or by a send after its doorbell: re-posting it is not on the path
     * from a message's arrival to its answer. */
    uint8_t taken;
    struct nv_pp_desc slot[NV_PP_SLOTS], send[NV_PP_SENDS];
    /* Outgoing headers: the bounce slot's (advanced pushes), the original push's, ACK/CREDIT's. */
    struct nv_pp_record bounce_header, gather_header, control_header;
    uint8_t bounce_clobbered;     /* a short message's pushed part overwrote the bounce header's tail */
    struct nv_pp_desc *last_push; /* the last push posted: a waiting receive takes its completion */
    /* Set by the caller: the next message sent is STAMPED, its receiver adds its one-way time to
     * its statistics. A sample, asked for per message: it costs each side a counter read. */
    uint8_t stamp_next;
    struct nv_pp_stats stats;
};

/* Post every pushed-buffer slot; credits start at NV_PP_SLOTS (the peer does the same). */
uint32_t nv_pp_open(struct nv_pp *pp, struct nv_via *via, const struct nv_pp_config *cfg);
/* Send `length` bytes; returns when the buffer may be reused. */
uint32_t nv_pp_send(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t length);
/* Receive the next message into `buf` (capacity bytes); its length in *length. */
uint32_t nv_pp_recv(struct nv_pp *pp, struct nv_pp_buf buf, uint32_t capacity, uint32_t *length);
/* Wait for every send descriptor; the endpoint stays open (its slots stay posted). */
uint32_t nv_pp_drain(struct nv_pp *pp);

/* The benchmark agent's push-pull ping-pong (BENCH with OP NV_PP_BENCH_OP_*): `words` are the
 * mailbox words (arguments in, results out). */
uint32_t nv_pp_bench(struct nv_via *via, const struct nv_bench_args *args, uint32_t words[16],
                     struct nv_bench_result *result);

#endif
