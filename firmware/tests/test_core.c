/* Host unit tests of the portable firmware core against the fake card. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fake_card.h"
#include "numavia/core.h"
#include "numavia_regs.h"
#include "numavia_ucode.h"

static void test_probe_reads_identity(void)
{
    struct nv_card_info info;
    fake_card_reset(5);
    CHECK(nv_card_probe(&info) == NV_OK);
    CHECK(info.id == NV_CARD_ID);
    CHECK(info.version_major == NV_HW_VERSION_MAJOR && info.version_minor == NV_HW_VERSION_MINOR);
    CHECK(info.node_id_strap == 5);
    CHECK(info.clk_freq_hz == 100000000u);
    CHECK(info.features == NV_CTRL_FEATURES_VIA_MASK);
}

static void test_probe_without_card(void)
{
    struct nv_card_info info;
    fake_card_reset(0);
    fake.id = 0xffffffffu; /* what an empty bus reads */
    CHECK(nv_card_probe(&info) == NV_ERR_NO_CARD);
    CHECK(nv_card_probe(NULL) == NV_ERR_ARG);
}

static void test_probe_rejects_other_major_version(void)
{
    struct nv_card_info info;
    fake_card_reset(0);
    fake.version = (NV_HW_VERSION_MAJOR + 1) << NV_CTRL_VERSION_MAJOR_SHIFT;
    CHECK(nv_card_probe(&info) == NV_ERR_VERSION);
}

static void test_scratch_detects_stuck_bit_and_restores(void)
{
    fake_card_reset(0);
    fake.scratch = 0x12345678u;
    CHECK(nv_card_check_scratch() == NV_OK);
    CHECK(fake.scratch == 0x12345678u);
    fake.scratch_stuck_low = 1u << 17;
    CHECK(nv_card_check_scratch() == NV_ERR_READBACK);
    CHECK(fake.scratch == 0x12345678u);
}

static void test_node_id_range_and_readback(void)
{
    fake_card_reset(0);
    CHECK(nv_card_set_node_id(NV_NODE_ID_MASK + 1) == NV_ERR_RANGE);
    CHECK(fake.writes == 0); /* a bad argument touches nothing */
    CHECK(nv_card_set_node_id(NV_NODE_ID_MASK) == NV_OK);
    CHECK(fake.node_id == NV_NODE_ID_MASK);
    CHECK(fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK);
    fake_card_reset(0);
    fake.node_id_ignores_writes = 1;
    CHECK(nv_card_set_node_id(3) == NV_ERR_READBACK);
    CHECK(!(fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK)); /* never marked valid */
}

static void test_cycles_are_64_bit(void)
{
    fake_card_reset(0);
    fake.cycles = 0x0000000712345678ull;
    CHECK(nv_card_cycles() == 0x0000000712345678ull);
}

static void test_poll_timer_reads_the_clock_at_the_first_miss_and_every_clock_polls_after(void)
{
    fake_card_reset(0);
    fake.cycles = 0xfffffff0ull; /* the low word wraps while the timer runs */
    fake.cycles_per_read = 0;
    struct nv_poll_timer t = {0, 0};
    unsigned reads = fake.reads;
    CHECK(!nv_poll_timer_missed(&t, 100));
    CHECK(fake.reads == reads + 1); /* the first miss starts the timer */
    for (unsigned i = 1; i < NV_CLOCK_POLLS; i++)
        CHECK(!nv_poll_timer_missed(&t, 100));
    CHECK(fake.reads == reads + 1); /* no clock read between */
    fake.cycles += 100;             /* exactly the timeout: not past it */
    CHECK(!nv_poll_timer_missed(&t, 100));
    CHECK(fake.reads == reads + 2);
    fake.cycles += 1;
    for (unsigned i = 1; i < NV_CLOCK_POLLS; i++)
        CHECK(!nv_poll_timer_missed(&t, 100)); /* past it, but the clock is not looked at yet */
    CHECK(nv_poll_timer_missed(&t, 100));
    CHECK(fake.reads == reads + 3);
    CHECK(t.misses == 2 * NV_CLOCK_POLLS + 1);
}

static void test_a_poll_timeout_started_before_the_first_poll_keeps_its_start(void)
{
    fake_card_reset(0);
    fake.cycles = 500;
    fake.cycles_per_read = 0;
    uint32_t start = nv_card_cycles32();
    unsigned reads = fake.reads;
    fake.cycles += 101;
    for (uint32_t misses = 2; misses <= NV_CLOCK_POLLS; misses++)
        CHECK(!nv_poll_timed_out(misses, &start, 100)); /* no look at the clock until the 17th */
    CHECK(fake.reads == reads && start == 500);
    CHECK(nv_poll_timed_out(NV_CLOCK_POLLS + 1, &start, 100));
    CHECK(fake.reads == reads + 1 && start == 500);
}

static const uint64_t image_words[] = {0x0400000000000013ull, 0xfedcba9876543210ull, 0x1ull, 0x8000000000000000ull};

static struct nv_ucode_image image(void)
{
    struct nv_ucode_image img = {.words = image_words, .count = 4};
    uint8_t bytes[8];
    for (int i = 0; i < 4; i++) {
        for (int b = 0; b < 8; b++)
            bytes[b] = (uint8_t)(image_words[i] >> (8 * b));
        img.crc32 = nv_crc32(img.crc32, bytes, 8);
    }
    return img;
}

static void test_crc32_matches_zlib(void)
{
    CHECK(nv_crc32(0, "123456789", 9) == 0xcbf43926u);
    CHECK(nv_crc32(nv_crc32(0, "1234", 4), "56789", 5) == 0xcbf43926u);
}

static void test_ucode_loads_verifies_and_goes_live(void)
{
    struct nv_ucode_image img = image();
    uint32_t bad = 99;
    fake_card_reset(0);
    CHECK(nv_ucode_load(&img, &bad) == NV_OK);
    CHECK(fake.store[1] == image_words[1] && fake.store[3] == image_words[3]);
    CHECK(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK);
    CHECK(bad == 99);
}

static void test_fast_path_switch_survives_a_reload(void)
{
    struct nv_ucode_image img = image();
    uint32_t bad = 99;
    fake_card_reset(0);
    CHECK(nv_ucode_fast_path()); /* on after reset */
    CHECK(nv_ucode_load(&img, &bad) == NV_OK);
    nv_ucode_set_fast_path(false);
    CHECK(!nv_ucode_fast_path() && (fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK)); /* still live */
    CHECK(nv_ucode_load(&img, &bad) == NV_OK);
    CHECK(!nv_ucode_fast_path() && (fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK));
    nv_ucode_set_fast_path(true);
    CHECK(nv_ucode_fast_path() && (fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK));
}

static void test_ucode_bad_inputs_and_faults(void)
{
    struct nv_ucode_image img = image();
    uint32_t bad = 0;
    fake_card_reset(0);
    CHECK(nv_ucode_load(NULL, &bad) == NV_ERR_ARG);
    struct nv_ucode_image empty = {.words = image_words, .count = 0};
    CHECK(nv_ucode_load(&empty, &bad) == NV_ERR_RANGE);
    struct nv_ucode_image neither = {.count = 4, .crc32 = img.crc32}; /* no words, nothing packed */
    CHECK(nv_ucode_load(&neither, &bad) == NV_ERR_ARG && nv_ucode_verify(&neither, &bad) == NV_ERR_ARG);
    fake.store_depth = 3;
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_RANGE);
    CHECK(!(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK));

    fake_card_reset(0);
    fake.store_stuck_bits = 1ull << 36; /* only word 1 has bit 36 set: it reads back wrong */
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_READBACK && bad == 1);
    CHECK(!(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK));

    fake_card_reset(0);
    img.crc32 ^= 1;
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_CRC);
    CHECK(!(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK));

    fake_card_reset(0);
    img = image();
    fake.refuse_loaded = 1;
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_NOT_LOADED);
}

static void test_an_image_that_fails_its_check_leaves_the_running_one_live(void)
{
    struct nv_ucode_image img = image();
    uint32_t bad = 99;
    fake_card_reset(0);
    CHECK(nv_ucode_load(&img, &bad) == NV_OK);
    unsigned writes = fake.writes;
    uint64_t corrupted_words[4] = {image_words[0], image_words[1] ^ 4, image_words[2], image_words[3]};
    struct nv_ucode_image corrupted = {
        .words = corrupted_words, .count = 4, .crc32 = img.crc32}; /* a word changed, same CRC */
    CHECK(nv_ucode_load(&corrupted, &bad) == NV_ERR_CRC);
    CHECK(fake.writes == writes);                   /* refused before any write */
    CHECK(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK); /* the old one still serves */
    CHECK(fake.store[1] == image_words[1]);
    CHECK(nv_ucode_verify(&img, &bad) == NV_OK);
    writes = fake.writes;
    struct nv_ucode_image truncated = {.words = image_words, .count = 3, .crc32 = img.crc32};
    CHECK(nv_ucode_load(&truncated, &bad) == NV_ERR_CRC && fake.writes == writes);
}

static void test_ucode_verify_checks_a_live_store_without_writing_it(void)
{
    struct nv_ucode_image img = image();
    uint32_t bad = 99;
    fake_card_reset(0);
    CHECK(nv_ucode_verify(&img, &bad) == NV_ERR_READBACK && bad == 0); /* empty store */
    CHECK(nv_ucode_load(&img, &bad) == NV_OK);
    CHECK(nv_ucode_verify(&img, &bad) == NV_OK);
    CHECK(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK); /* still live */

    fake.store[2] ^= 1ull << 40; /* a bit flips later */
    uint64_t flipped = fake.store[2];
    CHECK(nv_ucode_verify(&img, &bad) == NV_ERR_READBACK && bad == 2);
    CHECK(fake.store[2] == flipped); /* nothing rewritten */
    CHECK(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK);

    fake.store[2] = image_words[2];
    img.crc32 ^= 1;
    CHECK(nv_ucode_verify(&img, &bad) == NV_ERR_CRC);
    CHECK(nv_ucode_verify(NULL, &bad) == NV_ERR_ARG);
}

/* The microcode built into the firmware, packed as numavia_ucode.h has it; `packed` may be a copy. */
static struct nv_ucode_image built_in(const uint8_t *packed)
{
    return (struct nv_ucode_image){
        .packed = packed, .packed_bytes = NV_UCODE_PACKED_BYTES, .count = NV_UCODE_WORDS, .crc32 = NV_UCODE_CRC32};
}

/* The CRC the micro-assembler gave the unpacked words, taken over what the fake's store holds. */
static bool store_holds_the_built_in_microcode(void)
{
    uint32_t crc = 0;
    for (uint32_t i = 0; i < NV_UCODE_WORDS; i++) {
        uint8_t bytes[8];
        for (int b = 0; b < 8; b++)
            bytes[b] = (uint8_t)(fake.store[i] >> (8 * b));
        crc = nv_crc32(crc, bytes, 8);
    }
    return crc == NV_UCODE_CRC32 && fake.store[NV_UCODE_WORDS] == 0;
}

static void test_the_built_in_packed_microcode_loads_and_verifies(void)
{
    struct nv_ucode_image img = built_in(nv_ucode_packed);
    uint32_t bad = 99;
    fake_card_reset(0);
    CHECK(NV_UCODE_PACKED_BYTES < NV_UCODE_WORDS * 8); /* it is worth packing */
    CHECK(nv_ucode_load(&img, &bad) == NV_OK && bad == 99);
    CHECK(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK);
    CHECK(store_holds_the_built_in_microcode());
    CHECK(nv_ucode_verify(&img, &bad) == NV_OK);
    /* The same words as words: the two forms are one image. */
    static uint64_t words[NV_UCODE_WORDS];
    memcpy(words, fake.store, sizeof words);
    struct nv_ucode_image as_words = {.words = words, .count = NV_UCODE_WORDS, .crc32 = NV_UCODE_CRC32};
    CHECK(nv_ucode_verify(&as_words, &bad) == NV_OK);
    CHECK(nv_ucode_load(&as_words, &bad) == NV_OK && store_holds_the_built_in_microcode());

    struct nv_card_info info;
    char banner[80];
    snprintf(banner, sizeof banner, "microcode loaded and verified (%u words, crc 0x%08x)", NV_UCODE_WORDS,
             NV_UCODE_CRC32);
    fake_card_reset(1);
    CHECK(nv_boot(&info, "test", "1", &img) == NV_OK && strstr(fake.log, banner) != NULL);
}

static void test_a_corrupted_packed_image_is_refused_and_the_running_one_stays_live(void)
{
    static uint8_t copy[NV_UCODE_PACKED_BYTES + 1];
    struct nv_ucode_image img = built_in(copy);
    uint32_t bad = 99;
    fake_card_reset(0);
    memcpy(copy, nv_ucode_packed, NV_UCODE_PACKED_BYTES);
    CHECK(nv_ucode_load(&img, &bad) == NV_OK);
    unsigned writes = fake.writes;
    CHECK(copy[0] & 1); /* word 0's byte 0 is nonzero: copy[1] is that byte */
    copy[1] ^= 0x40;    /* a data byte changed */
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_CRC && fake.writes == writes);
    copy[1] ^= 0x40;
    copy[0] ^= 0x80; /* a mask: the word loses or gains its top byte, the rest shift */
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_CRC && fake.writes == writes);
    copy[0] ^= 0x80;
    img.packed_bytes--; /* truncated: the last byte reads past the end */
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_CRC && fake.writes == writes);
    img.packed_bytes += 2; /* a byte too many: the words are right, the image is not */
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_CRC && fake.writes == writes);
    CHECK(nv_ucode_verify(&img, &bad) == NV_ERR_CRC);
    CHECK(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK); /* the old one still serves */
    CHECK(store_holds_the_built_in_microcode());
    img.packed_bytes--;
    CHECK(nv_ucode_verify(&img, &bad) == NV_OK);

    fake_card_reset(0); /* at boot nothing runs: the read-back's check refuses it */
    copy[1] ^= 0x40;
    CHECK(nv_ucode_load(&img, &bad) == NV_ERR_CRC);
    CHECK(!(fake.rac_ctrl & NV_RAC_CTRL_LOADED_MASK));
}

static void test_boot_prints_banner_and_sets_node_id(void)
{
    struct nv_card_info info;
    struct nv_ucode_image img = image();
    fake_card_reset(9);
    CHECK(nv_boot(&info, "test", "1.2.3", &img) == NV_OK);
    CHECK(info.node_id == 9 && fake.node_id == 9);
    CHECK(strstr(fake.log, "numavia firmware 1.2.3 (test)") != NULL);
    CHECK(strstr(fake.log, "card: id 0x4e4d5641") != NULL);
    CHECK(strstr(fake.log, "with VIA engine") != NULL);
    CHECK(strstr(fake.log, "node id strap 9, node id set to 9 (read back 9)") != NULL);
    CHECK(strstr(fake.log, "microcode loaded and verified (4 words") != NULL);
    CHECK(nv_boot(NULL, "test", "1", &img) == NV_ERR_ARG);
    CHECK(nv_boot(&info, NULL, "1", &img) == NV_ERR_ARG);
    CHECK(nv_boot(&info, "test", "1", NULL) == NV_ERR_ARG);
}

static void test_boot_says_whether_the_card_has_via(void)
{
    struct nv_card_info info;
    struct nv_ucode_image img = image();
    fake_card_reset(0);
    fake.features = 0; /* a small FPGA's card: no VIA engine */
    CHECK(nv_boot(&info, "test", "1", &img) == NV_OK);
    CHECK(!(info.features & NV_CTRL_FEATURES_VIA_MASK));
    CHECK(strstr(fake.log, "without VIA engine") != NULL);
}

static void test_boot_applies_the_numa_switch(void)
{
    struct nv_card_info info;
    struct nv_ucode_image img = image();
    fake_card_reset(2);
    CHECK(nv_boot(&info, "test", "1", &img) == NV_OK);
    CHECK(!(fake.ctrl & NV_CTRL_CTRL_NUMA_MODE_MASK));
    fake_card_reset(2);
    fake.mode_strap = NV_CTRL_MODE_STRAP_NUMA_MASK;
    CHECK(nv_boot(&info, "test", "1", &img) == NV_OK);
    CHECK(fake.ctrl & NV_CTRL_CTRL_NUMA_MODE_MASK && fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK);
    CHECK(strstr(fake.log, "NUMA mode") != NULL);
    CHECK(!(fake.ctrl & NV_CTRL_CTRL_CACHE_FIRST_MISS_MASK));
}

static void test_boot_applies_the_cache_first_miss_switch(void)
{
    struct nv_card_info info;
    struct nv_ucode_image img = image();
    fake_card_reset(1);
    fake.mode_strap = NV_CTRL_MODE_STRAP_CACHE_FIRST_MISS_MASK;
    CHECK(nv_boot(&info, "test", "1", &img) == NV_OK);
    CHECK(fake.ctrl & NV_CTRL_CTRL_CACHE_FIRST_MISS_MASK && fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK);
    CHECK(!(fake.ctrl & NV_CTRL_CTRL_NUMA_MODE_MASK));
    CHECK(strstr(fake.log, "first miss") != NULL);
}

static void test_boot_reports_missing_card(void)
{
    struct nv_card_info info;
    struct nv_ucode_image img = image();
    fake_card_reset(0);
    fake.id = 0;
    CHECK(nv_boot(&info, "test", "1", &img) == NV_ERR_NO_CARD);
    CHECK(strstr(fake.log, "identity 0x00000000, expected 0x4e4d5641") != NULL);
    CHECK(fake.node_id == 0 && fake.ctrl == 0);
}

static void test_strerror_covers_every_status(void)
{
    const nv_status all[] = {NV_OK,           NV_ERR_NO_CARD, NV_ERR_VERSION, NV_ERR_RANGE,
                             NV_ERR_READBACK, NV_ERR_ARG,     NV_ERR_CRC,     NV_ERR_NOT_LOADED};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CHECK(strcmp(nv_strerror(all[i]), "unknown error") != 0);
    CHECK(strcmp(nv_strerror((nv_status)42), "unknown error") == 0);
}

int main(void)
{
    test_probe_reads_identity();
    test_probe_without_card();
    test_probe_rejects_other_major_version();
    test_scratch_detects_stuck_bit_and_restores();
    test_node_id_range_and_readback();
    test_cycles_are_64_bit();
    test_poll_timer_reads_the_clock_at_the_first_miss_and_every_clock_polls_after();
    test_a_poll_timeout_started_before_the_first_poll_keeps_its_start();
    test_crc32_matches_zlib();
    test_ucode_loads_verifies_and_goes_live();
    test_fast_path_switch_survives_a_reload();
    test_ucode_bad_inputs_and_faults();
    test_an_image_that_fails_its_check_leaves_the_running_one_live();
    test_ucode_verify_checks_a_live_store_without_writing_it();
    test_the_built_in_packed_microcode_loads_and_verifies();
    test_a_corrupted_packed_image_is_refused_and_the_running_one_stays_live();
    test_boot_prints_banner_and_sets_node_id();
    test_boot_says_whether_the_card_has_via();
    test_boot_applies_the_numa_switch();
    test_boot_applies_the_cache_first_miss_switch();
    test_boot_reports_missing_card();
    test_strerror_covers_every_status();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
