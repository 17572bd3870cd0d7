/* Portable firmware core of the Numavia card: what every port (bare metal, Zephyr) runs at boot. */
#ifndef NUMAVIA_CORE_H
#define NUMAVIA_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "numavia/platform.h"
#include "numavia_regs.h"

/* Printed once boot is complete; the simulation and host tools wait for it. */
#define NV_READY_MARKER "numavia: ready"

typedef enum {
    NV_OK = 0,
    NV_ERR_NO_CARD = -1,    /* CTRL.ID does not read CARD_ID: nothing (or something else) answers */
    NV_ERR_VERSION = -2,    /* the card's major version differs from the one we were built for */
    NV_ERR_RANGE = -3,      /* an argument is outside its valid range */
    NV_ERR_READBACK = -4,   /* a register did not read back what was written */
    NV_ERR_ARG = -5,        /* a required pointer argument is NULL */
    NV_ERR_CRC = -6,        /* the control store's contents do not have the image's CRC */
    NV_ERR_NOT_LOADED = -7, /* the remote access controller refused to go live */
    NV_ERR_EXISTS = -8,     /* something is already registered under that key */
    NV_ERR_FULL = -9        /* a fixed-size table has no free entry */
} nv_status;

/* A microcode image for the remote access controller's control store: its words (an image staged
 * in memory), or, when `words` is NULL, the packed form numavia_ucode.h builds into the firmware
 * (nv_ucode_packed: per word a mask byte, bit i set when byte i is nonzero, then those bytes). */
struct nv_ucode_image {
    const uint64_t *words;
    const uint8_t *packed;
    uint32_t packed_bytes;
    uint32_t count; /* words, in either form */
    uint32_t crc32; /* zlib CRC-32 of the words, little-endian */
};

struct nv_card_info {
    uint32_t id;
    uint8_t version_major, version_minor, version_patch;
    uint8_t node_id_strap;
    uint8_t node_id;
    uint32_t clk_freq_hz;
    uint32_t features; /* CTRL.FEATURES: NV_CTRL_FEATURES_VIA_MASK, NV_CTRL_FEATURES_PCIE_MASK */
};

/* Human-readable name of a status code; never NULL. */
const char *nv_strerror(nv_status status);

/* Read identity, version, strap and clock; fails if no compatible card answers. */
nv_status nv_card_probe(struct nv_card_info *info);

/* Write the scratch register with test patterns and read each back; restores the old value. */
nv_status nv_card_check_scratch(void);

/* Set the node id (0 .. 2^NODE_ID_BITS-1), read it back, then mark it valid. */
nv_status nv_card_set_node_id(unsigned node_id);

/* 64-bit cycle counter of the card (consistent across the 32-bit carry). Always inline: the timed
 * loops read it, and a call would leave their group (NV_TIMED). */
static inline __attribute__((always_inline)) uint64_t nv_card_cycles(void)
{
    uint32_t lo = nv_reg_read(NV_CTRL_CYCLES_LO); /* latches the high word */
    uint32_t hi = nv_reg_read(NV_CTRL_CYCLES_HI);
    return (uint64_t)hi << 32 | lo;
}

/* Its low word alone: one register read, for intervals under 40 s (timeouts, per-call costs). */
static inline __attribute__((always_inline)) uint32_t nv_card_cycles32(void)
{
    return nv_reg_read(NV_CTRL_CYCLES_LO);
}

/* A poll loop's timeout. The clock is a card register, a bus read as slow as a poll, so a loop reads
 * it at its first miss (the start: a wait whose first poll succeeds pays nothing for its timeout)
 * and every NV_CLOCK_POLLS misses after, and comes round to its next poll sooner. Always inline:
 * the timed loops call it, and keep `misses` and `start` in registers. */
#define NV_CLOCK_POLLS 16u

/* After a missed poll, with `misses` the caller's running count of them (which it may keep anyway,
 * as its statistics): nonzero once more than `timeout_cycles` have passed since `*start`. The
 * first miss (`misses` 1) sets `*start`; a wait that expects to miss at first may set it before
 * its first poll and count on from where it is. */
static inline __attribute__((always_inline)) int nv_poll_timed_out(uint32_t misses, uint32_t *start,
                                                                   uint32_t timeout_cycles)
{
    if ((misses - 1) % NV_CLOCK_POLLS)
        return 0;
    uint32_t now = nv_card_cycles32();
    if (misses == 1)
        *start = now;
    return now - *start > timeout_cycles;
}

/* The same with its count kept for the caller; a new timer is all zeros. */
struct nv_poll_timer {
    uint32_t misses, start;
};

static inline __attribute__((always_inline)) int nv_poll_timer_missed(struct nv_poll_timer *t, uint32_t timeout_cycles)
{
    return nv_poll_timed_out(++t->misses, &t->start, timeout_cycles);
}

/* CRC-32 (zlib, reflected 0xEDB88320) of `len` bytes, continuing from `crc` (0 to start). */
uint32_t nv_crc32(uint32_t crc, const void *data, uint32_t len);

/* Write `image` into the control store, read every word back, check the CRC, then let the
 * sequencer serve remote traffic. When microcode is live already, an image whose words do not have
 * its CRC is refused first (NV_ERR_CRC), leaving the store and the running microcode as they are.
 * On NV_ERR_READBACK, `*bad_word` (if not NULL) is the first address that read back wrong. */
nv_status nv_ucode_load(const struct nv_ucode_image *image, uint32_t *bad_word);

/* Read the control store back and compare it with `image` word by word, then check the CRC of
 * what was read; writes nothing to the store and leaves the sequencer as it is (live or not).
 * On NV_ERR_READBACK, `*bad_word` (if not NULL) is the first address that differs. */
nv_status nv_ucode_verify(const struct nv_ucode_image *image, uint32_t *bad_word);

/* The sequencer's hard-wired fast path (plain misses, home reads and writes) on or off. Off, the
 * microcode alone runs every transaction: needed for a control store whose protocol differs from
 * the stock one. On after reset; nv_ucode_load keeps the setting. */
void nv_ucode_set_fast_path(bool on);
bool nv_ucode_fast_path(void);

/* The boot sequence every port runs: probe, scratch check, node id from the strap, microcode,
 * banner. `port` names the build ("bare-metal", "zephyr") in the banner. */
nv_status nv_boot(struct nv_card_info *info, const char *port, const char *fw_version,
                  const struct nv_ucode_image *ucode);

#endif
