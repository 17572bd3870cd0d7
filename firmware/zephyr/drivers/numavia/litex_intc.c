/* The LiteX VexRiscv's interrupt controller, serving every line.
 *
 * LiteX gives the VexRiscv 32 interrupt lines behind two CSRs, a mask and the pending lines, on
 * the machine external interrupt. Zephyr's own driver (intc_vexriscv_litex.c, in v3.5.0 and in
 * later versions) calls the handlers of the LiteX peripherals it knows only (timer, UART,
 * Ethernet, I2S, GPIO): the card's interrupt would stay pending, unserved, and the CPU would take
 * it again forever. This driver replaces it (the application sets CONFIG_VEXRISCV_LITEX_IRQ=n)
 * and calls the handler of every enabled pending line, as IRQ_CONNECT connected it, lowest first. */
#include <stddef.h>
#include <stdint.h>

#include <zephyr/arch/cpu.h>
#include <zephyr/devicetree.h>
#include <zephyr/init.h>
#include <zephyr/irq.h>
#include <zephyr/sw_isr_table.h>

/* The controller's two CSRs (their numbers are its devicetree "registers"). */
#define INTC_NODE DT_NODELABEL(intc0)
#define IRQ_MASK_CSR DT_REG_ADDR_BY_NAME(INTC_NODE, irq_mask)
#define IRQ_PENDING_CSR DT_REG_ADDR_BY_NAME(INTC_NODE, irq_pending)

/* RISC-V privileged architecture: the machine external interrupt (mcause 11), its enable in mie,
 * and the global enable in mstatus. */
#define MACHINE_EXTERNAL_IRQ 11
#define MIE_MACHINE_EXTERNAL (1u << MACHINE_EXTERNAL_IRQ)
#define MSTATUS_MACHINE_IE (1u << 3)

static inline uint32_t irq_mask(void)
{
    uint32_t mask;
    __asm__ volatile("csrr %0, %1" : "=r"(mask) : "i"(IRQ_MASK_CSR));
    return mask;
}

static inline void set_irq_mask(uint32_t mask)
{
    __asm__ volatile("csrw %0, %1" ::"i"(IRQ_MASK_CSR), "r"(mask));
}

static inline uint32_t irq_pending(void)
{
    uint32_t pending;
    __asm__ volatile("csrr %0, %1" : "=r"(pending) : "i"(IRQ_PENDING_CSR));
    return pending;
}

static void litex_intc_dispatch(const void *unused)
{
    ARG_UNUSED(unused);
    uint32_t lines = irq_pending() & irq_mask();
    while (lines != 0) {
        unsigned int line = __builtin_ctz(lines);
        lines &= lines - 1;
        const struct _isr_table_entry *entry = &_sw_isr_table[line];
        entry->isr(entry->arg);
    }
}

void arch_irq_enable(unsigned int irq)
{
    set_irq_mask(irq_mask() | (1u << irq));
}

void arch_irq_disable(unsigned int irq)
{
    set_irq_mask(irq_mask() & ~(1u << irq));
}

int arch_irq_is_enabled(unsigned int irq)
{
    return (irq_mask() >> irq) & 1;
}

static int litex_intc_init(void)
{
    __asm__ volatile("csrs mie, %0" ::"r"(MIE_MACHINE_EXTERNAL));
    __asm__ volatile("csrs mstatus, %0" ::"r"(MSTATUS_MACHINE_IE));
    IRQ_CONNECT(MACHINE_EXTERNAL_IRQ, 0, litex_intc_dispatch, NULL, 0);
    return 0;
}

SYS_INIT(litex_intc_init, PRE_KERNEL_1, CONFIG_INTC_INIT_PRIORITY);
