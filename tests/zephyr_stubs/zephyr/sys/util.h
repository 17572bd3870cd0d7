/* Stand-in for Zephyr's sys/util.h (see ../../README.md). */
#ifndef STUB_ZEPHYR_SYS_UTIL_H
#define STUB_ZEPHYR_SYS_UTIL_H
#define ARG_UNUSED(x) (void)(x)
#define MIN(a, b) (((a) < (b)) ? (a) : (b))
#define ARRAY_SIZE(array) (sizeof(array) / sizeof((array)[0]))
/* Zephyr's IS_ENABLED: 1 for a macro defined as 1, else 0 (for the CONFIG_ symbols of autoconf.h). */
#define IS_ENABLED(config) STUB_IS_ENABLED_(STUB_CAT(STUB_ONE_, config))
#define STUB_ONE_1 0,
#define STUB_IS_ENABLED_(arg) STUB_IS_ENABLED__(arg 1, 0)
#define STUB_IS_ENABLED__(ignored, value, ...) value
#define STUB_CAT(a, b) STUB_CAT_(a, b)
#define STUB_CAT_(a, b) a##b
#define STUB_EXPAND(...) __VA_ARGS__
/* Zephyr's COND_CODE_1: `flag` is 1 or 0 after expansion; the branches come in parentheses. */
#define COND_CODE_1(flag, if_1, if_0) STUB_CAT(STUB_COND_, flag)(if_1, if_0)
#define STUB_COND_1(if_1, if_0) STUB_EXPAND if_1
#define STUB_COND_0(if_1, if_0) STUB_EXPAND if_0
#endif
