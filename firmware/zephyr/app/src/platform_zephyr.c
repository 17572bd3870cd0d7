/* Zephyr port of the platform interface: the card's window comes from the devicetree. */
#include <stdarg.h>

#include <zephyr/cache.h>
#include <zephyr/devicetree.h>
#include <zephyr/sys/printk.h>
#include <zephyr/sys/sys_io.h>

#include "numavia/platform.h"

#define NUMAVIA_CARD DT_INST(0, numavia_card)
#define CARD_BASE DT_REG_ADDR(NUMAVIA_CARD)

uint32_t nv_reg_read(uint32_t offset)
{
    return sys_read32(CARD_BASE + offset);
}

void nv_reg_write(uint32_t offset, uint32_t value)
{
    sys_write32(value, CARD_BASE + offset);
}

void nv_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintk(fmt, ap);
    va_end(ap);
}

uint32_t nv_host_read32(uint32_t phys)
{
    return sys_read32(phys);
}

void nv_host_write32(uint32_t phys, uint32_t value)
{
    sys_write32(value, phys);
}

void nv_host_sync(void)
{
    sys_cache_data_invd_all();
}
