/* `numavia` shell commands: status, ucode load|verify, mode, vi list, counters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zephyr/device.h>
#include <zephyr/shell/shell.h>

#include "numavia/core.h"
#include "numavia/drivers.h"
#ifdef CONFIG_NUMAVIA_VIA
#include "numavia/via.h"
#endif

static const struct device *const card = DEVICE_DT_GET_ONE(numavia_card_control);

/* Blocks with event counters, by the name `numavia counters <block>` takes. */
static const struct {
    const char *name;
    const struct device *dev;
} counter_blocks[] = {
#ifdef CONFIG_NUMAVIA_LAC
    {"lac", DEVICE_DT_GET_ONE(numavia_local_access_controller)},
#endif
#ifdef CONFIG_NUMAVIA_RAC
    {"rac", DEVICE_DT_GET_ONE(numavia_remote_access_controller)},
#endif
#ifdef CONFIG_NUMAVIA_RING_LINK
    {"ring", DEVICE_DT_GET_ONE(numavia_ring_link)},
#endif
#ifdef CONFIG_NUMAVIA_VIA
    {"via", DEVICE_DT_GET_ONE(numavia_via_engine)},
#endif
};

/* Every command needs a booted card; says why not, once, the same way. */
static bool card_booted(const struct shell *sh)
{
    nv_status status = numavia_card_boot_status(card);
    if (status != NV_OK)
        shell_error(sh, "card not booted: %s", nv_strerror(status));
    return status == NV_OK;
}

static int cmd_status(const struct shell *sh, size_t argc, char **argv)
{
    ARG_UNUSED(argc);
    ARG_UNUSED(argv);
    struct nv_card_info info;
    if (!card_booted(sh) || numavia_card_get_info(card, &info) != 0)
        return -ENODEV;
    /* Printed in two halves: the shell's default printf has no 64-bit conversions. */
    uint64_t cycles = numavia_card_cycles(card);
    shell_print(sh, "card:      id 0x%08x, version %u.%u.%u, clock %u Hz, cycles 0x%08x%08x", info.id,
                info.version_major, info.version_minor, info.version_patch, info.clk_freq_hz, (uint32_t)(cycles >> 32),
                (uint32_t)cycles);
    shell_print(sh, "node:      %u (strap %u), %s mode, lines cached at their %s read miss", info.node_id,
                info.node_id_strap, numavia_card_numa_mode(card) ? "NUMA" : "NCC-NUMA",
                numavia_card_cache_first_miss(card) ? "first" : "second");
#ifdef CONFIG_NUMAVIA_RAC
    struct numavia_rac_status rac;
    numavia_rac_get_status(DEVICE_DT_GET_ONE(numavia_remote_access_controller), &rac);
    shell_print(sh, "sequencer: %s, %u busy context(s), control store %u words%s", rac.loaded ? "live" : "offline",
                rac.busy_contexts, rac.depth, rac.write_refused ? ", a write to the live store was refused" : "");
#endif
#ifdef CONFIG_NUMAVIA_VIA
    const struct device *via = DEVICE_DT_GET_ONE(numavia_via_engine);
    unsigned open = 0, connected = 0;
    for (unsigned vi = 0; vi < numavia_via_vi_count(via); vi++) {
        struct numavia_vi_info v;
        if (numavia_via_vi_info(via, vi, &v) == 0 && v.open) {
            open++;
            connected += v.connection == NV_CONN_CONNECTED;
        }
    }
    shell_print(sh, "via:       %u VIs, %u open, %u connected", numavia_via_vi_count(via), open, connected);
#endif
    return 0;
}

#ifdef CONFIG_NUMAVIA_RAC
/* The report of `ucode load` and `ucode verify` on `image`. */
static int ucode_report(const struct shell *sh, const char *what, const struct nv_ucode_image *image, nv_status status,
                        uint32_t bad_word)
{
    if (status == NV_OK) {
        shell_print(sh, "microcode %s: %u words, crc 0x%08x", what, image->count, image->crc32);
        return 0;
    }
    if (status == NV_ERR_READBACK)
        shell_error(sh, "microcode %s failed: control store word %u differs from the image", what, bad_word);
    else
        shell_error(sh, "microcode %s failed: %s", what, nv_strerror(status));
    return -EIO;
}

static bool parse_u32(const struct shell *sh, const char *text, const char *what, uint32_t *value)
{
    char *end;
    unsigned long v = strtoul(text, &end, 0);
    if (*text == '\0' || *end != '\0' || v > UINT32_MAX) {
        shell_error(sh, "%s: '%s' is not a number", what, text);
        return false;
    }
    *value = (uint32_t)v;
    return true;
}

/* `ucode load`: the built-in image, or one the host staged in host memory (ADDR WORDS CRC). */
static int cmd_ucode_load(const struct shell *sh, size_t argc, char **argv)
{
    if (!card_booted(sh))
        return -ENODEV;
    const struct device *rac = DEVICE_DT_GET_ONE(numavia_remote_access_controller);
    uint32_t bad_word = 0;
    if (argc == 1) {
        nv_status status = numavia_ucode_load(rac, &bad_word);
        return ucode_report(sh, "loaded and verified", numavia_ucode_image(), status, bad_word);
    }
    if (argc != 4) {
        shell_error(sh, "usage: numavia ucode load [ADDR WORDS CRC]");
        return -EINVAL;
    }
    uint32_t addr, count, crc;
    if (!parse_u32(sh, argv[1], "ADDR", &addr) || !parse_u32(sh, argv[2], "WORDS", &count) ||
        !parse_u32(sh, argv[3], "CRC", &crc))
        return -EINVAL;
    const uint64_t *words = numavia_host_words(addr, count);
    if (words == NULL) {
        shell_error(sh, "%u words at 0x%08x are not 8-byte aligned host memory", count, addr);
        return -EINVAL;
    }
    const struct nv_ucode_image image = {.words = words, .count = count, .crc32 = crc};
    nv_status status = numavia_ucode_load_image(rac, &image, &bad_word);
    if (status == NV_ERR_CRC) {
        shell_error(sh, "microcode refused: its words do not have crc 0x%08x; the running microcode stays live", crc);
        return -EIO;
    }
    return ucode_report(sh, "loaded and verified", &image, status, bad_word);
}

static int cmd_ucode_verify(const struct shell *sh, size_t argc, char **argv)
{
    ARG_UNUSED(argc);
    ARG_UNUSED(argv);
    if (!card_booted(sh))
        return -ENODEV;
    uint32_t bad_word = 0;
    nv_status status = numavia_ucode_verify(DEVICE_DT_GET_ONE(numavia_remote_access_controller), &bad_word);
    return ucode_report(sh, "verified", numavia_ucode_image(), status, bad_word);
}

SHELL_STATIC_SUBCMD_SET_CREATE(
    numavia_ucode_cmds,
    SHELL_CMD_ARG(load, NULL,
                  "Load microcode into the control store and verify it: the built-in SCI "
                  "microcode, or WORDS 64-bit words the host put at host-memory ADDR with their CRC-32: "
                  "numavia ucode load [ADDR WORDS CRC]",
                  cmd_ucode_load, 1, 3),
    SHELL_CMD(verify, NULL, "Compare the control store with the built-in microcode", cmd_ucode_verify),
    SHELL_SUBCMD_SET_END);
#endif

#ifdef CONFIG_NUMAVIA_VIA
static const char *const vi_hw_states[] = {"idle", "connected", "error", "?"};

static int cmd_vi_list(const struct shell *sh, size_t argc, char **argv)
{
    ARG_UNUSED(argc);
    ARG_UNUSED(argv);
    if (!card_booted(sh))
        return -ENODEV;
    const struct device *via = DEVICE_DT_GET_ONE(numavia_via_engine);
    if (!device_is_ready(via)) {
        shell_error(sh, "VIA engine not set up");
        return -ENODEV;
    }
    shell_print(sh, " vi  connection     engine     error   ptag  peer    sq    rq");
    for (unsigned vi = 0; vi < numavia_via_vi_count(via); vi++) {
        struct numavia_vi_info v;
        if (numavia_via_vi_info(via, vi, &v) != 0 || !v.open)
            continue;
        shell_print(sh, "%3u  %-13s  %-9s  0x%04x  %5u  %2u.%-3u %5u %5u", vi,
                    numavia_via_connection_name(v.connection), vi_hw_states[MIN(v.hw_state, 3)], v.hw_error, v.ptag,
                    v.peer_node, v.peer_vi, v.sq_posted, v.rq_posted);
    }
    return 0;
}

SHELL_STATIC_SUBCMD_SET_CREATE(numavia_vi_cmds,
                               SHELL_CMD(list, NULL,
                                         "The VIs the host opened: connection, engine state, peer, posted descriptors",
                                         cmd_vi_list),
                               SHELL_SUBCMD_SET_END);
#endif

static int cmd_mode(const struct shell *sh, size_t argc, char **argv)
{
    if (!card_booted(sh))
        return -ENODEV;
    if (argc == 2) {
        bool numa = strcmp(argv[1], "numa") == 0;
        if (!numa && strcmp(argv[1], "ncc") != 0) {
            shell_error(sh, "mode '%s': choose ncc (network cache on) or numa (off)", argv[1]);
            return -EINVAL;
        }
        numavia_card_set_numa_mode(card, numa);
    }
    shell_print(sh, "mode: %s (the board switch says %s)", numavia_card_numa_mode(card) ? "NUMA" : "NCC-NUMA",
                (nv_reg_read(NV_CTRL_MODE_STRAP) & NV_CTRL_MODE_STRAP_NUMA_MASK) ? "NUMA" : "NCC-NUMA");
    return 0;
}

static int cmd_cache(const struct shell *sh, size_t argc, char **argv)
{
    if (!card_booted(sh))
        return -ENODEV;
    if (argc == 2) {
        bool set_first = strcmp(argv[1], "first") == 0;
        if (!set_first && strcmp(argv[1], "second") != 0) {
            shell_error(sh, "cache '%s': choose first (every read miss caches) or second (the allocation filter)",
                        argv[1]);
            return -EINVAL;
        }
        numavia_card_set_cache_first_miss(card, set_first);
    }
    bool first = numavia_card_cache_first_miss(card);
    shell_print(sh, "the network cache takes a remote line at its %s read miss%s", first ? "first" : "second",
                first ? "" : " (the allocation filter)");
    return 0;
}

static void print_counters(const struct shell *sh, const char *block_name, const struct device *dev)
{
    for (unsigned i = 0; i < numavia_counter_count(dev); i++) {
        uint32_t value;
        if (numavia_counter_read(dev, i, &value) == 0)
            shell_print(sh, "%-5s %-24s %10u", block_name, numavia_counter_name(dev, i), value);
    }
}

static int cmd_counters(const struct shell *sh, size_t argc, char **argv)
{
    if (!card_booted(sh))
        return -ENODEV;
    const char *only = argc > 1 ? argv[1] : NULL;
    bool found = only == NULL;
    for (size_t i = 0; i < ARRAY_SIZE(counter_blocks); i++) {
        if (only != NULL && strcmp(only, counter_blocks[i].name) != 0)
            continue;
        found = true;
        print_counters(sh, counter_blocks[i].name, counter_blocks[i].dev);
    }
    if (!found) {
        shell_error(sh, "no block '%s' with counters", only);
        return -EINVAL;
    }
    return 0;
}

SHELL_STATIC_SUBCMD_SET_CREATE(
    numavia_cmds, SHELL_CMD(status, NULL, "Card identity, node id, mode, sequencer and VIA summary", cmd_status),
#ifdef CONFIG_NUMAVIA_RAC
    SHELL_CMD(ucode, &numavia_ucode_cmds, "Remote access controller microcode", NULL),
#endif
    SHELL_CMD_ARG(mode, NULL,
                  "Show the mode, or set it (on a ring whose shared memory is not in use): "
                  "numavia mode [ncc|numa]",
                  cmd_mode, 1, 1),
    SHELL_CMD_ARG(cache, NULL,
                  "Show or set which read miss of a remote line caches it: numavia cache [first|second] "
                  "(second: the allocation filter, the default)",
                  cmd_cache, 1, 1),
#ifdef CONFIG_NUMAVIA_VIA
    SHELL_CMD(vi, &numavia_vi_cmds, "Virtual Interfaces", NULL),
#endif
    SHELL_CMD_ARG(counters, NULL, "Event counters: numavia counters [lac|rac|ring|via]", cmd_counters, 1, 1),
    SHELL_SUBCMD_SET_END);

SHELL_CMD_REGISTER(numavia, &numavia_cmds, "Numavia card", NULL);
