/* Stand-in for Zephyr's init.h (see ../README.md): SYS_INIT takes an init function of Zephyr's
 * type, a level and a priority. */
#ifndef STUB_ZEPHYR_INIT_H
#define STUB_ZEPHYR_INIT_H
enum stub_init_level { PRE_KERNEL_1, PRE_KERNEL_2, POST_KERNEL, APPLICATION };
#define SYS_INIT(init_fn, level, prio)                                                            \
    static int (*const stub_sys_init_##init_fn)(void) __attribute__((used)) = init_fn;           \
    enum { stub_sys_init_level_##init_fn = level, stub_sys_init_prio_##init_fn = prio }
#endif
