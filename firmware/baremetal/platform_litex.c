/* Bare-metal port of the platform interface for the LiteX SoC (VexRiscv, LiteX UART, picolibc). */
#include <stdarg.h>
#include <stdio.h>

#include <generated/csr.h>
#include <generated/mem.h>

#include "numavia/platform.h"

uint32_t nv_reg_read(uint32_t offset)
{
    return *(volatile uint32_t *)(CARD_BASE + offset);
}

void nv_reg_write(uint32_t offset, uint32_t value)
{
    *(volatile uint32_t *)(CARD_BASE + offset) = value;
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
