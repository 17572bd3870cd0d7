"""Where the bare-metal image puts its timed code (NV_TIMED in numavia/platform.h).

The benchmark agents' figures come from the card's cycle counter, and the VexRiscv's instruction
cache is small and direct-mapped: code that shares a cache line with the timed loop evicts it on
every iteration. Each timed group must therefore be one piece of the image that calls nothing
outside itself, and the VIA benchmark's group must fit the cache, so that no edit elsewhere in the
firmware can move the latencies (docs/benchmarks.md)."""

import re
import subprocess

import pytest

from numavia.soc import sim
from numavia.soc.firmware import build_firmware

pytestmark = pytest.mark.slow

# LiteX's VexRiscv "standard" (the card's CPU): one way of 128 lines of 32 bytes (VexRiscv.v).
ICACHE_BYTES, ICACHE_LINE_BYTES = 4096, 32
CROSS = "riscv64-unknown-elf-"
# The entries the untimed code calls (NV_TIMED_ENTRY): each must stay a function of its group.
ENTRIES = {"via_bench": {"send_recv", "rdma_write", "rdma_read", "stream"}, "pushpull": {"ping_pong"}}
# What timed code may call outside its group: an error report, which ends the run (the VIA
# benchmark's report of a descriptor completed in error is its own cold function, so that the waits
# calling it need no stack frame); in the VIA benchmark the port's wait for a completion queue, a
# sleep whose cost is what `--wake cq` measures; and in push-pull the C library's memset, which the
# compiler calls to clear its descriptors and headers.
MAY_CALL = {
    "via_bench": {"nv_log", "completed_in_error", "nv_platform_wait_cq"},
    "pushpull": {"nv_log", "memset"},
}


@pytest.fixture(scope="module")
def image():
    elf = build_firmware(sim.build_soc(sim.SimConfig(nodes=2), log=lambda m: None), log=lambda m: None).with_name(
        "firmware.elf"
    )
    return elf, elf.with_name("firmware.map").read_text()


def input_sections(link_map, group):
    """(address, size) of every input section of the group in the link map."""
    pattern = rf"^ \.text\.nv_timed\.{group}\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)"
    return [(int(a, 16), int(s, 16)) for a, s in re.findall(pattern, link_map, re.M)]


def group_range(link_map, group):
    ((start, size),) = input_sections(link_map, group)
    return start, start + size


def functions(elf):
    """{name: address} of the image's functions (LTO suffixes such as .constprop.0 dropped)."""
    out = subprocess.run([CROSS + "nm", str(elf)], capture_output=True, text=True, check=True).stdout
    return {
        name.split(".")[0]: int(addr, 16)
        for addr, kind, name in (line.split() for line in out.splitlines() if len(line.split()) == 3)
        if kind in "tT"
    }


def calls_out(elf, start, end, may_call=frozenset()):
    """Instructions in [start, end) that transfer control outside it, other than direct calls of
    the functions in ``may_call``: (address, text)."""
    out = subprocess.run(
        [
            CROSS + "objdump",
            "-d",
            "--no-show-raw-insn",
            f"--start-address={start:#x}",
            f"--stop-address={end:#x}",
            str(elf),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    leaving = []
    for line in out.splitlines():
        jump = re.match(r"\s*([0-9a-f]+):\s+(jal|j)\s+(?:\w+,)?([0-9a-f]+) <([^>+]+)", line)
        indirect = re.match(r"\s*([0-9a-f]+):\s+(jalr|jr)\b", line)
        if jump and not start <= int(jump[3], 16) < end and jump[4] not in may_call:
            leaving.append((int(jump[1], 16), line.strip()))
        elif indirect:
            leaving.append((int(indirect[1], 16), line.strip()))
    return leaving


@pytest.mark.parametrize("group", sorted(ENTRIES))
def test_each_timed_group_is_one_piece_of_the_image(image, group):
    _, link_map = image
    sections = input_sections(link_map, group)
    assert len(sections) == 1, f"{group}: {len(sections)} pieces in the image, {sections}"
    assert sections[0][1] > 0


@pytest.mark.parametrize("group", sorted(ENTRIES))
def test_timed_entries_are_functions_of_their_group(image, group):
    # An entry inlined into its untimed caller would take the timed loop out of the group.
    elf, link_map = image
    start, end = group_range(link_map, group)
    found = functions(elf)
    for entry in ENTRIES[group]:
        assert entry in found, f"{entry} is not a function of the image (inlined into its caller?)"
        assert start <= found[entry] < end, f"{entry} at {found[entry]:#x}, outside {group} [{start:#x}, {end:#x})"


@pytest.mark.parametrize("group", sorted(ENTRIES))
def test_timed_code_calls_nothing_outside_its_group(image, group):
    elf, link_map = image
    start, end = group_range(link_map, group)
    assert calls_out(elf, start, end, MAY_CALL[group]) == []


def test_the_via_benchmark_group_fits_the_instruction_cache(image):
    _, link_map = image
    start, end = group_range(link_map, "via_bench")
    lines = (end - 1) // ICACHE_LINE_BYTES - start // ICACHE_LINE_BYTES + 1
    assert lines * ICACHE_LINE_BYTES <= ICACHE_BYTES, f"via_bench spans {lines} cache lines"


def test_the_call_check_sees_a_call_that_leaves(image):
    # The check above on a range it must reject: the whole of the image's code calls the C library.
    elf, link_map = image
    start, end = group_range(link_map, "via_bench")
    everything = calls_out(elf, 0, max(functions(elf).values()) + 4)
    assert any(not start <= address < end for address, _ in everything)


def data_symbols(elf):
    """{name: size} of the image's data and bss objects (LTO suffixes such as .0 dropped)."""
    out = subprocess.run([CROSS + "nm", "-S", str(elf)], capture_output=True, text=True, check=True).stdout
    return {
        fields[3].split(".")[0]: int(fields[1], 16)
        for fields in (line.split() for line in out.splitlines())
        if len(fields) == 4 and fields[2] in "bBdD"
    }


def test_the_via_managers_vi_table_follows_the_cards_vis():
    """The SoC tells the build its card's VIs (NUMAVIA_VIA_VIS), so the manager's RAM grows by one
    VI's state per VI, and an image for a card without VIA carries neither the manager nor its table
    (the smallest board has 8 KiB of RAM)."""

    def image(config):
        return build_firmware(sim.build_soc(config, log=lambda m: None), log=lambda m: None).with_name("firmware.elf")

    few, many = sim.SimConfig(via_vis=2), sim.SimConfig()
    table = {config.via_vis: data_symbols(image(config))["via"] for config in (few, many)}
    grown = table[many.via_vis] - table[few.via_vis]
    assert grown > 0 and grown % (many.via_vis - few.via_vis) == 0, table
    without_via = image(sim.SimConfig(via=False))
    assert "via" not in data_symbols(without_via)
    manager = [name for name in functions(image(many)) if name.startswith("nv_via_")]
    assert manager and not [name for name in functions(without_via) if name.startswith("nv_via_")]
