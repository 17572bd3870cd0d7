/* Card control block: boots the card with the portable core's sequence, as bare metal does. */
#define DT_DRV_COMPAT numavia_card_control

#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>

#include "numavia/core.h"
#include "numavia/drivers.h"
#include "numavia/platform.h"
#include "numavia_block.h"

BUILD_ASSERT(DT_NUM_INST_STATUS_OKAY(DT_DRV_COMPAT) == 1, "one numavia,card-control per card");

struct card_control_data {
    struct nv_card_info info;
    nv_status boot_status;
};

static int card_control_init(const struct device *dev)
{
    struct card_control_data *data = dev->data;
    /* nv_boot prints the banner and each step; the application prints the ready marker (or
     * the failure) once every driver has run, as the bare-metal main does. */
    data->boot_status = nv_boot(&data->info, "zephyr", CONFIG_NUMAVIA_FW_VERSION, numavia_ucode_image());
    return data->boot_status == NV_OK ? 0 : -EIO;
}

nv_status numavia_card_boot_status(const struct device *card)
{
    const struct card_control_data *data = card->data;
    return data->boot_status;
}

int numavia_card_get_info(const struct device *card, struct nv_card_info *info)
{
    const struct card_control_data *data = card->data;
    if (data->boot_status != NV_OK)
        return -ENODEV;
    *info = data->info;
    return 0;
}

uint64_t numavia_card_cycles(const struct device *card)
{
    ARG_UNUSED(card);
    return nv_card_cycles();
}

static bool ctrl_flag(uint32_t mask)
{
    return (nv_reg_read(NV_CTRL_CTRL) & mask) != 0;
}

static void set_ctrl_flag(uint32_t mask, bool on)
{
    uint32_t ctrl = nv_reg_read(NV_CTRL_CTRL) & ~mask;
    nv_reg_write(NV_CTRL_CTRL, ctrl | (on ? mask : 0));
}

bool numavia_card_numa_mode(const struct device *card)
{
    ARG_UNUSED(card);
    return ctrl_flag(NV_CTRL_CTRL_NUMA_MODE_MASK);
}

void numavia_card_set_numa_mode(const struct device *card, bool numa)
{
    ARG_UNUSED(card);
    set_ctrl_flag(NV_CTRL_CTRL_NUMA_MODE_MASK, numa);
}

bool numavia_card_cache_first_miss(const struct device *card)
{
    ARG_UNUSED(card);
    return ctrl_flag(NV_CTRL_CTRL_CACHE_FIRST_MISS_MASK);
}

void numavia_card_set_cache_first_miss(const struct device *card, bool first)
{
    ARG_UNUSED(card);
    set_ctrl_flag(NV_CTRL_CTRL_CACHE_FIRST_MISS_MASK, first);
}

#define CARD_CONTROL_DEFINE(inst)                                                                                      \
    NUMAVIA_BLOCK_CHECK_ADDRESS(inst, NV_CTRL_BASE);                                                                   \
    NUMAVIA_BLOCK_CONFIG_DEFINE(inst, card_control_config_##inst);                                                     \
    static struct card_control_data card_control_data_##inst;                                                          \
    DEVICE_DT_INST_DEFINE(inst, card_control_init, NULL, &card_control_data_##inst, &card_control_config_##inst,       \
                          POST_KERNEL, CONFIG_NUMAVIA_CARD_CONTROL_INIT_PRIORITY, NULL);

DT_INST_FOREACH_STATUS_OKAY(CARD_CONTROL_DEFINE)
