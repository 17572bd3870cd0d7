"""Generators from the interface definitions (``numavia.base.regmap``) to other languages.

* ``numavia_regs.h``: C header for the firmware (bare metal, Zephyr, unit tests);
* ``numavia_regs.py``: flat constants for scripts that run without this package;
* ``regmap.json``: a neutral description the Renode generator and external tools read;
* ``numavia_sci.h``: the SCI packet format, commands and coherence states (from ``sci_packet.py``);
* ``numavia_ucode.h`` and ``sci_ucode.lst``: the assembled SCI microcode for the firmware, and its
  listing.
* ``numavia_via.h`` / ``numavia_via.py``: the VIA formats (descriptor, ATT, wire header, mailbox,
  management messages) as offsets, sizes, bit masks and constants, from the ``via_*`` modules.
* ``numavia_pushpull.h``: the push-pull messaging library's header, layout and benchmark words
  (``numavia.base.pushpull_format``).

Output is deterministic: the same definitions give the same bytes.
"""

import json
from pathlib import Path

from numavia.base import (
    bytestruct,
    coherence,
    paths,
    pushpull_format,
    regmap,
    sci_packet,
    via_att,
    via_descriptor,
    via_frame,
    via_mailbox,
)
from numavia.base.microcode.assembler import assemble

_HEADER_NOTE = "Generated from host/numavia/base/regmap.py by numavia.base.codegen: do not edit."
_VIA_NOTE = "Generated from host/numavia/base/via_*.py by numavia.base.codegen: do not edit."

#: The definition modules every generated file depends on (build caches key on them).
SOURCES = tuple(
    Path(mod.__file__)
    for mod in (
        regmap,
        coherence,
        sci_packet,
        bytestruct,
        via_att,
        via_descriptor,
        via_frame,
        via_mailbox,
        pushpull_format,
    )
) + (Path(__file__),)


def _c_name(*parts):
    return "NV_" + "_".join(p.upper() for p in parts)


def _register_symbols(rmap):
    """(symbol, value, comment) for every block, register and field of ``rmap``.

    A register of an array gets the address of element 0; ``<ARRAY>_STRIDE`` steps to the others.
    """
    for block in rmap.blocks:
        yield _c_name(block.name, "BASE"), block.base, f"block {block.name}: {block.doc}"
        yield _c_name(block.name, "SIZE"), block.size, "bytes of the block in the window"
        for reg in block.registers:
            yield from _one_register(block.name, reg, block.base + reg.offset)
        for array in block.arrays:
            yield _c_name(block.name, array.name, "BASE"), block.base + array.offset, f"array: {array.doc}"
            yield _c_name(block.name, array.name, "STRIDE"), array.stride, None
            yield _c_name(block.name, array.name, "CAPACITY"), array.count, "elements the map reserves"
            for reg in array.registers:
                yield from _one_register(f"{block.name}_{array.name}", reg, block.base + array.offset + reg.offset)


def _one_register(prefix, reg, addr):
    yield _c_name(prefix, reg.name), addr, f"{reg.access.value}: {reg.doc}"
    if reg.reset:
        yield _c_name(prefix, reg.name, "RESET"), reg.reset, None
    for f in reg.fields:
        yield _c_name(prefix, reg.name, f.name, "SHIFT"), f.lsb, f.doc or None
        yield _c_name(prefix, reg.name, f.name, "MASK"), f.mask, None


def _array_macros(rmap):
    """C macros ``NV_<BLOCK>_<ARRAY>_<REG>_AT(i)``: the register of element ``i``."""
    for block in rmap.blocks:
        for array in block.arrays:
            for reg in array.registers:
                name = _c_name(block.name, array.name, reg.name)
                yield (f"#define {name}_AT(i) ({name} + (uint32_t)(i) * {_c_name(block.name, array.name, 'STRIDE')})")


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


def _c_define(symbol, value, comment):
    text = f"#define {symbol:<44} 0x{value:08x}u"
    return text + (f"  /* {comment} */" if comment else "")


def c_header():
    lines = [f"/* {_HEADER_NOTE} */", "#ifndef NUMAVIA_REGS_H", "#define NUMAVIA_REGS_H", "", "#include <stdint.h>", ""]
    for item in _constants():
        lines.append(_c_define(*item))
    lines.append("")
    for item in _register_symbols(regmap.CARD):
        lines.append(_c_define(*item))
    lines.append("")
    lines += list(_array_macros(regmap.CARD))
    lines += ["", "#endif /* NUMAVIA_REGS_H */", ""]
    return "\n".join(lines)


def python_module():
    lines = [f'"""{_HEADER_NOTE}"""', ""]
    for symbol, value, comment in [*_constants(), *_register_symbols(regmap.CARD)]:
        lines.append(f"{symbol[3:]} = {value:#x}" + (f"  # {comment}" if comment else ""))
    return "\n".join(lines) + "\n"


def regmap_json():
    def registers(regs):
        return [
            {
                "name": r.name,
                "offset": r.offset,
                "access": r.access.value,
                "width": r.width,
                "reset": r.reset,
                "doc": r.doc,
                "fields": [{"name": f.name, "lsb": f.lsb, "width": f.width, "doc": f.doc} for f in r.fields],
            }
            for r in regs
        ]

    def block(b):
        return {
            "name": b.name,
            "base": b.base,
            "size": b.size,
            "doc": b.doc,
            "registers": registers(b.registers),
            "arrays": [
                {
                    "name": a.name,
                    "offset": a.offset,
                    "count": a.count,
                    "stride": a.stride,
                    "doc": a.doc,
                    "registers": registers(a.registers),
                }
                for a in b.arrays
            ],
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
    sp = sci_packet
    lines = [
        f"/* {_HEADER_NOTE.replace('regmap.py', 'sci_packet.py and coherence.py')} */",
        "#ifndef NUMAVIA_SCI_H",
        "#define NUMAVIA_SCI_H",
        "",
    ]
    lines += [
        f"#define NV_SCI_HEADER_SYMBOLS {sp.HEADER_SYMBOLS}u",
        f"#define NV_SCI_SHORT_HEADER_SYMBOLS {sp.SHORT_HEADER_SYMBOLS}u",
        f"#define NV_SCI_ECHO_HEADER_SYMBOLS {sp.ECHO_HEADER_SYMBOLS}u",
        f"#define NV_SCI_DATA_WORDS {sp.DATA_WORDS}u",
        f"#define NV_SCI_MAX_PACKET_SYMBOLS {sp.MAX_PACKET_SYMBOLS}u",
        f"#define NV_SCI_CRC_POLY 0x{sp.CRC_POLY:04x}u",
        f"#define NV_SCI_CRC_INIT 0x{sp.CRC_INIT:04x}u",
        f"#define NV_SCI_ADDR_HOME_SHIFT {sp.ADDR_HOME_SHIFT}u",
        "",
        "/* Header fields: bit position in the header vector (bit HEADER_BITS-1 is sent first). */",
    ]
    for f in sp.HEADER_FIELDS:
        lsb, width = sp.field_positions()[f.name]
        lines.append(f"#define NV_SCI_{f.name.upper()}_LSB {lsb}u")
        lines.append(f"#define NV_SCI_{f.name.upper()}_WIDTH {width}u")
    for enum, prefix in (
        (sp.PacketType, "NV_SCI_PTYPE"),
        (sp.Command, "NV_SCI_CMD"),
        (sp.Status, "NV_SCI_STATUS"),
        (sp.EchoStatus, "NV_SCI_ECHO"),
        (coherence.MemoryState, "NV_MSTATE"),
        (coherence.CacheState, "NV_CSTATE"),
    ):
        lines.append("")
        lines += [f"#define {prefix}_{m.name} {int(m)}u" for m in enum]
    lines += ["", "#endif /* NUMAVIA_SCI_H */", ""]
    return "\n".join(lines)


def microcode_program():
    source = paths.microcode_source()
    return assemble(source.read_text(), "host/numavia/base/microcode/sci.uasm")


# --- VIA formats ----------------------------------------------------------------------------------

VIA_STRUCTS = (
    via_descriptor.CONTROL_SEGMENT,
    via_descriptor.ADDRESS_SEGMENT,
    via_descriptor.DATA_SEGMENT,
    via_descriptor.CQ_ENTRY,
    via_att.L1_ENTRY,
    via_att.L2_ENTRY,
    via_frame.HEADER,
    via_mailbox.MGMT_MESSAGE,
    via_mailbox.BENCH_STREAM_ARG,
)
VIA_CONSTANT_GROUPS = (
    via_descriptor.CONTROL_OP,
    via_descriptor.STATUS_OP,
    via_frame.OP,
    via_frame.NAK,
    via_mailbox.RESULT,
    via_mailbox.BENCH_OP,
    via_mailbox.MGMT_TYPE,
)


def _via_symbols():
    """(symbol, value, comment) of every VIA format definition."""
    yield "NV_DESCRIPTOR_ALIGN", via_descriptor.DESCRIPTOR_ALIGN, "descriptor alignment in host memory"
    yield "NV_DESC_STATUS_ERROR_MASK", via_descriptor.STATUS_ERROR_MASK, "every error bit of STATUS"
    yield "NV_ATT_PAGE_SHIFT", via_att.PAGE_SHIFT, "ATT page size is 1 << this"
    yield "NV_ATT_PAGE_SIZE", via_att.PAGE_SIZE, None
    yield "NV_ATT_L1_WORDS", via_att.L1_WORDS, "32-bit words per level-1 entry"
    yield "NV_ATT_L1_STRIDE_WORDS", via_att.L1_STRIDE_WORDS, "ATT_ADDR words between level-1 entries"
    yield "NV_ETHERTYPE", via_frame.ETHERTYPE, "IEEE local experimental EtherType"
    yield "NV_FRAME_VIA_HEADER_SIZE", via_frame.VIA_HEADER_SIZE, "VIA header bytes in the Ethernet payload"
    yield "NV_MGMT_PAYLOAD_MAX", via_frame.MGMT_PAYLOAD_MAX, "bytes of a management frame's payload"
    yield "NV_MTU_DEFAULT", via_frame.MTU_DEFAULT, None
    yield "NV_MTU_JUMBO", via_frame.MTU_JUMBO, None
    yield "NV_MTU_MIN", via_frame.MTU_MIN, None
    yield "NV_MBOX_NONE", via_mailbox.NONE, "an absent optional argument"
    yield "NV_MBOX_BENCH_ARG_WAKE_CQ", via_mailbox.BENCH_ARG_WAKE_CQ, "0: poll receives; n: sleep on CQ n-1"
    yield "NV_MBOX_BENCH_ARG_STREAM", via_mailbox.BENCH_ARG_STREAM, "a stream's shape (NV_BENCH_STREAM_ARG_*)"
    yield "NV_MBOX_BENCH_STREAM_DEPTH", via_mailbox.BENCH_STREAM_DEPTH, "a stream's messages in flight per VI, at most"
    yield "NV_MBOX_BENCH_STREAM_RECEIVES", via_mailbox.BENCH_STREAM_RECEIVES, "a send stream's receives per VI"
    for name, value in regmap.VI_STATES:
        yield f"NV_VI_STATE_{name}", value, None
    for struct in VIA_STRUCTS:
        yield from _struct_symbols(struct)
    for group in VIA_CONSTANT_GROUPS:
        for name, value, doc in group.values:
            yield _c_name(group.name, name), value, doc or None
    for cmd in via_mailbox.COMMANDS:
        yield _c_name("MBOX", cmd.name), cmd.code, cmd.doc
        for i, arg in enumerate(cmd.args):
            yield _c_name("MBOX", cmd.name, "ARG", arg), i, None
        for i, res in enumerate(cmd.results):
            yield _c_name("MBOX", cmd.name, "RES", res), i, None


def _struct_symbols(struct):
    yield _c_name(struct.name, "SIZE"), struct.size, struct.doc
    for f in struct.ordered_fields():
        yield _c_name(struct.name, f.name, "OFFSET"), f.offset, f.doc or None
        yield _c_name(struct.name, f.name, "BYTES"), f.size, None
        for b in f.bits:
            yield _c_name(struct.name, f.name, b.name, "SHIFT"), b.lsb, b.doc or None
            yield _c_name(struct.name, f.name, b.name, "MASK"), b.mask, None


def via_c_header():
    lines = [f"/* {_VIA_NOTE} */", "#ifndef NUMAVIA_VIA_H", "#define NUMAVIA_VIA_H", ""]
    lines += [_c_define(*item) for item in _via_symbols()]
    lines += ["", "#endif /* NUMAVIA_VIA_H */", ""]
    return "\n".join(lines)


def via_python_module():
    """Standalone module: the constants, plus ``STRUCTS`` and ``encode``/``decode`` for the records."""
    lines = [f'"""{_VIA_NOTE}"""', ""]
    for symbol, value, comment in _via_symbols():
        lines.append(f"{symbol[3:]} = {value:#x}" + (f"  # {comment}" if comment else ""))
    lines += ["", "# name: (size, {field: (offset, size)})", "STRUCTS = {"]
    for struct in VIA_STRUCTS:
        fields = ", ".join(f"{f.name!r}: ({f.offset}, {f.size})" for f in struct.ordered_fields())
        lines.append(f"    {struct.name!r}: ({struct.size}, {{{fields}}}),")
    lines += [
        "}",
        "",
        "",
        "def encode(struct, **values):",
        "    size, fields = STRUCTS[struct]",
        "    data = bytearray(size)",
        "    for name, value in values.items():",
        "        offset, width = fields[name]",
        "        data[offset:offset + width] = int(value).to_bytes(width, 'little')",
        "    return bytes(data)",
        "",
        "",
        "def decode(struct, data):",
        "    size, fields = STRUCTS[struct]",
        "    return {name: int.from_bytes(bytes(data[o:o + w]), 'little') for name, (o, w) in fields.items()}",
        "",
    ]
    return "\n".join(lines)


def pushpull_c_header():
    lines = [
        "/* Generated from host/numavia/base/pushpull_format.py by numavia.base.codegen: do not edit. */",
        "#ifndef NUMAVIA_PUSHPULL_FORMAT_H",
        "#define NUMAVIA_PUSHPULL_FORMAT_H",
        "",
    ]
    items = list(_struct_symbols(pushpull_format.HEADER)) + list(pushpull_format.constants())
    for group in (pushpull_format.SCHEME, pushpull_format.KIND, pushpull_format.BENCH_OP, pushpull_format.FLAGS):
        items += [(_c_name(group.name, name), value, doc or None) for name, value, doc in group.values]
    lines += [_c_define(*item) for item in items]
    lines += ["", "#endif /* NUMAVIA_PUSHPULL_FORMAT_H */", ""]
    return "\n".join(lines)


OUTPUTS = {
    "numavia_regs.h": c_header,
    "numavia_regs.py": python_module,
    "regmap.json": regmap_json,
    "numavia_sci.h": sci_header,
    "numavia_ucode.h": lambda: microcode_program().c_array(),
    "sci_ucode.lst": lambda: microcode_program().listing,
    "numavia_via.h": via_c_header,
    "numavia_via.py": via_python_module,
    "numavia_pushpull.h": pushpull_c_header,
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
