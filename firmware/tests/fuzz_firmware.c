/* libFuzzer target for the firmware core's handling of untrusted input, against the fake card:
 * host mailbox commands (arguments are whatever a host writes), management frames from the
 * Ethernet (contents, lengths and source nodes are whatever a peer sends, through the register
 * path the firmware really reads), the passage of time (retries, timeouts), and microcode
 * images (length, words or packed bytes, claimed CRC). ASan/UBSan turn any memory or arithmetic
 * error into a crash; the checks below turn a broken invariant into one.
 *
 * The input is a list of operations, each a selector byte and its operands (missing bytes read
 * as zero). Build: `make -C firmware/tests fuzz` (clang -fsanitize=fuzzer). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_card.h"
#include "fake_via.h"
#include "numavia/core.h"
#include "numavia/via.h"
#include "numavia_regs.h"
#include "numavia_via.h"

struct input {
    const uint8_t *data;
    size_t left;
};

static uint32_t take(struct input *in, unsigned bytes)
{
    uint32_t v = 0;
    for (unsigned i = 0; i < bytes; i++) {
        if (in->left) {
            v |= (uint32_t)*in->data++ << (8 * i);
            in->left--;
        }
    }
    return v;
}

/* The mailbox commands, plus one value that is none (the benchmark is left out: it is a
 * measurement loop, not input handling, and would spend the run waiting for a peer). */
static const uint32_t commands[] = {
    NV_MBOX_NOP,
    NV_MBOX_CREATE_PTAG,
    NV_MBOX_DESTROY_PTAG,
    NV_MBOX_REGISTER_MEM,
    NV_MBOX_DEREGISTER_MEM,
    NV_MBOX_CREATE_CQ,
    NV_MBOX_DESTROY_CQ,
    NV_MBOX_CREATE_VI,
    NV_MBOX_DESTROY_VI,
    NV_MBOX_CONNECT_REQUEST,
    NV_MBOX_CONNECT_STATUS,
    NV_MBOX_CONNECT_WAIT,
    NV_MBOX_CONNECT_ACCEPT,
    NV_MBOX_CONNECT_REJECT,
    NV_MBOX_DISCONNECT,
    0x7f,
};

/* Small values hit the tables' edges far more often than uniform 32-bit ones. */
static uint32_t argument(struct input *in)
{
    uint32_t kind = take(in, 1);
    switch (kind & 3) {
    case 0: return kind >> 2;                            /* 0..63 */
    case 1: return FAKE_HOST_BASE + (take(in, 2) & ~3u); /* inside host memory */
    case 2: return 0xffffffffu - (kind >> 2);            /* near the top */
    default: return take(in, 4);
    }
}

static void check_invariants(const struct nv_via *via)
{
    for (unsigned i = 0; i < NV_VIA_MAX_REQUESTS; i++)
        if (via->requests[i].state != NV_REQ_FREE && via->requests[i].node > NV_NODE_ID_MASK)
            abort();
    for (unsigned i = 0; i < via->vis; i++)
        if (via->vi[i].peer_node > NV_NODE_ID_MASK)
            abort();
}

static uint64_t store_words[1100];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nv_via via;
    struct input in = {data, size};
    fake_card_reset(0);
    fake_via_reset();
    fake.cycles_per_read = 100; /* 1 us per look at the clock */
    memset(&via, 0, sizeof via);
    if (nv_via_init(&via, 1, 100000000u) != NV_OK)
        abort();
    for (unsigned step = 0; in.left && step < 64; step++) {
        switch (take(&in, 1) % 6) {
        case 0: { /* a host mailbox command */
            uint32_t args[16];
            uint32_t code = commands[take(&in, 1) % (sizeof commands / sizeof commands[0])];
            for (unsigned i = 0; i < 16; i++)
                args[i] = argument(&in);
            nv_via_command(&via, code, args);
            break;
        }
        case 1: { /* a management frame through the receive registers, any length the field holds */
            uint32_t words[16] = {0};
            unsigned node = take(&in, 1), length = take(&in, 1) & 0x7f;
            for (unsigned i = 0; i < 16; i++)
                words[i] = argument(&in);
            if (fake_via.inbox_count < FAKE_MAX_FRAMES)
                fake_via_inject(node & NV_NODE_ID_MASK, words, length);
            nv_via_poll(&via);
            break;
        }
        case 2: { /* a management message handed over directly (any source node, any length) */
            uint32_t words[16] = {0};
            unsigned node = take(&in, 1), length = take(&in, 1);
            for (unsigned i = 0; i < 16; i++)
                words[i] = argument(&in);
            nv_via_handle_mgmt(&via, node & NV_NODE_ID_MASK, words, length > 64 ? 64 : length);
            break;
        }
        case 3: /* time passes: retries and timeouts fire */
            fake.cycles += (uint64_t)take(&in, 2) * 100000u;
            nv_via_poll(&via);
            break;
        case 4: { /* a microcode image: any length, words and claimed CRC */
            uint32_t count = take(&in, 2) % (sizeof store_words / sizeof store_words[0]);
            for (uint32_t i = 0; i < count; i++)
                store_words[i] = (uint64_t)argument(&in) << 32 | argument(&in);
            struct nv_ucode_image image = {.words = store_words, .count = count, .crc32 = take(&in, 4)};
            uint32_t bad = 0;
            nv_status s = (take(&in, 1) & 1) ? nv_ucode_load(&image, &bad) : nv_ucode_verify(&image, &bad);
            if (s == NV_OK && (count == 0 || count > fake.store_depth))
                abort(); /* an image the store cannot hold was accepted */
            break;
        }
        case 5: { /* a packed microcode image: any bytes; its buffer is exactly their length, so ASan
                   * sees a read past its end */
            uint32_t count = take(&in, 2) % (sizeof store_words / sizeof store_words[0]);
            uint32_t length = take(&in, 2) % 4096;
            uint8_t *packed = malloc(length ? length : 1);
            if (packed == NULL)
                abort();
            for (uint32_t i = 0; i < length; i++)
                packed[i] = (uint8_t)take(&in, 1);
            struct nv_ucode_image image = {
                .packed = packed, .packed_bytes = length, .count = count, .crc32 = take(&in, 4)};
            uint32_t bad = 0;
            nv_status s = (take(&in, 1) & 1) ? nv_ucode_load(&image, &bad) : nv_ucode_verify(&image, &bad);
            free(packed);
            if (s == NV_OK && (count == 0 || count > fake.store_depth))
                abort();
            break;
        }
        }
        check_invariants(&via);
    }
    return 0;
}
