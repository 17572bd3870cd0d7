/* VIA engine: runs the portable core's VIA protocol manager (numavia/via.h) in a thread.
 *
 * The engine moves data without the CPU; the manager serves the host's mailbox commands,
 * connection set-up with the peer's firmware, memory registration and timeouts, one round per
 * nv_via_poll(). Bare metal calls nv_via_poll() in its main loop; here a thread does, woken by the
 * card's interrupt (a mailbox command or a management frame is waiting) or, while a connection
 * request or a disconnect waits for its answer, when the manager's next retry or timeout falls due
 * (nv_via_next_timer). A mutex keeps the shell's snapshots (numavia_via_vi_info) from seeing a
 * half-done round.
 *
 * The same interrupt wakes threads that wait for a completion queue (numavia_via_cq_wait, the
 * port's nv_platform_wait_cq: the benchmark agent's WAKE_CQ, inside the manager's own round): the
 * handler takes every fired queue's notification and gives that queue's semaphore. So the
 * manager's work is masked on the card (IRQ_ENABLE) while it is pending, not by masking the CPU's
 * line, which would hold those notifications back too. */
#define DT_DRV_COMPAT numavia_via_engine

#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/irq.h>
#include <zephyr/kernel.h>

#include "numavia/core.h"
#include "numavia/drivers.h"
#include "numavia/platform.h"
#include "numavia/via.h"
#include "numavia/via_bench.h"
#include "numavia_block.h"

/* One card, so one engine: the thread's stack is static. */
BUILD_ASSERT(DT_NUM_INST_STATUS_OKAY(DT_DRV_COMPAT) == 1, "one numavia,via-engine per card");
BUILD_ASSERT(IS_ENABLED(CONFIG_NUMAVIA_LITEX_INTC),
             "the card's interrupt needs CONFIG_NUMAVIA_LITEX_INTC (so CONFIG_VEXRISCV_LITEX_IRQ=n): Zephyr's "
             "LiteX interrupt driver serves the lines of its own peripherals only");

#define VIA_IRQ DT_INST_IRQN(0)

struct via_engine_data {
    struct nv_via via; /* the manager's state: several KiB (ATT bookkeeping), so static */
    struct k_mutex lock;
    struct k_sem work;                     /* given by the interrupt */
    struct k_sem cq_fired[NV_VIA_MAX_CQS]; /* given when the queue's armed notification fired */
    struct k_thread thread;
};

K_KERNEL_STACK_DEFINE(via_engine_stack, CONFIG_NUMAVIA_VIA_THREAD_STACK_SIZE);

/* How long a thread may sleep to wake at card cycle `due` (the manager's next timer, a wait's deadline). */
static k_timeout_t until(const struct nv_via *via, uint64_t due)
{
    if (due == UINT64_MAX)
        return K_FOREVER;
    uint64_t now = nv_card_cycles();
    if (due <= now)
        return K_NO_WAIT;
    return K_USEC((due - now) / (via->clk_freq_hz / 1000000u) + 1);
}

/* The line is a level that only serving the work lowers. Completion-queue notifications are served
 * here (acknowledged, their waiters woken); the manager's work is masked on the card until the
 * thread has served a round (nv_via_irq_enable unmasks it). */
static void via_engine_isr(const void *device)
{
    const struct device *dev = device;
    struct via_engine_data *data = dev->data;
    uint32_t pending = nv_reg_read(NV_VIA_IRQ_PENDING);
    if (pending & NV_VIA_IRQ_PENDING_CQ_MASK) {
        uint32_t fired = nv_via_cq_take_notifications(UINT32_MAX);
        for (unsigned cq = 0; cq < MIN(data->via.cqs, NV_VIA_MAX_CQS); cq++)
            if (fired & (1u << cq))
                k_sem_give(&data->cq_fired[cq]);
    }
    if (pending & (NV_VIA_IRQ_PENDING_MBOX_MASK | NV_VIA_IRQ_PENDING_MGMT_RX_MASK)) {
        nv_reg_write(NV_VIA_IRQ_ENABLE, NV_VIA_IRQ_ENABLE_CQ_MASK);
        k_sem_give(&data->work);
    }
}

int numavia_via_cq_wait(const struct device *via, unsigned cq, uint64_t deadline)
{
    struct via_engine_data *data = via->data;
    if (!device_is_ready(via) || cq >= MIN(data->via.cqs, NV_VIA_MAX_CQS))
        return -EINVAL;
    return k_sem_take(&data->cq_fired[cq], until(&data->via, deadline)) == 0 ? 0 : -EAGAIN;
}

static void via_engine_serve(void *device, void *unused1, void *unused2)
{
    ARG_UNUSED(unused1);
    ARG_UNUSED(unused2);
    const struct device *dev = device;
    struct via_engine_data *data = dev->data;
    for (;;) {
        k_mutex_lock(&data->lock, K_FOREVER);
        nv_via_poll(&data->via);
        uint64_t due = nv_via_next_timer(&data->via);
        k_mutex_unlock(&data->lock);
        nv_via_irq_enable(&data->via);
        k_sem_take(&data->work, until(&data->via, due));
    }
}

static int via_engine_init(const struct device *dev)
{
    struct via_engine_data *data = dev->data;
    struct nv_card_info info;
    if (numavia_card_get_info(NUMAVIA_CARD_CONTROL_DEVICE, &info) != 0)
        return -ENODEV;
    if (!(info.features & NV_CTRL_FEATURES_VIA_MASK)) {
        nv_log("numavia: this card was built without the VIA engine\n");
        return -ENODEV;
    }
    nv_status status = nv_via_init(&data->via, info.node_id, info.clk_freq_hz);
    if (status == NV_OK)
        status = nv_bench_register(&data->via); /* the benchmark agent's BENCH command */
    if (status != NV_OK) {
        nv_log("numavia: VIA set-up failed: %s\n", nv_strerror(status));
        return -EIO;
    }
    k_mutex_init(&data->lock);
    k_sem_init(&data->work, 0, 1);
    for (unsigned cq = 0; cq < NV_VIA_MAX_CQS; cq++)
        k_sem_init(&data->cq_fired[cq], 0, 1);
    IRQ_CONNECT(VIA_IRQ, DT_INST_IRQ(0, priority), via_engine_isr, DEVICE_DT_INST_GET(0), 0);
    irq_enable(VIA_IRQ);
    nv_via_irq_enable(&data->via);
    k_tid_t tid =
        k_thread_create(&data->thread, via_engine_stack, K_KERNEL_STACK_SIZEOF(via_engine_stack), via_engine_serve,
                        (void *)dev, NULL, NULL, CONFIG_NUMAVIA_VIA_THREAD_PRIORITY, 0, K_NO_WAIT);
    k_thread_name_set(tid, "numavia_via");
    return 0;
}

unsigned numavia_via_vi_count(const struct device *via)
{
    /* A failed set-up leaves the manager's state half made: report no VIs rather than read it. */
    if (!device_is_ready(via))
        return 0;
    const struct via_engine_data *data = via->data;
    return MIN(data->via.vis, NV_VIA_MAX_VIS);
}

int numavia_via_vi_info(const struct device *via, unsigned vi, struct numavia_vi_info *info)
{
    struct via_engine_data *data = via->data;
    if (vi >= numavia_via_vi_count(via) || info == NULL)
        return -EINVAL;
    k_mutex_lock(&data->lock, K_FOREVER);
    const struct nv_via_vi *v = &data->via.vi[vi];
    info->open = v->used;
    info->connection = v->conn;
    info->ptag = v->ptag;
    info->peer_node = v->peer_node;
    info->peer_vi = v->peer_vi;
    uint32_t state = nv_reg_read(NV_VIA_VI_STATE_AT(vi));
    uint32_t queues = nv_reg_read(NV_VIA_VI_QUEUE_STATUS_AT(vi));
    k_mutex_unlock(&data->lock);
    info->hw_state = NUMAVIA_FIELD(state, NV_VIA_VI_STATE_STATE);
    info->hw_error = NUMAVIA_FIELD(state, NV_VIA_VI_STATE_ERROR);
    info->sq_posted = NUMAVIA_FIELD(queues, NV_VIA_VI_QUEUE_STATUS_SQ);
    info->rq_posted = NUMAVIA_FIELD(queues, NV_VIA_VI_QUEUE_STATUS_RQ);
    return 0;
}

const char *numavia_via_connection_name(uint8_t connection)
{
    switch ((enum nv_via_conn_state)connection) {
    case NV_CONN_NONE: return "none";
    case NV_CONN_REQUESTING: return "requesting";
    case NV_CONN_CONNECTED: return "connected";
    case NV_CONN_REJECTED: return "rejected";
    case NV_CONN_TIMED_OUT: return "timed-out";
    case NV_CONN_DISCONNECTING: return "disconnecting";
    }
    return "unknown";
}

#define VIA_ENGINE_DEFINE(inst)                                                                                        \
    NUMAVIA_BLOCK_CHECK_ADDRESS(inst, NV_VIA_BASE);                                                                    \
    NUMAVIA_BLOCK_CONFIG_DEFINE(inst, via_engine_config_##inst);                                                       \
    static struct via_engine_data via_engine_data_##inst;                                                              \
    DEVICE_DT_INST_DEFINE(inst, via_engine_init, NULL, &via_engine_data_##inst, &via_engine_config_##inst,             \
                          POST_KERNEL, CONFIG_NUMAVIA_VIA_INIT_PRIORITY, NULL);

DT_INST_FOREACH_STATUS_OKAY(VIA_ENGINE_DEFINE)
