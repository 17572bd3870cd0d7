/* Stand-in for Zephyr's kernel.h (see ../README.md). */
#ifndef STUB_ZEPHYR_KERNEL_H
#define STUB_ZEPHYR_KERNEL_H
#include <stddef.h>
#include <stdint.h>
#include <zephyr/sys/util.h>

typedef struct { int64_t ticks; } k_timeout_t;
#define K_FOREVER ((k_timeout_t){-1})
#define K_NO_WAIT ((k_timeout_t){0})
#define K_USEC(us) ((k_timeout_t){(us)})

struct k_mutex { int lock_count; };
int k_mutex_init(struct k_mutex *mutex);
int k_mutex_lock(struct k_mutex *mutex, k_timeout_t timeout);
int k_mutex_unlock(struct k_mutex *mutex);

struct k_sem { unsigned int count, limit; };
int k_sem_init(struct k_sem *sem, unsigned int initial_count, unsigned int limit);
void k_sem_give(struct k_sem *sem);
int k_sem_take(struct k_sem *sem, k_timeout_t timeout);

typedef struct { char data[8]; } k_thread_stack_t;
struct k_thread { int state; };
typedef struct k_thread *k_tid_t;
typedef void (*k_thread_entry_t)(void *p1, void *p2, void *p3);
#define K_KERNEL_STACK_DEFINE(sym, size) static k_thread_stack_t sym[((size) + 7) / 8]
#define K_KERNEL_STACK_SIZEOF(sym) sizeof(sym)
k_tid_t k_thread_create(struct k_thread *new_thread, k_thread_stack_t *stack, size_t stack_size,
                        k_thread_entry_t entry, void *p1, void *p2, void *p3, int prio,
                        uint32_t options, k_timeout_t delay);
int k_thread_name_set(k_tid_t thread, const char *name);
#endif
