/* VIA doorbell pages (numavia,via-doorbells): one page per VI (NV_DOORBELL_VI_STRIDE bytes, the
 * host's page size) holding that VI's two doorbells and nothing else. A kernel that gives a user
 * thread a VI maps it that VI's page only (a memory-domain partition of the page): the card takes
 * a doorbell for VI i from page i alone, so the thread cannot post work for another VI. The driver
 * says where each page is; the card refuses (and counts, DOORBELLS_REFUSED) pages of VIs it lacks. */
#define DT_DRV_COMPAT numavia_via_doorbells

#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>

#include "numavia/drivers.h"
#include "numavia/platform.h"
#include "numavia_block.h"

BUILD_ASSERT(NV_DOORBELL_VI_STRIDE % 4096u == 0, "a doorbell page must be whole MMU pages");

int numavia_via_doorbell_page(const struct device *doorbells, unsigned vi, uintptr_t *page)
{
    const struct numavia_block_config *config = doorbells->config;
    if (page == NULL || vi >= nv_reg_read(NV_VIA_VI_COUNT))
        return -EINVAL;
    *page = config->base + (NV_DOORBELL_VI_BASE - NV_DOORBELL_BASE) + (uintptr_t)vi * NV_DOORBELL_VI_STRIDE;
    return 0;
}

#define VIA_DOORBELLS_DEFINE(inst)                                                                                     \
    NUMAVIA_BLOCK_CHECK_ADDRESS(inst, NV_DOORBELL_BASE);                                                               \
    NUMAVIA_BLOCK_CONFIG_DEFINE(inst, via_doorbells_config_##inst);                                                    \
    DEVICE_DT_INST_DEFINE(inst, numavia_block_init, NULL, NULL, &via_doorbells_config_##inst, POST_KERNEL,             \
                          CONFIG_NUMAVIA_BLOCK_INIT_PRIORITY, NULL);

DT_INST_FOREACH_STATUS_OKAY(VIA_DOORBELLS_DEFINE)
