/* Stand-in for Zephyr's devicetree.h (see ../README.md): the macros the module uses, reading the
 * STUB_* values numavia_stub_devicetree.h holds for one instance of each compatible. */
#ifndef STUB_ZEPHYR_DEVICETREE_H
#define STUB_ZEPHYR_DEVICETREE_H
#include <zephyr/sys/util.h>
#include "numavia_stub_devicetree.h"

#define DT_NUM_INST_STATUS_OKAY(compat) STUB_CAT(STUB_COUNT_, compat)
#define DT_HAS_COMPAT_STATUS_OKAY(compat) (DT_NUM_INST_STATUS_OKAY(compat) > 0)
#define DT_COMPAT_GET_ANY_STATUS_OKAY(compat) compat
#define DT_NODELABEL(label) label
#define DT_REG_ADDR_BY_NAME(node, name) STUB_CAT(STUB_CAT(STUB_CAT(STUB_ADDR_, node), _), name)
#define DT_REG_SIZE_BY_NAME(node, name) STUB_CAT(STUB_CAT(STUB_CAT(STUB_SIZE_, node), _), name)

/* Instance macros: one instance (0) per compatible, which the drivers BUILD_ASSERT anyway. */
#define DT_INST_FOREACH_STATUS_OKAY(fn) STUB_CAT(STUB_FOREACH_, DT_NUM_INST_STATUS_OKAY(DT_DRV_COMPAT))(fn)
#define STUB_FOREACH_0(fn)
#define STUB_FOREACH_1(fn) fn(0)
#define DT_INST_REG_ADDR(inst) STUB_CAT(STUB_ADDR_, DT_DRV_COMPAT)
#define DT_INST_IRQN(inst) STUB_CAT(STUB_IRQN_, DT_DRV_COMPAT)
#define DT_INST_IRQ(inst, cell) STUB_CAT(STUB_CAT(STUB_IRQ_, DT_DRV_COMPAT), _##cell)
#define DT_INST_NODE_HAS_PROP(inst, prop) STUB_CAT(STUB_CAT(STUB_HAS_, DT_DRV_COMPAT), _##prop)
#define DT_INST_PROP(inst, prop) STUB_CAT(STUB_CAT(STUB_PROP_, DT_DRV_COMPAT), _##prop)
#define DT_INST_PROP_OR(inst, prop, default_value) \
    COND_CODE_1(DT_INST_NODE_HAS_PROP(inst, prop), (DT_INST_PROP(inst, prop)), (default_value))
#define DT_INST_PROP_LEN_OR(inst, prop, default_value) \
    COND_CODE_1(DT_INST_NODE_HAS_PROP(inst, prop), (STUB_CAT(STUB_CAT(STUB_LEN_, DT_DRV_COMPAT), _##prop)), \
                (default_value))
#endif
