/* The portable core's platform interface on Zephyr: the card's register window and the host
 * memory windows come from the devicetree (generated from csr.json), the console is printk. */
#include <stdarg.h>

#include <zephyr/cache.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/sys_io.h>

#include "numavia/platform.h"
#include "numavia_block.h"

uint32_t nv_reg_read(uint32_t offset)
{
    return sys_read32(NUMAVIA_CARD_WINDOW + offset);
}

void nv_reg_write(uint32_t offset, uint32_t value)
{
    sys_write32(value, NUMAVIA_CARD_WINDOW + offset);
}

void nv_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintk(fmt, ap);
    va_end(ap);
}

#if DT_REG_HAS_NAME(NUMAVIA_CARD_NODE, hostmem_uncached)
/* Host memory through its uncached window, as the bare-metal port does: a read sees what the
 * card's DMA wrote at the cost of one bus access, where the cached window would need the whole
 * data cache invalidated first. */
#define HOSTMEM_BASE DT_REG_ADDR_BY_NAME(NUMAVIA_CARD_NODE, hostmem)
#define HOSTMEM_UNCACHED_BASE DT_REG_ADDR_BY_NAME(NUMAVIA_CARD_NODE, hostmem_uncached)

static mm_reg_t host_word(uint32_t phys)
{
    return phys - HOSTMEM_BASE + HOSTMEM_UNCACHED_BASE;
}

void nv_host_sync(void)
{
}
#else
/* No uncached window: read host memory through the cache, invalidated before each batch of
 * reads (the data cache is write-through, so only reads can be stale). */
static mm_reg_t host_word(uint32_t phys)
{
    return phys;
}

void nv_host_sync(void)
{
    sys_cache_data_invd_all();
}
#endif

uint32_t nv_host_read32(uint32_t phys)
{
    return sys_read32(host_word(phys));
}

void nv_host_write32(uint32_t phys, uint32_t value)
{
    sys_write32(value, host_word(phys));
}
