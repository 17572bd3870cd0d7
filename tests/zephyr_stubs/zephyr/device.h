/* Stand-in for Zephyr's device.h (see ../README.md). */
#ifndef STUB_ZEPHYR_DEVICE_H
#define STUB_ZEPHYR_DEVICE_H
#include <stdbool.h>
#include <zephyr/devicetree.h>
#include <zephyr/init.h>
#include <zephyr/sys/util.h>

struct device {
    const char *name;
    const void *config;
    const void *api;
    void *data;
};

bool device_is_ready(const struct device *dev);

/* Every compatible's device exists (numavia_stub_devicetree.h declares them). */
#define DEVICE_DT_GET_ONE(compat) (&STUB_CAT(stub_device_, compat))
#define DEVICE_DT_INST_GET(inst) DEVICE_DT_GET_ONE(DT_DRV_COMPAT)

/* Zephyr places the device in a section sorted by level and priority; here the arguments only
 * have to be what Zephyr accepts: an init function of the right type, a level, a number. */
#define DEVICE_DT_INST_DEFINE(inst, init_fn, pm, data_ptr, config_ptr, level, prio, api_ptr)      \
    static int (*const STUB_CAT(stub_init_, DT_DRV_COMPAT))(const struct device *)                \
        __attribute__((used)) = init_fn;                                                          \
    enum { STUB_CAT(stub_level_, DT_DRV_COMPAT) = level, STUB_CAT(stub_prio_, DT_DRV_COMPAT) = prio }; \
    const struct device STUB_CAT(stub_device_, DT_DRV_COMPAT) = {                                 \
        .name = #init_fn, .config = config_ptr, .api = api_ptr, .data = data_ptr}
#endif
