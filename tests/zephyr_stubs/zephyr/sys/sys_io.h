/* Stand-in for Zephyr's sys/sys_io.h (see ../../README.md). */
#ifndef STUB_ZEPHYR_SYS_IO_H
#define STUB_ZEPHYR_SYS_IO_H
#include <stdint.h>
typedef uintptr_t mm_reg_t;
uint32_t sys_read32(mm_reg_t addr);
void sys_write32(uint32_t data, mm_reg_t addr);
#endif
