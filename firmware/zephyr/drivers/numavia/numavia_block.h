/* What the drivers of the card's blocks share (private to the module). */
#ifndef NUMAVIA_BLOCK_H
#define NUMAVIA_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/arch/cpu.h>
#include <zephyr/sys/util.h>
#include <zephyr/toolchain.h>

#include "numavia/platform.h" /* the card's window (numavia/platform_zephyr.h) */
#include "numavia_regs.h"

BUILD_ASSERT(DT_NUM_INST_STATUS_OKAY(numavia_card) == 1, "the Numavia drivers support exactly one numavia,card node");
BUILD_ASSERT(DT_REG_SIZE_BY_NAME(NUMAVIA_CARD_NODE, registers) == NV_CARD_WINDOW_SIZE,
             "the devicetree's card window and numavia_regs.h disagree: regenerate both");

/* The card-control device: it booted the card, and every other block needs a booted card. */
#define NUMAVIA_CARD_CONTROL_DEVICE DEVICE_DT_GET_ONE(numavia_card_control)

/* Value of field NAME (NAME##_MASK, NAME##_SHIFT from numavia_regs.h) in a register value. */
#define NUMAVIA_FIELD(value, NAME) (((value)&NAME##_MASK) >> NAME##_SHIFT)

/* The config of every block's device. Counters live here, not in each driver, so that one routine
 * (block.c) serves the counters of any block. */
struct numavia_block_config {
    mm_reg_t base;                    /* the block's bus address */
    const char *const *counter_names; /* NULL when the block has no counters */
    uint16_t counters_offset;         /* byte offset of the first counter in the block */
    uint8_t counter_count;
};

/* The devicetree (generated from csr.json and the register map) and numavia_regs.h (generated
 * from the register map) must place a block at the same address; this catches a stale one. */
#define NUMAVIA_BLOCK_CHECK_ADDRESS(inst, nv_block_base)                                                               \
    BUILD_ASSERT(DT_INST_REG_ADDR(inst) == NUMAVIA_CARD_WINDOW + (nv_block_base),                                      \
                 "devicetree and numavia_regs.h disagree on a Numavia block's address: "                               \
                 "regenerate the overlay and the headers")

/* Defines `static const struct numavia_block_config name` for devicetree instance `inst`. */
#define NUMAVIA_BLOCK_CONFIG_DEFINE(inst, name)                                                                        \
    COND_CODE_1(DT_INST_NODE_HAS_PROP(inst, event_counters),                                                           \
                (static const char *const name##_counter_names[] = DT_INST_PROP(inst, event_counters);), ())           \
    static const struct numavia_block_config name = {                                                                  \
        .base = DT_INST_REG_ADDR(inst),                                                                                \
        .counter_names = COND_CODE_1(DT_INST_NODE_HAS_PROP(inst, event_counters), (name##_counter_names), (NULL)),     \
        .counters_offset = DT_INST_PROP_OR(inst, event_counters_offset, 0),                                            \
        .counter_count = DT_INST_PROP_LEN_OR(inst, event_counters, 0),                                                 \
    }

/* Init of a block that only needs the booted card. */
int numavia_block_init(const struct device *dev);

#endif /* NUMAVIA_BLOCK_H */
