/* Stand-in for Zephyr's arch/cpu.h (see ../../README.md): the memory-mapped register accessors,
 * which Zephyr defines per architecture (arch/riscv/sys_io.h and arch/common/sys_io.h). */
#ifndef STUB_ZEPHYR_ARCH_CPU_H
#define STUB_ZEPHYR_ARCH_CPU_H
#include <stdint.h>
#include <zephyr/sys/sys_io.h>
uint32_t sys_read32(mem_addr_t addr);
void sys_write32(uint32_t data, mem_addr_t addr);
void sys_write8(uint8_t data, mem_addr_t addr);
void sys_write16(uint16_t data, mem_addr_t addr);
#endif
