/* VIA protocol manager: engine set-up, the mailbox, protection tags, completion queues, VIs. */
#include <stddef.h>
#include <string.h>

#include "numavia/platform.h"
#include "numavia/via.h"
#include "numavia_regs.h"
#include "numavia_via.h"
#include "via_internal.h"

/* These, and nv_via_host_range, are on push-pull's timed path through memory registration
 * (NV_TIMED). The value goes byte by byte through its two 32-bit halves: a 64-bit shift by a
 * variable count would call the C runtime (__ashldi3), outside the group. */
NV_TIMED(pushpull) void nv_put_field(uint32_t *words, unsigned offset, unsigned bytes, uint64_t value)
{
    uint32_t half[2] = {(uint32_t)value, (uint32_t)(value >> 32)};
    for (unsigned i = 0; i < bytes; i++) {
        unsigned at = offset + i;
        words[at / 4] &= ~(0xffu << (8 * (at % 4)));
        words[at / 4] |= ((half[i / 4] >> (8 * (i % 4))) & 0xff) << (8 * (at % 4));
    }
}

NV_TIMED(pushpull) uint64_t nv_get_field(const uint32_t *words, unsigned offset, unsigned bytes)
{
    uint32_t half[2] = {0, 0};
    for (unsigned i = 0; i < bytes; i++) {
        unsigned at = offset + i;
        half[i / 4] |= ((words[at / 4] >> (8 * (at % 4))) & 0xff) << (8 * (i % 4));
    }
    return (uint64_t)half[1] << 32 | half[0];
}

uint64_t nv_via_now_us(const struct nv_via *via)
{
    return nv_card_cycles() / (via->clk_freq_hz / 1000000u);
}

uint64_t nv_via_deadline(const struct nv_via *via, uint32_t us)
{
    return nv_card_cycles() + (uint64_t)us * (via->clk_freq_hz / 1000000u);
}

int nv_via_expired(uint64_t deadline)
{
    return nv_card_cycles() >= deadline;
}

unsigned nv_via_vi_state(unsigned vi)
{
    return (nv_reg_read(NV_VIA_VI_STATE_AT(vi)) & NV_VIA_VI_STATE_STATE_MASK) >> NV_VIA_VI_STATE_STATE_SHIFT;
}

/* Fail a VI and wait until the engine has flushed its queues, then return it to IDLE. */
uint32_t nv_via_reset_vi(struct nv_via *via, unsigned vi)
{
    nv_reg_write(NV_VIA_VI_CMD_AT(vi), NV_VIA_VI_CMD_FAIL_MASK);
    uint64_t deadline = nv_via_deadline(via, NV_VIA_FLUSH_TIMEOUT_US);
    while (nv_reg_read(NV_VIA_VI_QUEUE_STATUS_AT(vi)) != 0) {
        if (nv_via_expired(deadline)) {
            nv_log("via: VI %u: queues did not drain\n", vi);
            return NV_VIP_ERROR;
        }
    }
    nv_reg_write(NV_VIA_VI_CMD_AT(vi), NV_VIA_VI_CMD_RESET_MASK);
    via->generation++;
    return NV_VIP_SUCCESS;
}

static nv_status register_manager_commands(struct nv_via *via);

nv_status nv_via_init(struct nv_via *via, unsigned node_id, uint32_t clk_freq_hz)
{
    if (via == NULL || clk_freq_hz < 1000000u)
        return NV_ERR_ARG;
    memset(via, 0, sizeof *via);
    via->node_id = node_id;
    via->clk_freq_hz = clk_freq_hz;
    via->vis = nv_reg_read(NV_VIA_VI_COUNT);
    via->cqs = nv_reg_read(NV_VIA_CQ_COUNT);
    via->queue_depth = nv_reg_read(NV_VIA_QUEUE_DEPTH);
    via->max_segments = nv_reg_read(NV_VIA_MAX_SEGMENTS);
    via->att_regions = nv_reg_read(NV_VIA_ATT_REGIONS);
    via->att_pages = nv_reg_read(NV_VIA_ATT_PAGES);
    via->max_mtu = nv_reg_read(NV_VIA_MAX_MTU);
    via->host_base = nv_reg_read(NV_VIA_HOST_MEM_BASE);
    via->host_size = nv_reg_read(NV_VIA_HOST_MEM_SIZE);
    if (via->vis > NV_VIA_MAX_VIS) {
        nv_log("via: the card has %u VIs, this firmware was built for at most %u (NV_VIA_MAX_VIS)\n", via->vis,
               (unsigned)NV_VIA_MAX_VIS);
        return NV_ERR_RANGE;
    }
    if (via->vis == 0 || via->cqs > NV_VIA_MAX_CQS || via->att_regions > NV_VIA_MAX_REGIONS ||
        via->att_pages > NV_VIA_MAX_PAGES)
        return NV_ERR_RANGE;
    for (unsigned i = 0; i < via->att_regions; i++) { /* no stale regions from before a reset */
        nv_reg_write(NV_VIA_ATT_ADDR, i * NV_ATT_L1_STRIDE_WORDS + NV_ATT_L1_ATTRIBUTES_OFFSET / 4);
        nv_reg_write(NV_VIA_ATT_WDATA, 0); /* clears VALID (and the tag sharing its word) */
    }
    for (unsigned i = 0; i < via->cqs; i++) {
        nv_reg_write(NV_VIA_CQ_SIZE_AT(i), 0);
        nv_reg_write(NV_VIA_CQ_CTRL_AT(i), NV_VIA_CQ_CTRL_RESET_MASK);
    }
    for (unsigned i = 0; i < via->vis; i++)
        nv_reg_write(NV_VIA_VI_CMD_AT(i), NV_VIA_VI_CMD_RESET_MASK);
    via->mbox_seq = (nv_reg_read(NV_VIA_MBOX_CMD) & NV_VIA_MBOX_CMD_SEQ_MASK) >> NV_VIA_MBOX_CMD_SEQ_SHIFT;
    nv_status status = register_manager_commands(via);
    if (status != NV_OK)
        return status;
    nv_reg_write(NV_VIA_CTRL, NV_VIA_CTRL_ENABLE_MASK);
    nv_log("via: %u VIs, %u CQs, queues of %u, %u segments, MTU up to %u, ATT %u regions / %u pages\n", via->vis,
           via->cqs, via->queue_depth, via->max_segments, via->max_mtu, via->att_regions, via->att_pages);
    return NV_OK;
}

/* --- protection tags, completion queues, VIs ------------------------------------------------ */

static int ptag_valid(const struct nv_via *via, uint32_t ptag)
{
    return ptag >= 1 && ptag <= NV_VIA_MAX_PTAGS && (via->ptags & (1u << (ptag - 1)));
}

static uint32_t create_ptag(struct nv_via *via, uint32_t *ptag)
{
    for (unsigned i = 0; i < NV_VIA_MAX_PTAGS; i++) {
        if (!(via->ptags & (1u << i))) {
            via->ptags |= 1u << i;
            *ptag = i + 1;
            return NV_VIP_SUCCESS;
        }
    }
    return NV_VIP_ERROR_RESOURCE;
}

static uint32_t destroy_ptag(struct nv_via *via, uint32_t ptag)
{
    if (!ptag_valid(via, ptag))
        return NV_VIP_INVALID_PTAG;
    for (unsigned i = 0; i < via->vis; i++)
        if (via->vi[i].used && via->vi[i].ptag == ptag)
            return NV_VIP_INVALID_STATE;
    for (unsigned i = 0; i < via->att_regions; i++)
        if (via->regions[i].used && via->regions[i].ptag == ptag)
            return NV_VIP_INVALID_STATE;
    via->ptags &= ~(1u << (ptag - 1));
    return NV_VIP_SUCCESS;
}

NV_TIMED(pushpull) int nv_via_host_range(const struct nv_via *via, uint32_t addr, uint32_t length)
{
    return addr >= via->host_base && length <= via->host_size && addr - via->host_base <= via->host_size - length;
}

/* The area a VI's doorbells may name descriptors in (the engine refuses any other address): the
 * memory of whoever the VI was given to. The firmware's own agents take it over for theirs. */
static int desc_area_valid(const struct nv_via *via, uint32_t base, uint32_t size)
{
    return !(base & (NV_DESCRIPTOR_ALIGN - 1)) && size >= NV_DESC_CONTROL_SIZE && nv_via_host_range(via, base, size);
}

uint32_t nv_via_set_desc_area(const struct nv_via *via, unsigned vi, uint32_t base, uint32_t size)
{
    if (!desc_area_valid(via, base, size))
        return NV_VIP_INVALID_PARAMETER;
    nv_reg_write(NV_VIA_VI_DESC_SIZE_AT(vi), 0); /* never a mix of the old and the new area */
    nv_reg_write(NV_VIA_VI_DESC_BASE_AT(vi), base);
    nv_reg_write(NV_VIA_VI_DESC_SIZE_AT(vi), size);
    return NV_VIP_SUCCESS;
}

static uint32_t create_cq(struct nv_via *via, uint32_t base, uint32_t entries, uint32_t *cq)
{
    if (entries < 2 || entries > 65536 || (entries & (entries - 1)) || (base & 7) ||
        !nv_via_host_range(via, base, entries * NV_CQ_ENTRY_SIZE))
        return NV_VIP_INVALID_PARAMETER;
    for (unsigned i = 0; i < via->cqs; i++) {
        if (!(via->cqs_used & (1u << i))) {
            via->cqs_used |= 1u << i;
            nv_reg_write(NV_VIA_CQ_SIZE_AT(i), 0);
            nv_reg_write(NV_VIA_CQ_BASE_AT(i), base);
            nv_reg_write(NV_VIA_CQ_HEAD_AT(i), 0);
            nv_reg_write(NV_VIA_CQ_CTRL_AT(i), NV_VIA_CQ_CTRL_RESET_MASK);
            nv_reg_write(NV_VIA_CQ_SIZE_AT(i), entries);
            *cq = i;
            return NV_VIP_SUCCESS;
        }
    }
    return NV_VIP_ERROR_RESOURCE;
}

int nv_via_cq_valid(const struct nv_via *via, uint32_t cq)
{
    return cq < via->cqs && (via->cqs_used & (1u << cq));
}

static uint32_t destroy_cq(struct nv_via *via, uint32_t cq)
{
    if (!nv_via_cq_valid(via, cq))
        return NV_VIP_INVALID_PARAMETER;
    for (unsigned i = 0; i < via->vis; i++) {
        if (!via->vi[i].used)
            continue;
        uint32_t bind = nv_reg_read(NV_VIA_VI_CQ_BIND_AT(i));
        if (((bind & NV_VIA_VI_CQ_BIND_SEND_EN_MASK) &&
             ((bind & NV_VIA_VI_CQ_BIND_SEND_CQ_MASK) >> NV_VIA_VI_CQ_BIND_SEND_CQ_SHIFT) == cq) ||
            ((bind & NV_VIA_VI_CQ_BIND_RECV_EN_MASK) &&
             ((bind & NV_VIA_VI_CQ_BIND_RECV_CQ_MASK) >> NV_VIA_VI_CQ_BIND_RECV_CQ_SHIFT) == cq))
            return NV_VIP_INVALID_STATE;
    }
    nv_reg_write(NV_VIA_CQ_SIZE_AT(cq), 0);
    via->cqs_used &= ~(1u << cq);
    return NV_VIP_SUCCESS;
}

static uint32_t create_vi(struct nv_via *via, uint32_t ptag, uint32_t send_cq, uint32_t recv_cq, uint32_t desc_base,
                          uint32_t desc_size, uint32_t *vi)
{
    if (!ptag_valid(via, ptag))
        return NV_VIP_INVALID_PTAG;
    if ((send_cq != NV_MBOX_NONE && !nv_via_cq_valid(via, send_cq)) ||
        (recv_cq != NV_MBOX_NONE && !nv_via_cq_valid(via, recv_cq)) || !desc_area_valid(via, desc_base, desc_size))
        return NV_VIP_INVALID_PARAMETER;
    for (unsigned i = 0; i < via->vis; i++) {
        if (via->vi[i].used)
            continue;
        if (nv_via_vi_state(i) != NV_VI_STATE_IDLE || nv_reg_read(NV_VIA_VI_QUEUE_STATUS_AT(i)) != 0)
            continue; /* not clean yet (a disconnect still draining) */
        memset(&via->vi[i], 0, sizeof via->vi[i]);
        via->vi[i].used = 1;
        via->vi[i].ptag = (uint16_t)ptag;
        uint32_t bind = 0;
        if (send_cq != NV_MBOX_NONE)
            bind |= send_cq << NV_VIA_VI_CQ_BIND_SEND_CQ_SHIFT | NV_VIA_VI_CQ_BIND_SEND_EN_MASK;
        if (recv_cq != NV_MBOX_NONE)
            bind |= recv_cq << NV_VIA_VI_CQ_BIND_RECV_CQ_SHIFT | NV_VIA_VI_CQ_BIND_RECV_EN_MASK;
        nv_reg_write(NV_VIA_VI_PTAG_AT(i), ptag);
        nv_reg_write(NV_VIA_VI_CQ_BIND_AT(i), bind);
        nv_reg_write(NV_VIA_VI_PEER_AT(i), 0);
        nv_via_set_desc_area(via, i, desc_base, desc_size);
        *vi = i;
        return NV_VIP_SUCCESS;
    }
    return NV_VIP_ERROR_RESOURCE;
}

int nv_via_vi_valid(const struct nv_via *via, uint32_t vi)
{
    return vi < via->vis && via->vi[vi].used;
}

static uint32_t destroy_vi(struct nv_via *via, uint32_t vi)
{
    if (!nv_via_vi_valid(via, vi))
        return NV_VIP_INVALID_PARAMETER;
    if (via->vi[vi].conn != NV_CONN_NONE || nv_via_vi_state(vi) != NV_VI_STATE_IDLE ||
        nv_reg_read(NV_VIA_VI_QUEUE_STATUS_AT(vi)) != 0)
        return NV_VIP_INVALID_STATE;
    nv_reg_write(NV_VIA_VI_CQ_BIND_AT(vi), 0);
    nv_reg_write(NV_VIA_VI_DESC_SIZE_AT(vi), 0); /* a free VI posts nothing */
    via->vi[vi].used = 0;
    return NV_VIP_SUCCESS;
}

/* --- the mailbox ----------------------------------------------------------------------------- */

#define ARG(cmd, name) args[NV_MBOX_##cmd##_ARG_##name]
#define RES(cmd, name) args[NV_MBOX_##cmd##_RES_##name]

static uint32_t nop(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)via, (void)context, (void)code, (void)args;
    return NV_VIP_SUCCESS;
}

static uint32_t ptag_command(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)context;
    if (code == NV_MBOX_CREATE_PTAG)
        return create_ptag(via, &RES(CREATE_PTAG, PTAG));
    return destroy_ptag(via, ARG(DESTROY_PTAG, PTAG));
}

static uint32_t mem_command(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)context;
    if (code == NV_MBOX_DEREGISTER_MEM)
        return nv_via_deregister_mem(via, ARG(DEREGISTER_MEM, HANDLE));
    uint64_t va = (uint64_t)ARG(REGISTER_MEM, VA_HI) << 32 | ARG(REGISTER_MEM, VA_LO);
    return nv_via_register_mem(via, va, ARG(REGISTER_MEM, LENGTH), ARG(REGISTER_MEM, PTAG),
                               ARG(REGISTER_MEM, ATTRIBUTES), ARG(REGISTER_MEM, PAGE_LIST),
                               ARG(REGISTER_MEM, PAGE_COUNT), &RES(REGISTER_MEM, HANDLE));
}

static uint32_t cq_command(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)context;
    if (code == NV_MBOX_CREATE_CQ)
        return create_cq(via, ARG(CREATE_CQ, BASE), ARG(CREATE_CQ, ENTRIES), &RES(CREATE_CQ, CQ));
    return destroy_cq(via, ARG(DESTROY_CQ, CQ));
}

static uint32_t vi_command(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)context;
    if (code == NV_MBOX_CREATE_VI)
        return create_vi(via, ARG(CREATE_VI, PTAG), ARG(CREATE_VI, SEND_CQ), ARG(CREATE_VI, RECV_CQ),
                         ARG(CREATE_VI, DESC_BASE), ARG(CREATE_VI, DESC_SIZE), &RES(CREATE_VI, VI));
    return destroy_vi(via, ARG(DESTROY_VI, VI));
}

static uint32_t connection_command(struct nv_via *via, void *context, uint32_t code, uint32_t args[16])
{
    (void)context;
    return nv_via_connection_command(via, code, args);
}

/* The manager's own commands; agents add theirs with nv_via_register_command. */
static const struct {
    uint32_t code;
    nv_via_command_handler handler;
} manager_commands[] = {
    {NV_MBOX_NOP, nop},
    {NV_MBOX_CREATE_PTAG, ptag_command},
    {NV_MBOX_DESTROY_PTAG, ptag_command},
    {NV_MBOX_REGISTER_MEM, mem_command},
    {NV_MBOX_DEREGISTER_MEM, mem_command},
    {NV_MBOX_CREATE_CQ, cq_command},
    {NV_MBOX_DESTROY_CQ, cq_command},
    {NV_MBOX_CREATE_VI, vi_command},
    {NV_MBOX_DESTROY_VI, vi_command},
    {NV_MBOX_CONNECT_REQUEST, connection_command},
    {NV_MBOX_CONNECT_STATUS, connection_command},
    {NV_MBOX_CONNECT_WAIT, connection_command},
    {NV_MBOX_CONNECT_ACCEPT, connection_command},
    {NV_MBOX_CONNECT_REJECT, connection_command},
    {NV_MBOX_DISCONNECT, connection_command},
};

static const struct nv_via_command_entry *find_command(const struct nv_via *via, uint32_t code)
{
    for (unsigned i = 0; i < via->command_count; i++)
        if (via->commands[i].code == code)
            return &via->commands[i];
    return NULL;
}

nv_status nv_via_register_command(struct nv_via *via, uint32_t code, nv_via_command_handler handler, void *context)
{
    if (via == NULL || handler == NULL)
        return NV_ERR_ARG;
    if (find_command(via, code) != NULL)
        return NV_ERR_EXISTS;
    if (via->command_count == NV_VIA_MAX_COMMANDS)
        return NV_ERR_FULL;
    via->commands[via->command_count++] = (struct nv_via_command_entry){code, handler, context};
    return NV_OK;
}

static nv_status register_manager_commands(struct nv_via *via)
{
    for (unsigned i = 0; i < sizeof manager_commands / sizeof manager_commands[0]; i++) {
        nv_status status = nv_via_register_command(via, manager_commands[i].code, manager_commands[i].handler, NULL);
        if (status != NV_OK)
            return status;
    }
    return NV_OK;
}

uint32_t nv_via_command(struct nv_via *via, uint32_t code, uint32_t args[16])
{
    const struct nv_via_command_entry *entry = find_command(via, code);
    if (entry == NULL)
        return NV_VIP_INVALID_FUNCTION;
    return entry->handler(via, entry->context, code, args);
}

static void serve_mailbox(struct nv_via *via)
{
    if (via->irq)
        nv_reg_write(NV_VIA_IRQ_ACK, NV_VIA_IRQ_ACK_MBOX_MASK);
    uint32_t cmd = nv_reg_read(NV_VIA_MBOX_CMD);
    uint16_t seq = (uint16_t)((cmd & NV_VIA_MBOX_CMD_SEQ_MASK) >> NV_VIA_MBOX_CMD_SEQ_SHIFT);
    if (seq == via->mbox_seq)
        return;
    via->mbox_seq = seq;
    uint32_t args[16];
    for (unsigned i = 0; i < 16; i++)
        args[i] = nv_reg_read(NV_VIA_MBOX_DATA_WORD_AT(i));
    uint32_t code = (cmd & NV_VIA_MBOX_CMD_CODE_MASK) >> NV_VIA_MBOX_CMD_CODE_SHIFT;
    uint32_t result = nv_via_command(via, code, args);
    for (unsigned i = 0; i < 16; i++)
        nv_reg_write(NV_VIA_MBOX_DATA_WORD_AT(i), args[i]);
    nv_reg_write(NV_VIA_MBOX_STATUS,
                 (uint32_t)seq << NV_VIA_MBOX_STATUS_SEQ_SHIFT | (result & NV_VIA_MBOX_STATUS_RESULT_MASK));
}

void nv_via_poll(struct nv_via *via)
{
    serve_mailbox(via);
    uint32_t rx = nv_reg_read(NV_VIA_MGMT_RX_STATUS);
    if (rx & NV_VIA_MGMT_RX_STATUS_VALID_MASK) {
        uint32_t words[NV_MGMT_PAYLOAD_MAX / 4];
        unsigned length = (rx & NV_VIA_MGMT_RX_STATUS_LENGTH_MASK) >> NV_VIA_MGMT_RX_STATUS_LENGTH_SHIFT;
        /* The LENGTH field can say more than the data registers hold: never read past them
         * (found by the fuzzer; the receiver drops longer management frames, but the firmware
         * does not rely on that for its stack). */
        if (length > NV_MGMT_PAYLOAD_MAX)
            length = NV_MGMT_PAYLOAD_MAX;
        for (unsigned i = 0; i < (length + 3) / 4; i++)
            words[i] = nv_reg_read(NV_VIA_MGMT_RX_DATA_WORD_AT(i));
        nv_reg_write(NV_VIA_MGMT_RX_POP, 1);
        nv_via_handle_mgmt(via, (rx & NV_VIA_MGMT_RX_STATUS_SRC_NODE_MASK) >> NV_VIA_MGMT_RX_STATUS_SRC_NODE_SHIFT,
                           words, length);
    }
    nv_via_connection_timers(via);
}

void nv_via_irq_enable(struct nv_via *via)
{
    via->irq = 1;
    nv_reg_write(NV_VIA_IRQ_ENABLE,
                 NV_VIA_IRQ_ENABLE_MBOX_MASK | NV_VIA_IRQ_ENABLE_MGMT_RX_MASK | NV_VIA_IRQ_ENABLE_CQ_MASK);
}

uint32_t nv_via_cq_arm(const struct nv_via *via, uint32_t cq)
{
    if (!nv_via_cq_valid(via, cq))
        return NV_VIP_INVALID_PARAMETER;
    nv_reg_write(NV_VIA_CQ_CTRL_AT(cq), NV_VIA_CQ_CTRL_ARM_MASK);
    return NV_VIP_SUCCESS;
}

uint32_t nv_via_cq_take_notifications(uint32_t mask)
{
    uint32_t fired = nv_reg_read(NV_VIA_CQ_NOTIFIED) & mask;
    for (unsigned cq = 0; cq < NV_VIA_MAX_CQS; cq++)
        if (fired & (1u << cq))
            nv_reg_write(NV_VIA_CQ_CTRL_AT(cq), NV_VIA_CQ_CTRL_ACK_MASK);
    return fired;
}

int nv_via_cq_take_notification(unsigned cq)
{
    return nv_via_cq_take_notifications(1u << cq) != 0;
}

int nv_via_cq_wait_polled(unsigned cq, uint64_t deadline)
{
    while (!nv_via_cq_take_notification(cq))
        if (nv_card_cycles() >= deadline)
            return 0;
    return 1;
}
