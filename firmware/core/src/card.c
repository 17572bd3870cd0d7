/* Card bring-up: identify the card, check the bus, set the node id. */
#include <stddef.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia_regs.h"

const char *nv_strerror(nv_status status)
{
    switch (status) {
    case NV_OK: return "ok";
    case NV_ERR_NO_CARD: return "no Numavia card answers (bad identity)";
    case NV_ERR_VERSION: return "incompatible card version";
    case NV_ERR_RANGE: return "argument out of range";
    case NV_ERR_READBACK: return "register read-back mismatch";
    case NV_ERR_ARG: return "missing argument";
    case NV_ERR_CRC: return "control store CRC mismatch";
    case NV_ERR_NOT_LOADED: return "remote access controller did not go live";
    case NV_ERR_EXISTS: return "already registered";
    case NV_ERR_FULL: return "table full";
    }
    return "unknown error";
}

nv_status nv_card_probe(struct nv_card_info *info)
{
    if (info == NULL)
        return NV_ERR_ARG;
    info->id = nv_reg_read(NV_CTRL_ID);
    if (info->id != NV_CARD_ID)
        return NV_ERR_NO_CARD;
    uint32_t version = nv_reg_read(NV_CTRL_VERSION);
    info->version_major = (version & NV_CTRL_VERSION_MAJOR_MASK) >> NV_CTRL_VERSION_MAJOR_SHIFT;
    info->version_minor = (version & NV_CTRL_VERSION_MINOR_MASK) >> NV_CTRL_VERSION_MINOR_SHIFT;
    info->version_patch = (version & NV_CTRL_VERSION_PATCH_MASK) >> NV_CTRL_VERSION_PATCH_SHIFT;
    if (info->version_major != NV_HW_VERSION_MAJOR)
        return NV_ERR_VERSION;
    info->node_id_strap = nv_reg_read(NV_CTRL_NODE_ID_STRAP) & NV_NODE_ID_MASK;
    info->node_id = nv_reg_read(NV_CTRL_NODE_ID) & NV_NODE_ID_MASK;
    info->clk_freq_hz = nv_reg_read(NV_CTRL_CLK_FREQ_HZ);
    info->features = nv_reg_read(NV_CTRL_FEATURES);
    return NV_OK;
}

nv_status nv_card_check_scratch(void)
{
    static const uint32_t patterns[] = {0x00000000u, 0xffffffffu, 0xa5a5a5a5u, 0x5a5a5a5au, 0x01234567u};
    uint32_t saved = nv_reg_read(NV_CTRL_SCRATCH);
    nv_status status = NV_OK;
    for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
        nv_reg_write(NV_CTRL_SCRATCH, patterns[i]);
        if (nv_reg_read(NV_CTRL_SCRATCH) != patterns[i]) {
            status = NV_ERR_READBACK;
            break;
        }
    }
    nv_reg_write(NV_CTRL_SCRATCH, saved);
    return status;
}

nv_status nv_card_set_node_id(unsigned node_id)
{
    if (node_id > NV_NODE_ID_MASK)
        return NV_ERR_RANGE;
    nv_reg_write(NV_CTRL_NODE_ID, node_id);
    if ((nv_reg_read(NV_CTRL_NODE_ID) & NV_NODE_ID_MASK) != node_id)
        return NV_ERR_READBACK;
    uint32_t ctrl = nv_reg_read(NV_CTRL_CTRL);
    nv_reg_write(NV_CTRL_CTRL, ctrl | NV_CTRL_CTRL_NODE_ID_VALID_MASK);
    if (!(nv_reg_read(NV_CTRL_STATUS) & NV_CTRL_STATUS_READY_MASK))
        return NV_ERR_READBACK;
    return NV_OK;
}

nv_status nv_boot(struct nv_card_info *info, const char *port, const char *fw_version,
                  const struct nv_ucode_image *ucode)
{
    if (info == NULL || port == NULL || fw_version == NULL || ucode == NULL)
        return NV_ERR_ARG;
    nv_log("numavia firmware %s (%s)\n", fw_version, port);
    nv_status status = nv_card_probe(info);
    if (status == NV_ERR_NO_CARD)
        nv_log("card: identity 0x%08lx, expected 0x%08lx\n", (unsigned long)info->id, (unsigned long)NV_CARD_ID);
    if (status != NV_OK)
        return status;
    nv_log("card: id 0x%08lx version %u.%u.%u clock %lu Hz, %s VIA engine%s\n", (unsigned long)info->id,
           info->version_major, info->version_minor, info->version_patch, (unsigned long)info->clk_freq_hz,
           (info->features & NV_CTRL_FEATURES_VIA_MASK) ? "with" : "without",
           (info->features & NV_CTRL_FEATURES_PCIE_MASK) ? ", PCIe" : "");
    status = nv_card_check_scratch();
    if (status != NV_OK)
        return status;
    nv_log("card: scratch register ok\n");
    status = nv_card_set_node_id(info->node_id_strap);
    if (status != NV_OK)
        return status;
    info->node_id = nv_reg_read(NV_CTRL_NODE_ID) & NV_NODE_ID_MASK;
    nv_log("card: node id strap %u, node id set to %u (read back %u)\n", info->node_id_strap, info->node_id_strap,
           info->node_id);
    if (nv_reg_read(NV_CTRL_MODE_STRAP) & NV_CTRL_MODE_STRAP_NUMA_MASK) {
        nv_reg_write(NV_CTRL_CTRL, nv_reg_read(NV_CTRL_CTRL) | NV_CTRL_CTRL_NUMA_MODE_MASK);
        nv_log("card: NUMA mode (network cache off), as the board switch says\n");
    }
    if (nv_reg_read(NV_CTRL_MODE_STRAP) & NV_CTRL_MODE_STRAP_CACHE_FIRST_MISS_MASK) {
        nv_reg_write(NV_CTRL_CTRL, nv_reg_read(NV_CTRL_CTRL) | NV_CTRL_CTRL_CACHE_FIRST_MISS_MASK);
        nv_log("card: the network cache takes remote lines at their first miss, as the board switch says\n");
    }
    uint32_t bad_word = 0;
    status = nv_ucode_load(ucode, &bad_word);
    if (status == NV_ERR_READBACK)
        nv_log("card: control store word %lu read back wrong\n", (unsigned long)bad_word);
    if (status != NV_OK)
        return status;
    nv_log("card: microcode loaded and verified (%lu words, crc 0x%08lx)\n", (unsigned long)ucode->count,
           (unsigned long)ucode->crc32);
    return NV_OK;
}
