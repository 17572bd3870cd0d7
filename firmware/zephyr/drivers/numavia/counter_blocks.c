/* Blocks whose driver is their event counters and nothing else (yet): the local access
 * controller and the SCI ring link. The host tools read the rest of their state over the bridge. */
#include <zephyr/device.h>
#include <zephyr/devicetree.h>

#include "numavia_block.h"

#define COUNTER_BLOCK_DEFINE(inst, nv_block_base, prefix)                                                              \
    NUMAVIA_BLOCK_CHECK_ADDRESS(inst, nv_block_base);                                                                  \
    NUMAVIA_BLOCK_CONFIG_DEFINE(inst, prefix##_config_##inst);                                                         \
    DEVICE_DT_INST_DEFINE(inst, numavia_block_init, NULL, NULL, &prefix##_config_##inst, POST_KERNEL,                  \
                          CONFIG_NUMAVIA_BLOCK_INIT_PRIORITY, NULL);

#ifdef CONFIG_NUMAVIA_LAC
#define DT_DRV_COMPAT numavia_local_access_controller
#define LAC_DEFINE(inst) COUNTER_BLOCK_DEFINE(inst, NV_LAC_BASE, lac)
DT_INST_FOREACH_STATUS_OKAY(LAC_DEFINE)
#undef DT_DRV_COMPAT
#endif

#ifdef CONFIG_NUMAVIA_RING_LINK
#define DT_DRV_COMPAT numavia_ring_link
#define RING_DEFINE(inst) COUNTER_BLOCK_DEFINE(inst, NV_RING_BASE, ring)
DT_INST_FOREACH_STATUS_OKAY(RING_DEFINE)
#undef DT_DRV_COMPAT
#endif
