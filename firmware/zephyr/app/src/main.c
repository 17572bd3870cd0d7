/* Numavia card firmware, Zephyr build: the same boot and the same console lines as bare metal.
 *
 * The module's drivers did the work before main() runs: card control ran the portable core's
 * boot sequence (banner, probe, bus check, node id, mode, microcode), the VIA driver set up the
 * engine and started the protocol manager. main() reports the outcome the way the bare-metal
 * main does, so the simulation and the host tools wait for the same ready marker. */
#include <errno.h>

#include <zephyr/device.h>
#include <zephyr/devicetree.h>
#include <zephyr/sys/printk.h>

#include "numavia/core.h"
#include "numavia/drivers.h"

int main(void)
{
    const struct device *card = DEVICE_DT_GET_ONE(numavia_card_control);
    if (!device_is_ready(card)) {
        printk("numavia: boot failed: %s\n", nv_strerror(numavia_card_boot_status(card)));
        return -ENODEV;
    }
#ifdef CONFIG_NUMAVIA_VIA
    /* The driver printed why ("numavia: VIA set-up failed: ..."). */
    if (!device_is_ready(DEVICE_DT_GET_ONE(numavia_via_engine)))
        return -ENODEV;
#endif
    struct nv_card_info info;
    numavia_card_get_info(card, &info);
    printk(NV_READY_MARKER " (node %u)\n", info.node_id);
    return 0;
}
