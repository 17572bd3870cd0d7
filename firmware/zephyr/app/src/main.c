/* Numavia card firmware, Zephyr build: the same boot as bare metal, through the portable core. */
#include <zephyr/kernel.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia_ucode.h"

#ifndef NV_FW_VERSION
#define NV_FW_VERSION "dev"
#endif

int main(void)
{
    static const struct nv_ucode_image ucode = {nv_ucode, NV_UCODE_WORDS, NV_UCODE_CRC32};
    struct nv_card_info info;
    nv_status status = nv_boot(&info, "zephyr", NV_FW_VERSION, &ucode);
    if (status != NV_OK) {
        nv_log("numavia: boot failed: %s\n", nv_strerror(status));
        return -1;
    }
    nv_log(NV_READY_MARKER " (node %u)\n", info.node_id);
    return 0;
}
