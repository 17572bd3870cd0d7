/* Stand-in for Zephyr's cache.h (see ../README.md). */
#ifndef STUB_ZEPHYR_CACHE_H
#define STUB_ZEPHYR_CACHE_H
int sys_cache_data_invd_all(void);
#endif
