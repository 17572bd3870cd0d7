/* Bare-metal firmware of the Numavia card's VexRiscv. */
#include <stdbool.h>

#include "numavia/core.h"
#include "numavia/platform.h"
#include "numavia_regs.h"
#include "numavia_ucode.h"
#include "numavia/via.h"
#include "numavia/via_bench.h"

#ifndef NV_FW_VERSION
#define NV_FW_VERSION "dev"
#endif

/* 0 in a build for a card without the VIA engine (the Makefile's VIA_VIS=0): the manager and its
 * VI table are left out of the image and the RAM. */
#ifndef NV_WITH_VIA
#define NV_WITH_VIA 1
#endif

int main(void)
{
    static const struct nv_ucode_image ucode = {.packed = nv_ucode_packed,
                                                .packed_bytes = NV_UCODE_PACKED_BYTES,
                                                .count = NV_UCODE_WORDS,
                                                .crc32 = NV_UCODE_CRC32};
    struct nv_card_info info;
    nv_status status = nv_boot(&info, "bare-metal", NV_FW_VERSION, &ucode);
    if (status != NV_OK) {
        nv_log("numavia: boot failed: %s\n", nv_strerror(status));
        for (;;)
            ;
    }
    /* Small FPGAs build the card without the VIA engine: its registers do not answer there. */
    bool with_via = NV_WITH_VIA && (info.features & NV_CTRL_FEATURES_VIA_MASK);
    static struct nv_via via;
    if (with_via) {
        status = nv_via_init(&via, info.node_id, info.clk_freq_hz);
        if (status == NV_OK)
            status = nv_bench_register(&via); /* the benchmark agent's BENCH command */
        if (status != NV_OK) {
            nv_log("numavia: VIA set-up failed: %s\n", nv_strerror(status));
            for (;;)
                ;
        }
    }
    /* The simulation and the host utility wait for this line (NV_READY_MARKER). */
    nv_log(NV_READY_MARKER " (node %u)\n", info.node_id);
    for (;;) {
        /* The shared memory needs no firmware once the microcode is live; VIA needs its manager. */
        if (with_via)
            nv_via_poll(&via); /* mailbox, management frames, connection timers */
    }
}
