/* The portable core's platform interface on Zephyr: the accessors of card registers and host
 * memory are inline (numavia/platform_zephyr.h); here are the console, through printk, the wait
 * for a completion queue (the VIA driver's, on the card's interrupt), and host memory as words
 * for the shell. */
#include <stdarg.h>
#include <stddef.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/sys/printk.h>

#include "numavia/drivers.h"
#include "numavia/platform.h"

void nv_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintk(fmt, ap);
    va_end(ap);
}

/* Zephyr's RAM is the application's to give: none is lent, so the benchmark agent streams on one
 * VI at a time (a stream over several is refused). */
void *nv_platform_scratch(size_t *bytes)
{
    *bytes = 0;
    return NULL;
}

int nv_platform_wait_cq(unsigned cq, uint64_t deadline)
{
#ifdef CONFIG_NUMAVIA_VIA
    return numavia_via_cq_wait(DEVICE_DT_GET_ONE(numavia_via_engine), cq, deadline) == 0;
#else
    ARG_UNUSED(cq);
    ARG_UNUSED(deadline);
    return 0; /* no VIA engine, no queue to wait for */
#endif
}

const uint64_t *numavia_host_words(uint32_t phys, uint32_t count)
{
    uint32_t offset = phys - NUMAVIA_HOSTMEM_BASE;
    if (phys % 8 || phys < NUMAVIA_HOSTMEM_BASE || offset > NUMAVIA_HOSTMEM_SIZE ||
        count > (NUMAVIA_HOSTMEM_SIZE - offset) / 8)
        return NULL;
    return (const uint64_t *)numavia_host_address(phys);
}
