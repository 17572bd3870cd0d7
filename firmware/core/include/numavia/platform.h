/* The few services the portable core needs from its host: bare metal, Zephyr or a unit test.
 * The core never includes an OS header itself; each port implements these functions once (a port
 * may give the hot accessors inline, NV_PLATFORM_INLINE below). */
#ifndef NUMAVIA_PLATFORM_H
#define NUMAVIA_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef NV_PLATFORM_INLINE
/* The port defines the accessors of card registers and host memory below as static inline
 * functions in this header (Zephyr: its build has no link-time optimisation, which is how the
 * bare-metal build inlines them into the timed loops). */
#include NV_PLATFORM_INLINE
#else
/* Card register access. `offset` is a byte offset inside the card's register window
 * (the NV_* constants of numavia_regs.h); the port adds the window's bus address. */
uint32_t nv_reg_read(uint32_t offset);
void nv_reg_write(uint32_t offset, uint32_t value);

/* Host memory (where VIA descriptors, buffers and completion queues live), by physical address,
 * 32-bit aligned but for the byte and halfword stores. The card writes it by DMA behind the CPU's
 * caches: call nv_host_sync() before reading what the card may have written. */
uint32_t nv_host_read32(uint32_t phys);
void nv_host_write32(uint32_t phys, uint32_t value);
void nv_host_write8(uint32_t phys, uint8_t value);   /* one byte, its neighbours untouched (no read) */
void nv_host_write16(uint32_t phys, uint16_t value); /* two, 16-bit aligned, the same way */
void nv_host_sync(void);
#endif

/* Sleep until completion queue `cq`'s notification, armed by the caller (nv_via_cq_arm), has fired
 * and been acknowledged (nv_via_cq_take_notification), or until the card's cycle counter passes
 * `deadline`; nonzero when it fired. Bare metal polls the card's CQ_NOTIFIED; Zephyr sleeps on
 * the card's interrupt. */
int nv_platform_wait_cq(unsigned cq, uint64_t deadline);

/* RAM the port lends the core for as long as a call of the core runs (the benchmark agent's slots
 * of a stream over several VIs): its address, word aligned, and its size in `*bytes`; NULL and 0
 * if it has none. Bare metal lends what lies between its data and its stack. */
void *nv_platform_scratch(size_t *bytes);

/* Console output, printf-style. */
void nv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Code on a path the card's cycle counter times (the benchmark agents, push-pull messaging).
 * Each GROUP, one benchmark's loops with everything they call, goes into a section of its own,
 * .text.nv_timed.GROUP: one piece of the image per object file, so one piece in all in the
 * bare-metal image (a single link-time partition, firmware/baremetal/Makefile). A group that fits
 * the CPU's instruction cache then runs without conflict misses, and its figures move only when
 * timed code changes, not when an edit elsewhere shifts it against the cache. */
#define NV_TIMED(group) __attribute__((section(".text.nv_timed." #group)))
/* A group's entry, called from untimed code: out of line, or it would be inlined into its caller
 * and leave the group. */
#define NV_TIMED_ENTRY(group) NV_TIMED(group) __attribute__((noinline))

#endif
