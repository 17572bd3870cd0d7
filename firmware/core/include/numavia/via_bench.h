/* The benchmark agent: NetPIPE-style ping-pongs between two nodes' agents, timed by the card.
 *
 * An agent on the VIA manager: it owns the mailbox's BENCH command, which it registers with the
 * manager (nv_bench_register); the operation picks the VIA ping-pong (nv_via_bench) or the
 * push-pull one (nv_pp_bench, numavia/pushpull.h). */
#ifndef NUMAVIA_VIA_BENCH_H
#define NUMAVIA_VIA_BENCH_H

#include <stdint.h>

#include "numavia/core.h"
#include "numavia/via.h"

/* A ping-pong of `iterations` round trips (see NV_MBOX_BENCH). */
struct nv_bench_args {
    uint32_t role, op, vi, size, iterations;
    uint64_t buf_va, remote_va;
    uint32_t buf_handle, buf_pa, remote_handle, desc, timeout_us;
    uint32_t wake_cq; /* send/receive: 0 polls the receives, n sleeps on CQ n-1 (NV_MBOX_BENCH_ARG_WAKE_CQ) */
    /* Streams (NV_MBOX_BENCH_ARG_STREAM): over VIs vi..vi+n-1, a page of desc each (0: one), and
     * their messages in flight on each VI (0: NV_MBOX_BENCH_STREAM_DEPTH, which is also the most). */
    uint32_t stream_vis, stream_depth;
};
struct nv_bench_result {
    uint64_t cycles; /* the whole run, first post to last completion */
    uint32_t post_recv_cycles, post_recvs, polls;
    uint32_t seen_cycles; /* card cycle (low word) at which the last iteration saw its message arrive */
};
uint32_t nv_via_bench(struct nv_via *via, const struct nv_bench_args *args, struct nv_bench_result *result);

/* Register the BENCH mailbox command with the manager (after nv_via_init). */
nv_status nv_bench_register(struct nv_via *via);

#endif
