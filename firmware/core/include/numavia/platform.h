/* The few services the portable core needs from its host: bare metal, Zephyr or a unit test.
 * The core never includes an OS header; each port implements these functions once. */
#ifndef NUMAVIA_PLATFORM_H
#define NUMAVIA_PLATFORM_H

#include <stdint.h>

/* Card register access. `offset` is a byte offset inside the card's register window
 * (the NV_* constants of numavia_regs.h); the port adds the window's bus address. */
uint32_t nv_reg_read(uint32_t offset);
void nv_reg_write(uint32_t offset, uint32_t value);

/* Console output, printf-style. */
void nv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Host memory (where VIA descriptors, buffers and completion queues live), by physical address,
 * 32-bit aligned. The card writes it by DMA behind the CPU's caches: call nv_host_sync() before
 * reading what the card may have written. */
uint32_t nv_host_read32(uint32_t phys);
void nv_host_write32(uint32_t phys, uint32_t value);
void nv_host_sync(void);

#endif
