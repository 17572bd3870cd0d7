#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_via.h"
#include "numavia/platform.h"
#include "numavia_regs.h"
#include "numavia_via.h"

struct fake_via fake_via;

void fake_via_reset(void)
{
    memset(&fake_via, 0, sizeof fake_via);
    fake_via.mtu = NV_VIA_MTU_RESET;
    fake_via.vi_count = FAKE_VIS;
}

void fake_via_inject(unsigned node, const uint32_t *words, unsigned length)
{
    struct fake_frame *f = &fake_via.inbox[fake_via.inbox_count++];
    f->node = node;
    f->length = length;
    unsigned bytes = (length + 3) / 4 * 4; /* the receive registers hold at most 16 words */
    memcpy(f->words, words, bytes < sizeof f->words ? bytes : sizeof f->words);
}

static int in_array(uint32_t offset, uint32_t base, uint32_t stride, unsigned count, unsigned *index, uint32_t *reg)
{
    if (offset < base || offset >= base + stride * count)
        return 0;
    *index = (offset - base) / stride;
    *reg = base + (offset - base) % stride; /* the register's element-0 address */
    return 1;
}

uint32_t fake_via_read(uint32_t offset)
{
    unsigned i;
    uint32_t reg;
    switch (offset) {
    case NV_VIA_VI_COUNT: return fake_via.vi_count;
    case NV_VIA_CQ_COUNT: return FAKE_CQS;
    case NV_VIA_QUEUE_DEPTH: return 16;
    case NV_VIA_MAX_SEGMENTS: return 8;
    case NV_VIA_MAX_MTU: return 9000;
    case NV_VIA_ATT_REGIONS: return FAKE_REGIONS;
    case NV_VIA_ATT_PAGES: return FAKE_PAGES;
    case NV_VIA_HOST_MEM_BASE: return FAKE_HOST_BASE;
    case NV_VIA_HOST_MEM_SIZE: return FAKE_HOST_SIZE;
    case NV_VIA_CTRL: return fake_via.ctrl;
    case NV_VIA_MTU: return fake_via.mtu;
    case NV_VIA_ATT_ADDR: return fake_via.att_addr;
    case NV_VIA_MBOX_CMD: fake_via.irq_mbox_acks_at_cmd_read = fake_via.irq_mbox_acks; return fake_via.mbox_cmd;
    case NV_VIA_MBOX_STATUS: return fake_via.mbox_status;
    case NV_VIA_IRQ_ENABLE: return fake_via.irq_enable;
    case NV_VIA_CQ_NOTIFIED: return fake_via.cq_notified;
    case NV_VIA_MGMT_TX_STATUS: return 0;
    case NV_VIA_MGMT_RX_STATUS: {
        if (fake_via.inbox_next == fake_via.inbox_count)
            return 0;
        const struct fake_frame *f = &fake_via.inbox[fake_via.inbox_next];
        return NV_VIA_MGMT_RX_STATUS_VALID_MASK | f->node << NV_VIA_MGMT_RX_STATUS_SRC_NODE_SHIFT |
               f->length << NV_VIA_MGMT_RX_STATUS_LENGTH_SHIFT;
    }
    }
    if (in_array(offset, NV_VIA_MBOX_DATA_BASE, 4, 16, &i, &reg))
        return fake_via.mbox_data[i];
    if (in_array(offset, NV_VIA_MGMT_TX_DATA_BASE, 4, 16, &i, &reg))
        return fake_via.mgmt_tx_data[i];
    if (in_array(offset, NV_VIA_MGMT_RX_DATA_BASE, 4, 16, &i, &reg))
        return fake_via.inbox_next < fake_via.inbox_count ? fake_via.inbox[fake_via.inbox_next].words[i] : 0;
    if (in_array(offset, NV_VIA_VI_BASE, NV_VIA_VI_STRIDE, fake_via.vi_count, &i, &reg)) {
        switch (reg) {
        case NV_VIA_VI_PEER: return fake_via.vi[i].peer;
        case NV_VIA_VI_PTAG: return fake_via.vi[i].ptag;
        case NV_VIA_VI_CQ_BIND: return fake_via.vi[i].cq_bind;
        case NV_VIA_VI_STATE: return fake_via.vi[i].state;
        case NV_VIA_VI_QUEUE_STATUS: return fake_via.vi[i].queued;
        case NV_VIA_VI_RX_PSN: return fake_via.vi[i].rx_psn;
        case NV_VIA_VI_DESC_BASE: return fake_via.vi[i].desc_base;
        case NV_VIA_VI_DESC_SIZE: return fake_via.vi[i].desc_size;
        }
    }
    if (in_array(offset, NV_VIA_CQ_BASE, NV_VIA_CQ_STRIDE, FAKE_CQS, &i, &reg)) {
        switch (reg) {
        case NV_VIA_CQ_BASE: return fake_via.cq[i].base;
        case NV_VIA_CQ_SIZE: return fake_via.cq[i].size;
        case NV_VIA_CQ_HEAD: return fake_via.cq[i].head;
        case NV_VIA_CQ_TAIL: return fake_via.cq[i].tail;
        }
    }
    fprintf(stderr, "fake_via: read of unmodelled offset 0x%x\n", offset);
    abort();
}

void fake_via_write(uint32_t offset, uint32_t value)
{
    unsigned i;
    uint32_t reg;
    switch (offset) {
    case NV_VIA_CTRL: fake_via.ctrl = value; return;
    case NV_VIA_MTU: fake_via.mtu = value; return;
    case NV_VIA_ATT_ADDR: fake_via.att_addr = value; return;
    case NV_VIA_ATT_WDATA:
        if (fake_via.att_addr < sizeof fake_via.att / sizeof fake_via.att[0]) {
            fake_via.att[fake_via.att_addr] = value;
            fake_via.att_last_write[fake_via.att_addr] = ++fake_via.att_writes;
        }
        fake_via.att_addr++;
        return;
    case NV_VIA_FORGET_COPIES: fake_via.forgets++; return;
    case NV_VIA_MBOX_CMD: fake_via.mbox_cmd = value; return;
    case NV_VIA_MBOX_STATUS: fake_via.mbox_status = value; return;
    case NV_VIA_IRQ_ENABLE: fake_via.irq_enable = value; return;
    case NV_VIA_IRQ_ACK: fake_via.irq_mbox_acks += !!(value & NV_VIA_IRQ_ACK_MBOX_MASK); return;
    case NV_VIA_MGMT_TX_CTRL: {
        struct fake_frame *f = &fake_via.sent[fake_via.sent_count++ % FAKE_MAX_FRAMES];
        f->node = (value & NV_VIA_MGMT_TX_CTRL_DST_NODE_MASK) >> NV_VIA_MGMT_TX_CTRL_DST_NODE_SHIFT;
        f->length = (value & NV_VIA_MGMT_TX_CTRL_LENGTH_MASK) >> NV_VIA_MGMT_TX_CTRL_LENGTH_SHIFT;
        memcpy(f->words, fake_via.mgmt_tx_data, sizeof f->words);
        return;
    }
    case NV_VIA_MGMT_RX_POP:
        if (fake_via.inbox_next < fake_via.inbox_count)
            fake_via.inbox_next++;
        return;
    }
    if (in_array(offset, NV_VIA_MBOX_DATA_BASE, 4, 16, &i, &reg)) {
        fake_via.mbox_data[i] = value;
        return;
    }
    if (in_array(offset, NV_VIA_MGMT_TX_DATA_BASE, 4, 16, &i, &reg)) {
        fake_via.mgmt_tx_data[i] = value;
        return;
    }
    if (in_array(offset, NV_VIA_VI_BASE, NV_VIA_VI_STRIDE, fake_via.vi_count, &i, &reg)) {
        switch (reg) {
        case NV_VIA_VI_PEER: fake_via.vi[i].peer = value; return;
        case NV_VIA_VI_PTAG: fake_via.vi[i].ptag = value; return;
        case NV_VIA_VI_CQ_BIND: fake_via.vi[i].cq_bind = value; return;
        case NV_VIA_VI_DESC_BASE: fake_via.vi[i].desc_base = value; return;
        case NV_VIA_VI_DESC_SIZE: fake_via.vi[i].desc_size = value; return;
        case NV_VIA_VI_CMD: /* like the engine: a failed VI flushes its queues at once */
            if (value & NV_VIA_VI_CMD_CONNECT_MASK) {
                fake_via.vi[i].state = NV_VI_STATE_CONNECTED;
                fake_via.vi[i].connects++;
            } else if (value & NV_VIA_VI_CMD_FAIL_MASK) {
                fake_via.vi[i].state = NV_VI_STATE_ERROR;
                fake_via.vi[i].queued = 0;
                fake_via.vi[i].fails++;
            } else if (value & NV_VIA_VI_CMD_RESET_MASK) {
                fake_via.vi[i].state = NV_VI_STATE_IDLE;
                fake_via.vi[i].resets++;
            }
            return;
        }
    }
    /* Doorbells: only in each VI's own page, as the card decodes them. */
    if (in_array(offset, NV_DOORBELL_VI_BASE, NV_DOORBELL_VI_STRIDE, fake_via.vi_count, &i, &reg) &&
        (reg == NV_DOORBELL_VI_SQ_DOORBELL || reg == NV_DOORBELL_VI_SQ_REPOST || reg == NV_DOORBELL_VI_RQ_DOORBELL)) {
        /* The card's rule: the control segment inside the VI's descriptor area. */
        if (value < fake_via.vi[i].desc_base || value - fake_via.vi[i].desc_base > fake_via.vi[i].desc_size ||
            fake_via.vi[i].desc_size - (value - fake_via.vi[i].desc_base) < NV_DESC_CONTROL_SIZE) {
            fake_via.vi[i].refused_doorbells++;
            return;
        }
        int send = reg != NV_DOORBELL_VI_RQ_DOORBELL;
        if (send)
            fake_via.vi[i].sq_doorbells++;
        else
            fake_via.vi[i].rq_doorbells++;
        fake_via.vi[i].sq_reposts += reg == NV_DOORBELL_VI_SQ_REPOST;
        fake_via.vi[i].last_doorbell = value;
        if (fake_via.doorbell_hook)
            fake_via.doorbell_hook(i, send, value);
        return;
    }
    if (in_array(offset, NV_VIA_CQ_BASE, NV_VIA_CQ_STRIDE, FAKE_CQS, &i, &reg)) {
        switch (reg) {
        case NV_VIA_CQ_BASE: fake_via.cq[i].base = value; return;
        case NV_VIA_CQ_SIZE: fake_via.cq[i].size = value; return;
        case NV_VIA_CQ_HEAD: fake_via.cq[i].head = value; return;
        case NV_VIA_CQ_CTRL:
            fake_via.cq[i].resets += !!(value & NV_VIA_CQ_CTRL_RESET_MASK);
            fake_via.cq[i].arms += !!(value & NV_VIA_CQ_CTRL_ARM_MASK);
            if (value & NV_VIA_CQ_CTRL_ACK_MASK) {
                fake_via.cq[i].acks++;
                fake_via.cq_notified &= ~(1u << i);
            }
            return;
        }
    }
    fprintf(stderr, "fake_via: write of unmodelled offset 0x%x\n", offset);
    abort();
}

static uint8_t *host(uint32_t phys)
{
    if (phys < FAKE_HOST_BASE || phys - FAKE_HOST_BASE > FAKE_HOST_SIZE - 4 || (phys & 3)) {
        fprintf(stderr, "fake_via: host access outside host memory at 0x%08x\n", phys);
        abort();
    }
    return &fake_via.host[phys - FAKE_HOST_BASE];
}

void fake_host_put32(uint32_t phys, uint32_t value)
{
    memcpy(host(phys), &value, 4);
}

uint32_t nv_host_read32(uint32_t phys)
{
    uint32_t v;
    if (++fake_via.host_reads == fake_via.host_later.at_read)
        fake_host_put32(fake_via.host_later.at, fake_via.host_later.value);
    memcpy(&v, host(phys), 4);
    return v;
}

void nv_host_write32(uint32_t phys, uint32_t value)
{
    fake_via.host_writes++;
    memcpy(host(phys), &value, 4);
}

void nv_host_write8(uint32_t phys, uint8_t value)
{
    fake_via.host_writes++;
    host(phys & ~3u)[phys & 3u] = value; /* host() checks the word's bounds */
}

void nv_host_write16(uint32_t phys, uint16_t value)
{
    if (phys & 1u) {
        fprintf(stderr, "fake_via: halfword store at the odd address 0x%08x\n", phys);
        abort();
    }
    fake_via.host_writes++;
    memcpy(host(phys & ~3u) + (phys & 3u), &value, 2);
}

void nv_host_sync(void)
{
    fake_via.host_syncs++;
}
