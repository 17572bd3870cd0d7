/* Host unit tests of the portable firmware core against the fake card. */
#include <stdio.h>
#include <string.h>

#include "fake_card.h"
#include "numavia/core.h"
#include "numavia_regs.h"

static int failures, checks;

#define CHECK(cond) do { \
    checks++; \
    if (!(cond)) { failures++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

static void test_probe_reads_identity(void)
{
    struct nv_card_info info;
    fake_card_reset(5);
    CHECK(nv_card_probe(&info) == NV_OK);
    CHECK(info.id == NV_CARD_ID);
    CHECK(info.version_major == NV_HW_VERSION_MAJOR && info.version_minor == NV_HW_VERSION_MINOR);
    CHECK(info.node_id_strap == 5);
    CHECK(info.clk_freq_hz == 100000000u);
}

static void test_probe_without_card(void)
{
    struct nv_card_info info;
    fake_card_reset(0);
    fake.id = 0xffffffffu;   /* what an empty bus reads */
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
    CHECK(fake.writes == 0);   /* a bad argument touches nothing */
    CHECK(nv_card_set_node_id(NV_NODE_ID_MASK) == NV_OK);
    CHECK(fake.node_id == NV_NODE_ID_MASK);
    CHECK(fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK);
    fake_card_reset(0);
    fake.node_id_ignores_writes = 1;
    CHECK(nv_card_set_node_id(3) == NV_ERR_READBACK);
    CHECK(!(fake.ctrl & NV_CTRL_CTRL_NODE_ID_VALID_MASK));   /* never marked valid */
}

static void test_cycles_are_64_bit(void)
{
    fake_card_reset(0);
    fake.cycles = 0x0000000712345678ull;
    CHECK(nv_card_cycles() == 0x0000000712345678ull);
}

static void test_boot_prints_banner_and_sets_node_id(void)
{
    struct nv_card_info info;
    fake_card_reset(9);
    CHECK(nv_boot(&info, "test", "1.2.3") == NV_OK);
    CHECK(info.node_id == 9 && fake.node_id == 9);
    CHECK(strstr(fake.log, "numavia firmware 1.2.3 (test)") != NULL);
    CHECK(strstr(fake.log, "card: id 0x4e4d5641") != NULL);
    CHECK(strstr(fake.log, "node id strap 9, node id set to 9 (read back 9)") != NULL);
    CHECK(nv_boot(NULL, "test", "1") == NV_ERR_ARG);
    CHECK(nv_boot(&info, NULL, "1") == NV_ERR_ARG);
}

static void test_boot_reports_missing_card(void)
{
    struct nv_card_info info;
    fake_card_reset(0);
    fake.id = 0;
    CHECK(nv_boot(&info, "test", "1") == NV_ERR_NO_CARD);
    CHECK(strstr(fake.log, "identity 0x00000000, expected 0x4e4d5641") != NULL);
    CHECK(fake.node_id == 0 && fake.ctrl == 0);
}

static void test_strerror_covers_every_status(void)
{
    const nv_status all[] = {NV_OK, NV_ERR_NO_CARD, NV_ERR_VERSION, NV_ERR_RANGE, NV_ERR_READBACK, NV_ERR_ARG};
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
    test_boot_prints_banner_and_sets_node_id();
    test_boot_reports_missing_card();
    test_strerror_covers_every_status();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
