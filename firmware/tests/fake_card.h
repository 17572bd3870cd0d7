/* A register-level model of the card for host unit tests of the portable core, with knobs to
 * make it misbehave the way broken hardware would. */
#ifndef FAKE_CARD_H
#define FAKE_CARD_H

#include <stdint.h>

struct fake_card {
    uint32_t id;      /* what CTRL.ID reads */
    uint32_t version; /* what CTRL.VERSION reads */
    uint32_t strap;
    uint32_t mode_strap;
    uint32_t features; /* what CTRL.FEATURES reads */
    uint32_t scratch;
    uint32_t scratch_stuck_low; /* bits of SCRATCH that always read 0 */
    uint32_t node_id;
    int node_id_ignores_writes;
    uint32_t ctrl;
    uint64_t cycles;
    uint32_t cycles_per_read; /* how far CYCLES moves at each read (0: it stands still) */
    unsigned cycles_reads;    /* reads of CYCLES_LO */
    uint32_t cycles_hi_latch;
    /* remote access controller: control store */
    uint64_t store[1024];
    uint32_t store_depth;
    uint32_t ucode_addr;
    uint32_t wdata_lo;
    uint32_t rac_ctrl;
    uint64_t store_stuck_bits; /* bits that always read 0 */
    int refuse_loaded;         /* CTRL.LOADED never sticks */
    unsigned reads, writes;
    char log[4096]; /* everything nv_log printed */
    /* RAM the port lends the core (nv_platform_scratch): `lent_bytes` of it, all by default. */
    uint32_t lent[2048];
    size_t lent_bytes;
};

extern struct fake_card fake;

/* A healthy card with the given strap. */
void fake_card_reset(unsigned strap);

#endif
