/* Stand-in for Zephyr's toolchain.h (see ../README.md). */
#ifndef STUB_ZEPHYR_TOOLCHAIN_H
#define STUB_ZEPHYR_TOOLCHAIN_H
#define BUILD_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
