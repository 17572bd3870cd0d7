/* A register-level model of the card's VIA block and of host memory, for host unit tests of the
 * VIA protocol manager: it keeps the ATT words the firmware writes, records management frames it
 * sends, lets a test inject received ones, and follows VI commands like the engine does. */
#ifndef FAKE_VIA_H
#define FAKE_VIA_H

#include <stdint.h>

#include "numavia_regs.h"

#define FAKE_VIS 4
#define FAKE_CQS 2
#define FAKE_REGIONS 8
#define FAKE_PAGES 64
#define FAKE_HOST_BASE 0x60000000u
#define FAKE_HOST_SIZE 0x10000u
#define FAKE_MAX_FRAMES 64

struct fake_frame {
    unsigned node, length;
    uint32_t words[16];
};

struct fake_via {
    unsigned vi_count; /* VI_COUNT: FAKE_VIS unless a test says otherwise */
    uint32_t ctrl, mtu, att_addr;
    uint32_t att[FAKE_REGIONS * 8 + FAKE_PAGES];
    unsigned att_writes;                                    /* ATT_WDATA writes so far */
    unsigned forgets;                                       /* FORGET_COPIES writes so far */
    unsigned att_last_write[FAKE_REGIONS * 8 + FAKE_PAGES]; /* when each word was last written */
    uint32_t mbox_cmd, mbox_status, mbox_data[16];
    uint32_t irq_enable;
    unsigned irq_mbox_acks;             /* IRQ_ACK writes with the MBOX bit */
    unsigned irq_mbox_acks_at_cmd_read; /* ... counted when MBOX_CMD was last read */
    uint32_t mgmt_tx_data[16];
    struct fake_frame sent[FAKE_MAX_FRAMES];
    unsigned sent_count;
    struct fake_frame inbox[FAKE_MAX_FRAMES]; /* frames to deliver, in order */
    unsigned inbox_count, inbox_next;
    struct {
        uint32_t peer, ptag, cq_bind, state, queued, rx_psn;
        unsigned connects, fails, resets;
        uint32_t desc_base, desc_size; /* the descriptor area, checked by doorbells as by the card */
        uint32_t sq_doorbells, rq_doorbells, last_doorbell, refused_doorbells;
        uint32_t sq_reposts;  /* of sq_doorbells, those rung through SQ_REPOST */
    } vi[NV_VIA_VI_CAPACITY]; /* the first vi_count answer */
    struct {
        uint32_t base, size, head, tail;
        unsigned resets, arms, acks;
    } cq[FAKE_CQS];
    uint32_t cq_notified; /* CQ_NOTIFIED: a test sets the bits of queues whose notification fired */
    uint8_t host[FAKE_HOST_SIZE];
    unsigned host_syncs;
    unsigned host_reads, host_writes; /* nv_host_read32 / nv_host_write32 and 8 calls: uncached accesses on the card */
    /* A word the card writes while the firmware polls: `value` at `at`, seen by the read that
     * makes host_reads reach `at_read` (0: none). */
    struct {
        uint32_t at, value;
        unsigned at_read;
    } host_later;
    /* Called after a doorbell is counted, if set: a test's model of the engine behind it. */
    void (*doorbell_hook)(unsigned vi, int send_queue, uint32_t descriptor);
};

extern struct fake_via fake_via;

void fake_via_reset(void);
uint32_t fake_via_read(uint32_t offset);
void fake_via_write(uint32_t offset, uint32_t value);
/* Queue a management frame from `node` for the firmware to receive. */
void fake_via_inject(unsigned node, const uint32_t *words, unsigned length);
/* Host memory as bytes. */
void fake_host_put32(uint32_t phys, uint32_t value);

#endif
