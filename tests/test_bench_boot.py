"""`numavia bench boot`: image size and cycles to ready, per firmware, on the real RTL.

Without a Zephyr tree, the two kinds of image a node can boot are the bare-metal firmware in the
ROM and an image in main RAM that the ROM jumps to; the second is the bare-metal firmware linked
for main RAM, given as zephyr=PATH (tests/test_zephyr_firmware.py). The Zephyr figures are in
docs/zephyr.md.
"""

import json

import pytest
from support.ring_sim import build
from test_zephyr_firmware import ram_linked_firmware

from numavia.bench import boot

pytestmark = pytest.mark.slow


def test_sizes_and_boot_cycles_of_a_rom_and_a_main_ram_image(tmp_path):
    built = build(2)
    elf = ram_linked_firmware(built.soc_dir, tmp_path / "image")
    figures = boot.measure(["bare-metal", f"zephyr={elf}"], nodes=2, log=lambda m: None, run_root=tmp_path / "runs")
    rom, ram = figures["rows"]
    assert (rom["runs_from"], ram["runs_from"]) == ("rom", "main_ram")
    for row in (rom, ram):
        assert row["text"] > 0 and row["bss"] > 0 and row["image_bytes"] >= row["text"] + row["data"] - 64
        assert all(0 < c <= row["ready_cycles"] for c in row["ready_cycles_per_node"])
    # The same code from main RAM: the boot takes about as long (caches on both memories).
    assert 0.5 < ram["ready_cycles"] / rom["ready_cycles"] < 2
    text = boot.report(figures, tmp_path / "out")
    assert "| bare-metal" in text and "main_ram" in text
    saved = json.loads((tmp_path / "out" / "boot.json").read_text())
    assert saved["figures"]["rows"][0]["ready_cycles"] == rom["ready_cycles"]


def test_an_elf_the_size_tool_cannot_read_is_one_error(tmp_path):
    (tmp_path / "x.elf").write_bytes(b"not an elf")
    with pytest.raises(boot.NumaviaError, match="size"):
        boot.elf_sizes(tmp_path / "x.elf")
