"""Choosing the firmware a node runs (numavia.soc.firmware), without a Zephyr tree.

A Zephyr image runs from main RAM and the ROM only jumps to it: that path is checked here on the
real RTL with an image CI can build, the bare-metal firmware linked for main RAM instead of the ROM,
given as ``--firmware zephyr=PATH`` the way a user gives a Zephyr image built elsewhere. The
Zephyr image itself is tests/test_zephyr_image.py (needs a tree).
"""

import json
import struct
import subprocess

import pytest
from support.ring_sim import build

from numavia import cli
from numavia.soc import firmware, sim


def elf32(entry, segments, machine=243):
    """A minimal ELF file: header and PT_LOAD program headers ``(address, file bytes, memory bytes)``."""
    header = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
    header += struct.pack("<HHIIIIIHHHHHH", 2, machine, 1, entry, 52, 0, 0, 52, 32, len(segments), 40, 0, 0)
    phdrs = b"".join(struct.pack("<IIIIIIII", 1, 0, a, a, f, m, 7, 4) for a, f, m in segments)
    return header + phdrs


RAM = {"base": 0x4000_0000, "size": 0x4_0000}


def test_choices_parse_and_bad_ones_are_one_line():
    assert firmware.parse_choice("bare-metal") == ("bare-metal", None)
    assert firmware.parse_choice("zephyr-shell") == ("zephyr-shell", None)
    kind, path = firmware.parse_choice("zephyr=/x/zephyr.elf")
    assert kind == "zephyr" and str(path) == "/x/zephyr.elf"
    for bad in ("linux", "zephyr=", "bare-metal=/x.bin", ""):
        with pytest.raises(firmware.FirmwareError, match="choose bare-metal, zephyr, zephyr-shell or zephyr=PATH"):
            firmware.parse_choice(bad)


def test_the_command_line_refuses_a_bad_choice_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["sim", "--firmware", "linux"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--firmware 'linux': choose" in err[0]


def test_zephyr_without_a_tree_says_how_to_get_one(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("ZEPHYR_BASE", raising=False)
    with pytest.raises(firmware.FirmwareError, match="no Zephyr tree: set ZEPHYR_BASE"):
        firmware.build_zephyr(tmp_path)
    monkeypatch.setenv("ZEPHYR_BASE", str(tmp_path / "nowhere"))
    with pytest.raises(firmware.FirmwareError, match="is not a folder"):
        firmware.build_zephyr(tmp_path)


def test_a_given_image_must_be_linked_for_main_ram(tmp_path):
    elf = tmp_path / "zephyr.elf"
    elf.write_bytes(elf32(RAM["base"], [(RAM["base"], 0x100, 0x200)]))
    with pytest.raises(firmware.FirmwareError, match="zephyr.bin is missing"):
        firmware.zephyr_binary(elf, RAM)
    (tmp_path / "zephyr.bin").write_bytes(bytes(0x100))
    assert firmware.zephyr_binary(elf, RAM) == tmp_path / "zephyr.bin"
    elf.write_bytes(elf32(0, [(0, 0x100, 0x100)]))
    with pytest.raises(firmware.FirmwareError, match="starts at 0x0, not at main RAM"):
        firmware.zephyr_binary(elf, RAM)
    elf.write_bytes(elf32(RAM["base"], [(RAM["base"], 0x100, RAM["size"] + 4)]))
    with pytest.raises(firmware.FirmwareError, match="outside main RAM"):
        firmware.zephyr_binary(elf, RAM)
    elf.write_bytes(elf32(RAM["base"], [], machine=62))  # x86-64: not ours
    with pytest.raises(firmware.FirmwareError, match="neither a RISC-V 32-bit ELF nor a .bin"):
        firmware.zephyr_binary(elf, RAM)
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(RAM["size"] + 1))
    with pytest.raises(firmware.FirmwareError, match="main RAM holds"):
        firmware.zephyr_binary(big, RAM)
    with pytest.raises(firmware.FirmwareError, match="cannot read the Zephyr image"):
        firmware.zephyr_binary(tmp_path / "missing.elf", RAM)


def test_a_main_ram_image_puts_a_jump_in_the_rom(tmp_path):
    image = tmp_path / "zephyr.bin"
    image.write_bytes(b"\x01\x02\x03\x04\x05")
    rom = firmware.memory_images(
        firmware.Image(firmware.ZEPHYR, image, firmware.MAIN_RAM),
        {"main_ram": RAM, "rom": {"base": 0, "size": 0x1_0000}},
    )
    assert rom["main_ram"] == b"\x01\x02\x03\x04\x05"
    # lui t0, 0x40000; jalr zero, 0(t0)
    assert struct.unpack("<II", rom["rom"]) == (0x4000_02B7, 0x0002_8067)
    with pytest.raises(firmware.FirmwareError, match="not 4 KiB aligned"):
        firmware.jump_to(0x4000_0010)
    bare = firmware.memory_images(firmware.Image(firmware.BARE_METAL, image, firmware.ROM), {})
    assert bare == {"rom": b"\x01\x02\x03\x04\x05"}


def ram_linked_firmware(soc_dir, folder):
    """The bare-metal firmware linked to run from main RAM (code, data and stack), as a Zephyr
    image is: an ELF whose entry is main RAM's first byte, and its .bin beside it."""
    mems = json.loads((soc_dir / "csr.json").read_text())["memories"]
    ram = mems["main_ram"]
    code = ram["size"] // 2
    generated = folder / "generated"
    from numavia.base import codegen

    codegen.write_all(generated)
    subprocess.run(
        [
            "make",
            "-C",
            str(firmware.FIRMWARE_DIR / "baremetal"),
            "--no-print-directory",
            f"BUILD_DIR={folder}",
            f"SOC_DIR={soc_dir}",
            f"GEN_DIR={generated}",
            f"LITEX_INC={' '.join(map(str, firmware.litex_include_dirs()))}",
            f"ROM_BASE={ram['base']:#x}",
            f"ROM_SIZE={code:#x}",
            f"RAM_BASE={ram['base'] + code:#x}",
            f"RAM_SIZE={ram['size'] - code:#x}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    elf = folder / "zephyr.elf"
    (folder / "firmware.elf").rename(elf)
    (folder / "firmware.bin").rename(folder / "zephyr.bin")
    return elf


@pytest.mark.slow
def test_every_node_boots_an_image_from_main_ram_through_the_rom_jump(tmp_path):
    built = build(2)
    elf = ram_linked_firmware(built.soc_dir, tmp_path / "image")
    image = firmware.build(f"zephyr={elf}", built.soc_dir)
    assert image.region == firmware.MAIN_RAM and image.path == elf.with_suffix(".bin")
    run = sim.Build(built.config, built.soc_dir, built.model, image)
    code, summary = sim.run(run, tmp_path / "run", quiet=True, max_cycles=5_000_000)
    assert code == 0 and all(c is not None for c in summary["marker_cycles"]), summary
    for node in range(2):
        log = (tmp_path / "run" / f"node{node}.log").read_text()
        assert f"node id set to {node} (read back {node})" in log and "microcode loaded and verified" in log
