/* The VIA protocol manager: the firmware half of the card's VIA engine.
 *
 * The hardware moves data on its own; the firmware does what the paper's "VI protocol manager"
 * does around it: protection tags, memory registration into the ATT, completion queues, VIs,
 * connection set-up and tear-down with the peer's firmware (management frames), errors. The host
 * asks for all of it through the mailbox (docs/via.md); nv_via_poll() serves one round. Agents
 * built on the manager (the benchmark agents) add mailbox commands of their own by registering a
 * handler (nv_via_register_command); the manager knows none of them. */
#ifndef NUMAVIA_VIA_MANAGER_H
#define NUMAVIA_VIA_MANAGER_H

#include <stdint.h>

#include "numavia/core.h"

/* The VIs the manager keeps state for (struct nv_via_vi, in the CPU's RAM): a build for one card
 * sizes it to that card's VI_COUNT (the bare-metal build passes the SoC's NUMAVIA_VIA_VIS), so a
 * small board's RAM holds only the VIs its card has; by default, all the register map has room for. */
#ifndef NV_VIA_MAX_VIS
#define NV_VIA_MAX_VIS NV_VIA_VI_CAPACITY
#endif
_Static_assert(NV_VIA_MAX_VIS >= 1 && NV_VIA_MAX_VIS <= NV_VIA_VI_CAPACITY, "the register map has room for the VIs");
#define NV_VIA_MAX_CQS 16
#define NV_VIA_MAX_PTAGS 16
#define NV_VIA_MAX_REGIONS 256
#define NV_VIA_MAX_PAGES 8192
#define NV_VIA_MAX_REQUESTS 8 /* connection requests a node keeps waiting for its host at once */

/* Firmware timers, in microseconds. */
#define NV_VIA_RETRY_US 100 /* management requests are repeated this often */
#define NV_VIA_CONNECT_TIMEOUT_US 20000
#define NV_VIA_FLUSH_TIMEOUT_US 2000

enum nv_via_conn_state {
    NV_CONN_NONE = 0,
    NV_CONN_REQUESTING,   /* client: CONNECT_REQUEST sent, no answer yet */
    NV_CONN_CONNECTED,    /* the VI is connected */
    NV_CONN_REJECTED,     /* client: the server said no */
    NV_CONN_TIMED_OUT,    /* client: no answer before the timeout */
    NV_CONN_DISCONNECTING /* DISCONNECT sent, no DISCONNECT_ACK yet */
};

struct nv_via_buffer { /* an RDMA buffer offered during connection set-up */
    uint64_t va;
    uint32_t handle, length;
};

struct nv_via_vi {
    uint8_t used;
    uint8_t conn; /* enum nv_via_conn_state */
    uint16_t ptag;
    uint8_t peer_node, peer_vi;
    uint8_t accepted; /* connected as the server: request_id is the client's, answered again if it asks again */
    uint32_t discriminator, request_id;
    uint64_t deadline, next_retry; /* cycles */
    struct nv_via_buffer local, remote;
};

enum nv_via_request_state { NV_REQ_FREE = 0, NV_REQ_PENDING, NV_REQ_HANDED };

/* A connection request received by this node (server side), until the host accepts or rejects
 * it: an accepted one lives on in the VI it connected (nv_via_vi.accepted), so the table holds
 * only the requests waiting, however many VIs are connected. */
struct nv_via_request {
    uint8_t state;    /* enum nv_via_request_state */
    uint8_t node, vi; /* the client */
    uint32_t discriminator, request_id;
    struct nv_via_buffer remote;
};

/* Each field as narrow as its range allows: NV_VIA_MAX_REGIONS of them live in the CPU's RAM,
 * 8 KiB on the smallest board. */
struct nv_via_region {
    uint16_t l2_index, pages; /* at most NV_VIA_MAX_PAGES */
    uint8_t used, ptag;
};
_Static_assert(NV_VIA_MAX_PAGES <= UINT16_MAX && NV_VIA_MAX_PTAGS <= UINT8_MAX, "a region's fields hold their ranges");

/* Mailbox commands: each code dispatches to the handler registered for it, with the context it
 * was registered with; `args` are the 16 mailbox words, in and out. Returns a VIP result code. */
#define NV_VIA_MAX_COMMANDS 24 /* the manager's own 15 commands and room for the agents' */
struct nv_via;
typedef uint32_t (*nv_via_command_handler)(struct nv_via *via, void *context, uint32_t code, uint32_t args[16]);
struct nv_via_command_entry {
    uint32_t code;
    nv_via_command_handler handler;
    void *context;
};

struct nv_via {
    unsigned node_id;
    uint32_t clk_freq_hz;
    uint8_t irq; /* the card's interrupt wakes the port (nv_via_irq_enable) */
    /* What the card has (its RO registers). */
    unsigned vis, cqs, queue_depth, max_segments, att_regions, att_pages, max_mtu;
    uint32_t host_base, host_size;
    uint16_t mbox_seq;
    uint32_t next_request_id;
    uint32_t ptags; /* bit i: tag i+1 allocated */
    uint32_t cqs_used;
    unsigned command_count;
    uint32_t generation; /* moves on at every deregistration and VI reset (prebuilt descriptors, via_post.h) */
    /* The tables last, the VIs' (which grows with the card) at the end: the fields before them
     * stay within reach of the global pointer (one instruction an access) on a card of 64 VIs. */
    struct nv_via_command_entry commands[NV_VIA_MAX_COMMANDS];
    struct nv_via_request requests[NV_VIA_MAX_REQUESTS];
    struct nv_via_region regions[NV_VIA_MAX_REGIONS];
    uint32_t l2_used[NV_VIA_MAX_PAGES / 32];
    struct nv_via_vi vi[NV_VIA_MAX_VIS];
};

/* Read the card's VIA parameters, reset its VIs and CQs, enable the engine, and register the
 * manager's own mailbox commands (agents register theirs after this). */
nv_status nv_via_init(struct nv_via *via, unsigned node_id, uint32_t clk_freq_hz);

/* One round of service: a mailbox command, a management frame, retries and timeouts. */
void nv_via_poll(struct nv_via *via);

/* For ports that sleep between rounds (Zephyr) instead of polling (bare metal): the card's interrupt
 * then rises when a round has work, a mailbox command or a management frame, or when an armed
 * completion queue notifies (nv_via_cq_arm); nv_via_poll acknowledges the mailbox's before reading
 * it, so a command written meanwhile raises it again. A port that masks the manager's work while
 * a round is pending (IRQ_ENABLE) calls this again to unmask it. */
void nv_via_irq_enable(struct nv_via *via);

/* Completion-queue notification, for a thread that sleeps until its queue has an entry instead of
 * polling it: arm queue `cq` once it was found empty (its consumer has written HEAD); the card
 * then sets the queue's CQ_NOTIFIED bit, and raises IRQ_PENDING.CQ, as soon as the queue holds an
 * entry not consumed, even one that came before the arming. One notification per arming.
 * NV_VIP_INVALID_PARAMETER (nothing armed) for a queue that was not created. */
uint32_t nv_via_cq_arm(const struct nv_via *via, uint32_t cq);

/* Whether queue `cq`'s notification fired; acknowledges it if so (the ports' nv_platform_wait_cq
 * and interrupt handlers). */
int nv_via_cq_take_notification(unsigned cq);

/* The queues of `mask` (bit i: CQ i) whose notification fired, each acknowledged: one register read
 * for all of them (an interrupt handler's). */
uint32_t nv_via_cq_take_notifications(uint32_t mask);

/* nv_platform_wait_cq for a port with no interrupts (bare metal, the unit tests): polls the card's
 * CQ_NOTIFIED, a register, rather than host memory. */
int nv_via_cq_wait_polled(unsigned cq, uint64_t deadline);

/* The card cycle count by which the manager's timers need a round (a retry or a timeout falls due),
 * or UINT64_MAX when nothing but the interrupt can bring work. */
uint64_t nv_via_next_timer(const struct nv_via *via);

/* Make mailbox command `code` run `handler` (with `context`). NV_ERR_ARG for a NULL handler,
 * NV_ERR_EXISTS when the code already has one, NV_ERR_FULL when all NV_VIA_MAX_COMMANDS are taken;
 * the table is then unchanged. */
nv_status nv_via_register_command(struct nv_via *via, uint32_t code, nv_via_command_handler handler, void *context);

/* The mailbox command `code` with its arguments in/out of `args` (what nv_via_poll runs for the
 * host); returns a VIP result code (NV_VIP_*), NV_VIP_INVALID_FUNCTION for a code with no handler. */
uint32_t nv_via_command(struct nv_via *via, uint32_t code, uint32_t args[16]);

/* --- the pieces, for the unit tests ------------------------------------------------------- */
uint32_t nv_via_register_mem(struct nv_via *via, uint64_t va, uint32_t length, uint32_t ptag, uint32_t attributes,
                             uint32_t page_list, uint32_t page_count, uint32_t *handle);
uint32_t nv_via_deregister_mem(struct nv_via *via, uint32_t handle);
void nv_via_handle_mgmt(struct nv_via *via, unsigned src_node, const uint32_t *words, unsigned length);
uint64_t nv_via_now_us(const struct nv_via *via);

#endif
