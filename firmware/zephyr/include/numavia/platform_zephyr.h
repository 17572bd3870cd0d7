/* The portable core's accessors of card registers and host memory on Zephyr, inline: the module
 * builds the core with NV_PLATFORM_INLINE naming this header (numavia/platform.h), so that they
 * inline into the benchmark agents' timed loops as they do in the bare-metal build (by link-time
 * optimisation, which Zephyr's build does not do). The windows come from the devicetree. */
#ifndef NUMAVIA_PLATFORM_ZEPHYR_H
#define NUMAVIA_PLATFORM_ZEPHYR_H

#include <stdint.h>

#include <zephyr/arch/cpu.h>
#include <zephyr/devicetree.h>

/* The portable core reaches the card through one register window (nv_reg_read() takes an offset
 * inside it), so a SoC has exactly one card. */
#define NUMAVIA_CARD_NODE DT_COMPAT_GET_ANY_STATUS_OKAY(numavia_card)
#define NUMAVIA_CARD_WINDOW DT_REG_ADDR_BY_NAME(NUMAVIA_CARD_NODE, registers)

/* Host memory through its uncached window, as the bare-metal port does: a read sees what the
 * card's DMA wrote at the cost of one bus access, where the cached window would need the whole
 * data cache invalidated first. Every node SoC has the window (soc/card_soc.py). */
#define NUMAVIA_HOSTMEM_BASE DT_REG_ADDR_BY_NAME(NUMAVIA_CARD_NODE, hostmem)
#define NUMAVIA_HOSTMEM_SIZE DT_REG_SIZE_BY_NAME(NUMAVIA_CARD_NODE, hostmem)
#define NUMAVIA_HOSTMEM_UNCACHED_BASE DT_REG_ADDR_BY_NAME(NUMAVIA_CARD_NODE, hostmem_uncached)

/* The CPU's address of host-memory byte `phys`. */
static inline mem_addr_t numavia_host_address(uint32_t phys)
{
    return phys - NUMAVIA_HOSTMEM_BASE + NUMAVIA_HOSTMEM_UNCACHED_BASE;
}

static inline uint32_t nv_reg_read(uint32_t offset)
{
    return sys_read32(NUMAVIA_CARD_WINDOW + offset);
}

static inline void nv_reg_write(uint32_t offset, uint32_t value)
{
    sys_write32(value, NUMAVIA_CARD_WINDOW + offset);
}

static inline uint32_t nv_host_read32(uint32_t phys)
{
    return sys_read32(numavia_host_address(phys));
}

static inline void nv_host_write32(uint32_t phys, uint32_t value)
{
    sys_write32(value, numavia_host_address(phys));
}

static inline void nv_host_write8(uint32_t phys, uint8_t value)
{
    sys_write8(value, numavia_host_address(phys));
}

static inline void nv_host_write16(uint32_t phys, uint16_t value)
{
    sys_write16(value, numavia_host_address(phys));
}

/* Nothing to do: host memory is read through its uncached window. */
static inline void nv_host_sync(void)
{
}

#endif /* NUMAVIA_PLATFORM_ZEPHYR_H */
