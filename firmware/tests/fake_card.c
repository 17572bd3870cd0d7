#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fake_card.h"
#include "fake_via.h"
#include "numavia/platform.h"
#include "numavia/via.h"
#include "numavia_regs.h"

struct fake_card fake;

void fake_card_reset(unsigned strap)
{
    memset(&fake, 0, sizeof fake);
    fake.id = NV_CARD_ID;
    fake.version = NV_CTRL_VERSION_RESET;
    fake.strap = strap;
    fake.scratch = NV_CTRL_SCRATCH_RESET;
    fake.features = NV_CTRL_FEATURES_VIA_MASK;
    fake.store_depth = 1024;
    fake.lent_bytes = sizeof fake.lent;
}

static int via_offset(uint32_t offset)
{
    return (offset >= NV_VIA_BASE && offset < NV_VIA_BASE + NV_VIA_SIZE) ||
           (offset >= NV_DOORBELL_BASE && offset < NV_DOORBELL_BASE + NV_DOORBELL_VI_CAPACITY * NV_DOORBELL_VI_STRIDE);
}

uint32_t nv_reg_read(uint32_t offset)
{
    fake.reads++;
    if (via_offset(offset))
        return fake_via_read(offset);
    switch (offset) {
    case NV_CTRL_ID: return fake.id;
    case NV_CTRL_VERSION: return fake.version;
    case NV_CTRL_NODE_ID_STRAP: return fake.strap;
    case NV_CTRL_NODE_ID: return fake.node_id;
    case NV_CTRL_SCRATCH: return fake.scratch & ~fake.scratch_stuck_low;
    case NV_CTRL_CTRL: return fake.ctrl;
    case NV_CTRL_STATUS: return (fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK) ? NV_CTRL_STATUS_READY_MASK : 0;
    case NV_CTRL_CYCLES_LO: {
        /* Time passes as the firmware looks at it (1 us per read at 100 MHz), so its timeouts end. */
        uint32_t lo = (uint32_t)fake.cycles;
        fake.cycles_hi_latch = (uint32_t)(fake.cycles >> 32);
        fake.cycles += fake.cycles_per_read;
        fake.cycles_reads++;
        return lo;
    }
    case NV_CTRL_CYCLES_HI: return fake.cycles_hi_latch;
    case NV_CTRL_CLK_FREQ_HZ: return 100000000u;
    case NV_CTRL_MODE_STRAP: return fake.mode_strap;
    case NV_CTRL_FEATURES: return fake.features;
    case NV_RAC_UCODE_DEPTH: return fake.store_depth;
    case NV_RAC_UCODE_POS: return fake.ucode_addr;
    case NV_RAC_UCODE_RDATA_LO: return (uint32_t)(fake.store[fake.ucode_addr % 1024] & ~fake.store_stuck_bits);
    case NV_RAC_UCODE_RDATA_HI: return (uint32_t)((fake.store[fake.ucode_addr % 1024] & ~fake.store_stuck_bits) >> 32);
    case NV_RAC_CTRL: return fake.rac_ctrl;
    case NV_RAC_STATUS: return fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK ? NV_RAC_STATUS_LOADED_MASK : 0;
    }
    return 0xdeadbeefu;
}

void nv_reg_write(uint32_t offset, uint32_t value)
{
    fake.writes++;
    if (via_offset(offset)) {
        fake_via_write(offset, value);
        return;
    }
    switch (offset) {
    case NV_CTRL_SCRATCH: fake.scratch = value; break;
    case NV_CTRL_NODE_ID:
        if (!fake.node_id_ignores_writes)
            fake.node_id = value & NV_NODE_ID_MASK;
        break;
    case NV_CTRL_CTRL: fake.ctrl = value & 0xff; break;
    case NV_RAC_CTRL:
        fake.rac_ctrl = value & (fake.refuse_loaded ? NV_RAC_CTRL_MICROCODE_ONLY_MASK
                                                    : NV_RAC_CTRL_LOADED_MASK | NV_RAC_CTRL_MICROCODE_ONLY_MASK);
        break;
    case NV_RAC_UCODE_ADDR: fake.ucode_addr = value; break;
    case NV_RAC_UCODE_WDATA_LO: fake.wdata_lo = value; break;
    case NV_RAC_UCODE_WDATA_HI:
        if (!(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK) && fake.ucode_addr < fake.store_depth)
            fake.store[fake.ucode_addr++] = (uint64_t)value << 32 | fake.wdata_lo;
        break;
    }
}

void *nv_platform_scratch(size_t *bytes)
{
    *bytes = fake.lent_bytes;
    return fake.lent;
}

/* As bare metal: no interrupts, the card's CQ_NOTIFIED polled (time passes as the cycles are read). */
int nv_platform_wait_cq(unsigned cq, uint64_t deadline)
{
    return nv_via_cq_wait_polled(cq, deadline);
}

void nv_log(const char *fmt, ...)
{
    size_t used = strlen(fake.log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fake.log + used, sizeof fake.log - used, fmt, ap);
    va_end(ap);
}
