/* Bare-metal port of the platform interface for the LiteX SoC (VexRiscv, LiteX UART, picolibc). */
#include <stdarg.h>
#include <stdio.h>

#include <generated/csr.h>
#include <generated/mem.h>

#include "numavia/platform.h"
#include "numavia/via.h"

uint32_t nv_reg_read(uint32_t offset)
{
    return *(volatile uint32_t *)(CARD_BASE + offset);
}

void nv_reg_write(uint32_t offset, uint32_t value)
{
    *(volatile uint32_t *)(CARD_BASE + offset) = value;
}

/* Host memory through its uncached window: a read sees what the card's DMA wrote, at the cost
 * of one bus access (the cached window would need a whole-cache invalidation first). */
static uintptr_t host_address(uint32_t phys)
{
    return phys - HOSTMEM_BASE + HOSTMEM_UNCACHED_BASE;
}

static volatile uint32_t *host_word(uint32_t phys)
{
    return (volatile uint32_t *)host_address(phys);
}

uint32_t nv_host_read32(uint32_t phys)
{
    return *host_word(phys);
}

void nv_host_write32(uint32_t phys, uint32_t value)
{
    *host_word(phys) = value;
}

/* Byte and halfword stores: the bus carries their byte selects, so the word around them is not
 * read. */
void nv_host_write8(uint32_t phys, uint8_t value)
{
    *(volatile uint8_t *)host_address(phys) = value;
}

void nv_host_write16(uint32_t phys, uint16_t value)
{
    *(volatile uint16_t *)host_address(phys) = value;
}

/* Nothing to do with the uncached window; kept for ports that read host memory through a cache
 * (the data cache is write-through, so only reads can be stale). */
void nv_host_sync(void)
{
}

/* Bare metal takes no interrupts: a wait for a completion queue polls the card's register. Out of
 * line, as the sleep it stands for: the timed code that calls it stays one piece of the image. */
__attribute__((noinline)) int nv_platform_wait_cq(unsigned cq, uint64_t deadline)
{
    return nv_via_cq_wait_polled(cq, deadline);
}

/* The linker script's free RAM between the image's data and the stack's reserve. */
extern char __heap_start[], __heap_end[];

void *nv_platform_scratch(size_t *bytes)
{
    *bytes = (size_t)(__heap_end - __heap_start);
    return __heap_start;
}

static int uart_putc(char c, FILE *file)
{
    (void)file;
    while (uart_txfull_read())
        ;
    uart_rxtx_write((unsigned char)c);
    return (unsigned char)c;
}

static FILE uart_stream = FDEV_SETUP_STREAM(uart_putc, NULL, NULL, _FDEV_SETUP_WRITE);
FILE *const stdout = &uart_stream;
FILE *const stderr = &uart_stream;

void nv_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
}

/* picolibc's crt0 calls exit() when main returns; there is nowhere to go. */
void _exit(int status)
{
    (void)status;
    for (;;)
        ;
}
