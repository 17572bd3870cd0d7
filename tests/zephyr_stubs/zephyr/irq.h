/* Stand-in for Zephyr's irq.h (see ../README.md). IRQ_CONNECT takes constants (the IRQ line and
 * priority, here numbers from the devicetree stand-in) and an ISR of Zephyr's type. */
#ifndef STUB_ZEPHYR_IRQ_H
#define STUB_ZEPHYR_IRQ_H
typedef void (*stub_isr_t)(const void *parameter);
#define IRQ_CONNECT(irq_p, priority_p, isr_p, isr_param_p, flags_p)                               \
    do {                                                                                          \
        _Static_assert((irq_p) >= 0 && (priority_p) >= 0, "IRQ line and priority are constants"); \
        stub_isr_t stub_isr = (isr_p);                                                            \
        stub_isr(isr_param_p);                                                                    \
        (void)(flags_p);                                                                          \
    } while (0)
void irq_enable(unsigned int irq);
void irq_disable(unsigned int irq);
#endif
