/* Remote access controller: status, and the control store's microcode (verify, reload). The boot
 * sequence (card_control.c) loads the microcode first; this driver serves later requests. */
#define DT_DRV_COMPAT numavia_remote_access_controller

#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>

#include "numavia/core.h"
#include "numavia/drivers.h"
#include "numavia/platform.h"
#include "numavia_block.h"

int numavia_rac_get_status(const struct device *rac, struct numavia_rac_status *status)
{
    ARG_UNUSED(rac);
    if (status == NULL)
        return -EINVAL;
    uint32_t value = nv_reg_read(NV_RAC_STATUS);
    status->loaded = NUMAVIA_FIELD(value, NV_RAC_STATUS_LOADED) != 0;
    status->write_refused = NUMAVIA_FIELD(value, NV_RAC_STATUS_WRITE_REFUSED) != 0;
    status->busy_contexts = NUMAVIA_FIELD(value, NV_RAC_STATUS_BUSY_CONTEXTS);
    status->depth = nv_reg_read(NV_RAC_UCODE_DEPTH);
    return 0;
}

void numavia_rac_set_fast_path(const struct device *rac, bool on)
{
    ARG_UNUSED(rac);
    nv_ucode_set_fast_path(on);
}

static int rac_init(const struct device *dev)
{
    int err = numavia_block_init(dev);
    if (err == 0)
        nv_ucode_set_fast_path(IS_ENABLED(CONFIG_NUMAVIA_RAC_FAST_PATH));
    return err;
}

nv_status numavia_ucode_load(const struct device *rac, uint32_t *bad_word)
{
    ARG_UNUSED(rac);
    return nv_ucode_load(numavia_ucode_image(), bad_word);
}

nv_status numavia_ucode_verify(const struct device *rac, uint32_t *bad_word)
{
    ARG_UNUSED(rac);
    return nv_ucode_verify(numavia_ucode_image(), bad_word);
}

nv_status numavia_ucode_load_image(const struct device *rac, const struct nv_ucode_image *image, uint32_t *bad_word)
{
    ARG_UNUSED(rac);
    return nv_ucode_load(image, bad_word);
}

#define RAC_DEFINE(inst)                                                                                               \
    NUMAVIA_BLOCK_CHECK_ADDRESS(inst, NV_RAC_BASE);                                                                    \
    NUMAVIA_BLOCK_CONFIG_DEFINE(inst, rac_config_##inst);                                                              \
    DEVICE_DT_INST_DEFINE(inst, rac_init, NULL, NULL, &rac_config_##inst, POST_KERNEL,                                 \
                          CONFIG_NUMAVIA_BLOCK_INIT_PRIORITY, NULL);

DT_INST_FOREACH_STATUS_OKAY(RAC_DEFINE)
