/* Stand-in for Zephyr's sw_isr_table.h (see ../README.md): the table IRQ_CONNECT fills. */
#ifndef STUB_ZEPHYR_SW_ISR_TABLE_H
#define STUB_ZEPHYR_SW_ISR_TABLE_H
struct _isr_table_entry {
    const void *arg;
    void (*isr)(const void *);
};
extern struct _isr_table_entry _sw_isr_table[];
#endif
