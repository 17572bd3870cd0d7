/* Stand-in for Zephyr's sys/sys_io.h (see ../../README.md): the address types only; the accessors
 * (sys_read32, ...) come with the architecture, through <zephyr/arch/cpu.h>. */
#ifndef STUB_ZEPHYR_SYS_IO_H
#define STUB_ZEPHYR_SYS_IO_H
#include <stdint.h>
typedef uintptr_t mm_reg_t;
typedef uintptr_t mem_addr_t;
#endif
