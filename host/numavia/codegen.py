"""Generators from the interface definitions (``numavia.gateware.regmap``) to other languages.

* ``numavia_regs.h``: C header for the firmware (bare metal, Zephyr, unit tests);
* ``numavia_regs.py``: flat constants for scripts that run without this package;
* ``regmap.json``: a neutral description the Renode generator and external tools read;
* ``numavia_sci.h``: the SCI packet format, commands and coherence states (from ``sci_packet.py``);
* ``numavia_ucode.h`` and ``sci_ucode.lst``: the assembled SCI microcode for the firmware, and its
  listing.

Output is deterministic: the same definitions give the same bytes.
"""

import json
from pathlib import Path

from numavia.gateware import regmap

_HEADER_NOTE = "Generated from gateware/regmap.py by numavia.codegen: do not edit."


def _c_name(*parts):
    return "NV_" + "_".join(p.upper() for p in parts)


def _register_symbols(rmap):
    """(symbol, value, comment) for every block, register and field of ``rmap``."""
    for block in rmap.blocks:
        yield _c_name(block.name, "BASE"), block.base, f"block {block.name}: {block.doc}"
        for reg in block.registers:
            addr = block.base + reg.offset
            yield _c_name(block.name, reg.name), addr, f"{reg.access.value}: {reg.doc}"
            if reg.reset:
                yield _c_name(block.name, reg.name, "RESET"), reg.reset, None
            for f in reg.fields:
                yield _c_name(block.name, reg.name, f.name, "SHIFT"), f.lsb, f.doc or None
                yield _c_name(block.name, reg.name, f.name, "MASK"), f.mask, None


def _constants():
    major, minor, patch = regmap.HW_VERSION
    return [
        ("NV_CARD_ID", regmap.CARD_ID, "value of CTRL.ID on every card"),
        ("NV_HW_VERSION_MAJOR", major, "hardware interface version this build expects"),
        ("NV_HW_VERSION_MINOR", minor, None),
        ("NV_HW_VERSION_PATCH", patch, None),
        ("NV_NODE_ID_BITS", regmap.NODE_ID_BITS, None),
        ("NV_NODE_ID_MASK", (1 << regmap.NODE_ID_BITS) - 1, None),
        ("NV_CARD_WINDOW_SIZE", regmap.CARD.size, "bytes of the card's register window"),
    ]


def c_header():
    lines = [f"/* {_HEADER_NOTE} */", "#ifndef NUMAVIA_REGS_H", "#define NUMAVIA_REGS_H", ""]

    def emit(symbol, value, comment):
        text = f"#define {symbol:<44} 0x{value:08x}u"
        lines.append(text + (f"  /* {comment} */" if comment else ""))

    for item in _constants():
        emit(*item)
    lines.append("")
    for item in _register_symbols(regmap.CARD):
        emit(*item)
    lines += ["", "#endif /* NUMAVIA_REGS_H */", ""]
    return "\n".join(lines)


def python_module():
    lines = [f'"""{_HEADER_NOTE}"""', ""]
    for symbol, value, comment in [*_constants(), *_register_symbols(regmap.CARD)]:
        lines.append(f"{symbol[3:]} = {value:#x}" + (f"  # {comment}" if comment else ""))
    return "\n".join(lines) + "\n"


def regmap_json():
    def block(b):
        return {
            "name": b.name, "base": b.base, "size": b.size, "doc": b.doc,
            "registers": [{
                "name": r.name, "offset": r.offset, "access": r.access.value, "width": r.width,
                "reset": r.reset, "doc": r.doc,
                "fields": [{"name": f.name, "lsb": f.lsb, "width": f.width, "doc": f.doc}
                           for f in r.fields],
            } for r in b.registers],
        }

    doc = {
        "note": _HEADER_NOTE,
        "card_id": regmap.CARD_ID,
        "hw_version": list(regmap.HW_VERSION),
        "node_id_bits": regmap.NODE_ID_BITS,
        "window_size": regmap.CARD.size,
        "blocks": [block(b) for b in regmap.CARD.blocks],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def sci_header():
    """SCI packet format, commands and coherence states for C (firmware, tools)."""
    from numavia.gateware import coherence, sci_packet as sp
    lines = [f"/* {_HEADER_NOTE.replace('regmap.py', 'sci_packet.py and coherence.py')} */",
             "#ifndef NUMAVIA_SCI_H", "#define NUMAVIA_SCI_H", ""]
    lines += [f"#define NV_SCI_HEADER_SYMBOLS {sp.HEADER_SYMBOLS}u",
              f"#define NV_SCI_ECHO_HEADER_SYMBOLS {sp.ECHO_HEADER_SYMBOLS}u",
              f"#define NV_SCI_DATA_WORDS {sp.DATA_WORDS}u",
              f"#define NV_SCI_MAX_PACKET_SYMBOLS {sp.MAX_PACKET_SYMBOLS}u",
              f"#define NV_SCI_CRC_POLY 0x{sp.CRC_POLY:04x}u",
              f"#define NV_SCI_CRC_INIT 0x{sp.CRC_INIT:04x}u",
              f"#define NV_SCI_ADDR_HOME_SHIFT {sp.ADDR_HOME_SHIFT}u", "",
              "/* Header fields: bit position in the header vector (bit HEADER_BITS-1 is sent first). */"]
    for f in sp.HEADER_FIELDS:
        lsb, width = sp.field_positions()[f.name]
        lines.append(f"#define NV_SCI_{f.name.upper()}_LSB {lsb}u")
        lines.append(f"#define NV_SCI_{f.name.upper()}_WIDTH {width}u")
    for enum, prefix in ((sp.PacketType, "NV_SCI_PTYPE"), (sp.Command, "NV_SCI_CMD"), (sp.Status, "NV_SCI_STATUS"),
                         (sp.EchoStatus, "NV_SCI_ECHO"), (coherence.MemoryState, "NV_MSTATE"),
                         (coherence.CacheState, "NV_CSTATE")):
        lines.append("")
        lines += [f"#define {prefix}_{m.name} {int(m)}u" for m in enum]
    lines += ["", "#endif /* NUMAVIA_SCI_H */", ""]
    return "\n".join(lines)


def microcode_program():
    from numavia.gateware.microcode.assembler import assemble
    source = Path(regmap.__file__).parent / "microcode" / "sci.uasm"
    return assemble(source.read_text(), "gateware/microcode/sci.uasm")


OUTPUTS = {
    "numavia_regs.h": c_header,
    "numavia_regs.py": python_module,
    "regmap.json": regmap_json,
    "numavia_sci.h": sci_header,
    "numavia_ucode.h": lambda: microcode_program().c_array(),
    "sci_ucode.lst": lambda: microcode_program().listing,
}


def write_all(folder):
    """Write every generated file into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, generate in OUTPUTS.items():
        path = folder / name
        text = generate()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths
