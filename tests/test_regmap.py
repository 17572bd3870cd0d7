"""The register map definition: its checks, and the code generated from it."""

import json
import re
import subprocess

import pytest

from numavia.base import codegen, regmap
from numavia.base.regmap import Access, Block, Field, Register, RegisterMap


def test_register_rejects_misaligned_offset():
    with pytest.raises(ValueError, match="word aligned"):
        Register("X", 0x2, Access.RW, "")


def test_register_rejects_overlapping_fields():
    with pytest.raises(ValueError, match="overlaps"):
        Register("X", 0, Access.RW, "", fields=(Field("A", 0, 4), Field("B", 3, 2)))


def test_register_rejects_reset_wider_than_register():
    with pytest.raises(ValueError, match="does not fit"):
        Register("X", 0, Access.RW, "", width=4, reset=0x10)


def test_block_rejects_shared_offsets():
    with pytest.raises(ValueError, match="share offset"):
        Block("b", 0, 0x10, "", registers=(Register("A", 0, Access.RW, ""), Register("B", 0, Access.RO, "")))


def test_map_rejects_overlapping_blocks():
    a = Block("a", 0x000, 0x100, "")
    b = Block("b", 0x000, 0x100, "")
    with pytest.raises(ValueError, match="overlap"):
        RegisterMap("m", 0x1000, (a, b))


def test_card_map_lookup():
    assert regmap.CARD.address("ctrl", "SCRATCH") == regmap.CTRL.base + regmap.CTRL.register("SCRATCH").offset
    with pytest.raises(KeyError):
        regmap.CARD.address("ctrl", "NOPE")


def test_c_header_matches_the_map_and_compiles(tmp_path):
    header = codegen.c_header()
    defines = dict(re.findall(r"#define (NV_\w+)\s+(0x[0-9a-f]+)u", header))
    for block in regmap.CARD.blocks:
        for reg in block.registers:
            assert int(defines[f"NV_{block.name.upper()}_{reg.name}"], 16) == block.base + reg.offset
    assert int(defines["NV_CARD_ID"], 16) == regmap.CARD_ID
    (tmp_path / "numavia_regs.h").write_text(header)
    (tmp_path / "t.c").write_text('#include "numavia_regs.h"\nint main(void){return NV_CTRL_ID;}\n')
    subprocess.run(["cc", "-Wall", "-Werror", "-c", "t.c"], cwd=tmp_path, check=True)


def test_python_module_and_json_agree_with_header(tmp_path):
    namespace = {}
    exec(codegen.python_module(), namespace)
    assert namespace["CTRL_NODE_ID"] == regmap.CARD.address("ctrl", "NODE_ID")
    doc = json.loads(codegen.regmap_json())
    ctrl = next(b for b in doc["blocks"] if b["name"] == "ctrl")
    assert {r["name"] for r in ctrl["registers"]} == {r.name for r in regmap.CTRL.registers}


def test_sci_header_matches_the_packet_definition_and_compiles(tmp_path):
    from numavia.base import sci_packet as sp

    header = codegen.sci_header()
    defines = dict(re.findall(r"#define (NV_\w+)\s+(\d+)u", header))
    for name, (lsb, width) in sp.field_positions().items():
        assert int(defines[f"NV_SCI_{name.upper()}_LSB"]) == lsb
        assert int(defines[f"NV_SCI_{name.upper()}_WIDTH"]) == width
    assert int(defines["NV_SCI_CMD_MREAD"]) == sp.Command.MREAD
    (tmp_path / "numavia_sci.h").write_text(header)
    (tmp_path / "t.c").write_text('#include "numavia_sci.h"\nint main(void){return NV_SCI_CMD_CPURGE;}\n')
    subprocess.run(["cc", "-Wall", "-Werror", "-c", "t.c"], cwd=tmp_path, check=True)


def test_generation_is_deterministic(tmp_path):
    first = [p.read_bytes() for p in codegen.write_all(tmp_path / "a")]
    second = [p.read_bytes() for p in codegen.write_all(tmp_path / "b")]
    assert first == second


# --- register arrays (the VIA block's VIs, completion queues, mailbox words) -------------------


def test_array_checks_its_stride_and_the_block_checks_overlaps():
    from numavia.base.regmap import RegisterArray

    with pytest.raises(ValueError, match="outside the stride"):
        RegisterArray("A", 0x0, 2, 0x8, "", registers=(Register("X", 0x8, Access.RW, ""),))
    arr = RegisterArray("A", 0x10, 4, 0x8, "", registers=(Register("X", 0x4, Access.RW, ""),))
    with pytest.raises(ValueError, match="overlap"):
        Block("b", 0, 0x100, "", registers=(Register("R", 0x18, Access.RW, ""),), arrays=(arr,))
    with pytest.raises(ValueError, match="outside the block"):
        Block("b", 0, 0x20, "", arrays=(arr,))
    assert arr.offset_of(3, "X") == 0x10 + 3 * 8 + 4
    assert arr.element_offset(3) == 0x10 + 3 * 8
    with pytest.raises(IndexError):
        arr.offset_of(4, "X")
    with pytest.raises(IndexError):
        arr.element_offset(-1)


def test_array_registers_in_the_generated_outputs(tmp_path):
    header = codegen.c_header()
    defines = dict(re.findall(r"#define (NV_\w+)\s+(0x[0-9a-f]+)u", header))
    pages = regmap.DOORBELL.array("VI")
    assert int(defines["NV_DOORBELL_VI_SQ_DOORBELL"], 16) == regmap.CARD.element_address(
        "doorbell", "VI", 0, "SQ_DOORBELL"
    )
    assert int(defines["NV_DOORBELL_VI_STRIDE"], 16) == pages.stride == regmap.DOORBELL_PAGE_BYTES
    assert int(defines["NV_VIA_VI_STRIDE"], 16) == regmap.VIA.array("VI").stride
    (tmp_path / "numavia_regs.h").write_text(header)
    (tmp_path / "t.c").write_text(
        '#include "numavia_regs.h"\n'
        f"int main(void){{return NV_DOORBELL_VI_RQ_DOORBELL_AT(3) == "
        f"{regmap.CARD.element_address('doorbell', 'VI', 3, 'RQ_DOORBELL')}u ? 0 : 1;}}\n"
    )
    subprocess.run(["cc", "-Wall", "-Werror", "t.c", "-o", "t"], cwd=tmp_path, check=True)
    assert subprocess.run([str(tmp_path / "t")]).returncode == 0
    namespace = {}
    exec(codegen.python_module(), namespace)
    assert namespace["VIA_CQ_STRIDE"] == regmap.VIA.array("CQ").stride
    doc = json.loads(codegen.regmap_json())
    via = next(b for b in doc["blocks"] if b["name"] == "via")
    assert {a["name"] for a in via["arrays"]} == {a.name for a in regmap.VIA.arrays}


def test_each_vi_has_its_own_doorbell_page_and_only_there():
    """Gap 1 of docs/reliability.md: a page holds one VI's doorbells and nothing else."""
    pages = regmap.DOORBELL.array("VI")
    page = regmap.DOORBELL_PAGE_BYTES
    assert page == 4096 and pages.stride == page and pages.count == regmap.VIA.array("VI").count
    assert {r.name for r in pages.registers} == {"SQ_DOORBELL", "RQ_DOORBELL", "SQ_REPOST"}
    bases = [regmap.CARD.element_base("doorbell", "VI", i) for i in range(pages.count)]
    assert all(b % page == 0 for b in bases) and all(b1 - b0 == page for b0, b1 in zip(bases, bases[1:]))
    # No other register of the window shares a page with any doorbell.
    doorbell_pages = set(bases)
    for block in regmap.CARD.blocks:
        if block is regmap.DOORBELL:
            continue
        assert block.base // page * page not in doorbell_pages
        assert (block.base + block.size - 1) // page * page not in doorbell_pages
    # The VI array of the privileged block no longer has doorbells (one address per doorbell).
    assert not {"SQ_DOORBELL", "RQ_DOORBELL"} & {r.name for r in regmap.VIA.array("VI").registers}
    assert regmap.CARD.size == regmap.DOORBELL.base + regmap.DOORBELL.size
