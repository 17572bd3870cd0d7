/* Public API of the Numavia card's Zephyr drivers.
 *
 * One card per SoC: the portable core addresses the card through a single register window, so
 * each block has at most one device, found with DEVICE_DT_GET_ONE(<compatible>). The functions
 * below take that device; the ones named after a block only accept that block's device. */
#ifndef NUMAVIA_DRIVERS_H
#define NUMAVIA_DRIVERS_H

#include <stdbool.h>
#include <stdint.h>

#include <zephyr/device.h>

#include "numavia/core.h"

/* --- card control (numavia,card-control) ------------------------------------------------------ */

/* Result of the boot sequence the driver ran at init (NV_OK when the device is ready). Valid
 * even when the device is not ready: it says why. */
nv_status numavia_card_boot_status(const struct device *card);

/* What the boot read from the card: identity, version, node id, clock. -ENODEV if boot failed. */
int numavia_card_get_info(const struct device *card, struct nv_card_info *info);

/* The card's 64-bit cycle counter. */
uint64_t numavia_card_cycles(const struct device *card);

/* NUMA mode (network cache bypassed) is on. */
bool numavia_card_numa_mode(const struct device *card);

/* The network cache takes a remote line at its first read miss (the allocation filter is off);
 * false: at its second, and not while its copies die unused (the default). */
bool numavia_card_cache_first_miss(const struct device *card);

/* --- remote access controller (numavia,remote-access-controller) ------------------------------- */

struct numavia_rac_status {
    bool loaded;           /* the sequencer serves remote traffic */
    bool write_refused;    /* a write to the live control store was ignored (sticky) */
    uint8_t busy_contexts; /* transaction-buffer entries in use */
    uint32_t depth;        /* words in the control store */
};

int numavia_rac_get_status(const struct device *rac, struct numavia_rac_status *status);

/* The sequencer's hard-wired fast path on or off (CONFIG_NUMAVIA_RAC_FAST_PATH sets it at boot);
 * off, the microcode alone runs every transaction. */
void numavia_rac_set_fast_path(const struct device *rac, bool on);

/* The microcode image built into this firmware (generated from gateware/microcode). */
const struct nv_ucode_image *numavia_ucode_image(void);

/* Reload the built-in image: takes the sequencer offline, writes, verifies, puts it back live.
 * Remote traffic is refused (NOT_READY) meanwhile. On NV_ERR_READBACK `*bad_word` is the first
 * bad address. */
nv_status numavia_ucode_load(const struct device *rac, uint32_t *bad_word);

/* Compare the control store with the built-in image without writing it. */
nv_status numavia_ucode_verify(const struct device *rac, uint32_t *bad_word);

/* Load another image (e.g. one the host staged in host memory, numavia_host_image()) the same way.
 * An image whose words do not have its CRC is refused (NV_ERR_CRC) before the store is touched:
 * the microcode that runs stays live. */
nv_status numavia_ucode_load_image(const struct device *rac, const struct nv_ucode_image *image, uint32_t *bad_word);

/* `count` 64-bit words at physical address `phys` of host memory, through the CPU's window on it:
 * NULL unless the whole range is host memory and `phys` is 8-byte aligned. */
const uint64_t *numavia_host_words(uint32_t phys, uint32_t count);

/* Set NUMA mode (network cache bypassed) on or off. Meant for a ring whose shared memory is not
 * in use: lines the network cache holds are not written back or dropped by the switch. */
void numavia_card_set_numa_mode(const struct device *card, bool numa);

/* Cache a remote line at its first read miss (true) or let the allocation filter decide (false). */
void numavia_card_set_cache_first_miss(const struct device *card, bool first);

/* --- VIA engine (numavia,via-engine) ------------------------------------------------------------ */

struct numavia_vi_info {
    bool open;          /* the host created this VI */
    uint8_t connection; /* enum nv_via_conn_state (numavia/via.h) */
    uint8_t hw_state;   /* the engine's VI state: NV_VI_STATE_IDLE, _CONNECTED or _ERROR */
    uint16_t hw_error;  /* status error bits that put the VI in ERROR */
    uint16_t ptag;      /* protection tag */
    uint8_t peer_node, peer_vi;
    uint16_t sq_posted, rq_posted; /* descriptors posted and not completed yet */
};

/* VIs the engine has (0 when its set-up failed). */
unsigned numavia_via_vi_count(const struct device *via);

/* A consistent snapshot of VI `vi` (taken between two rounds of the protocol manager); -EINVAL
 * for a VI the engine does not have. */
int numavia_via_vi_info(const struct device *via, unsigned vi, struct numavia_vi_info *info);

/* Sleep until completion queue `cq`'s notification fires (armed by the caller: nv_via_cq_arm,
 * numavia/via.h), woken by the card's interrupt, or until the card's cycle counter
 * (numavia_card_cycles) passes `deadline`. 0 when it fired, -EAGAIN at the deadline, -EINVAL for
 * a queue the engine does not have or an engine that is not set up. */
int numavia_via_cq_wait(const struct device *via, unsigned cq, uint64_t deadline);

/* Human-readable name of an enum nv_via_conn_state value; never NULL. */
const char *numavia_via_connection_name(uint8_t connection);

/* --- VIA doorbell pages (numavia,via-doorbells) ------------------------------------------------- */

/* Bus address of VI `vi`'s doorbell page (NV_DOORBELL_VI_STRIDE bytes): the one region to map
 * into the memory domain of the thread that owns the VI. -EINVAL for a VI the engine does not have. */
int numavia_via_doorbell_page(const struct device *doorbells, unsigned vi, uintptr_t *page);

/* --- event counters (any block with `event-counters` in its devicetree node) -------------------- */

/* Counters of the block (0 for a block without counters). */
unsigned numavia_counter_count(const struct device *block);

/* Name of counter `index` as the register map spells it (lower case), or NULL if out of range. */
const char *numavia_counter_name(const struct device *block, unsigned index);

/* Read counter `index` (32 bits, wraps). -EINVAL if out of range. */
int numavia_counter_read(const struct device *block, unsigned index, uint32_t *value);

#endif /* NUMAVIA_DRIVERS_H */
