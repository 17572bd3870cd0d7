/* Stand-in for Zephyr's sys/printk.h (see ../../README.md). */
#ifndef STUB_ZEPHYR_SYS_PRINTK_H
#define STUB_ZEPHYR_SYS_PRINTK_H
#include <stdarg.h>
void printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vprintk(const char *fmt, va_list ap);
#endif
