"""Zephyr devicetree overlay for the card's SoC, generated from the SoC's ``csr.json``.

Zephyr's ``litex_vexriscv`` board describes a generic LiteX SoC; a real SoC moves its peripherals
around and leaves some out. LiteX's ``litex_json2dts_zephyr`` flow fixes that with an overlay made
from ``csr.json``; this module does the same for the Numavia node SoC and adds the card:

* LiteX peripherals, with the board labels and conventions of ``litex_json2dts_zephyr`` (one
  ``reg`` entry per CSR, named in ``reg-names``; ``interrupts`` from ``<name>_interrupt``), the
  RAM the application runs from, and ``status = "disabled"`` for every board peripheral the SoC
  does not have (the board enables them, and their drivers would poke empty address space). The
  board differs between Zephyr releases (v3.5 has no ``cpu0`` or ``ctrl0`` label, v4.0 enables
  more peripherals), so given the Zephyr tree (:func:`read_tree`; the build script passes the
  tree it builds with) the overlay names only labels that tree defines and disables exactly what
  its board enables and the SoC lacks; without it, the labels LiteX's flow knows are assumed;
* the card: a ``numavia,card`` node for its register window (and the shared-memory and host-memory
  windows) with one child per register block of ``host/numavia/base/regmap.py``, at the window's base from
  ``csr.json`` plus the block's base from the register map, each block's event counters, and the
  card's interrupt on the VIA engine's node (the blocks of the VIA engine are disabled for a card
  built without it, which has no interrupt either).

Nothing in the output is written down by hand: addresses and interrupts come from ``csr.json``,
the card's layout from the register map. We generate the LiteX part ourselves rather than calling
``litex_json2dts_zephyr.generate_dts_config`` because that function drops an interrupt numbered 0
(``if irq``), and the node SoC's UART is interrupt 0; we still take LiteX's table of which LiteX
core maps to which board label, so the two flows agree on names.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from litex.tools import litex_json2dts_zephyr as litex_zephyr

from numavia.base import regmap
from numavia.base.errors import NumaviaError

#: csr.json memory regions of the card (see soc/card_soc.py): its register window, then the ones
#: the card's node is given when the SoC has them: the window through which the card serves
#: shared memory (host port), and the RAM standing for host memory that the VIA engine reaches by
#: DMA, cached and (for the firmware, which must see what the DMA wrote) uncached.
CARD_REGION = "card"
CARD_EXTRA_REGIONS = ("shared", "hostmem", "hostmem_uncached")
#: The RAM Zephyr is linked into on litex_vexriscv (the board's ``zephyr,sram``).
RAM_REGION = "main_ram"
RAM_LABEL = "ram0"
#: The CPU node, by path: only later releases label it ``cpu0``.
CPU_NODE = "&{/cpus/cpu@0}"
BOARD = "litex_vexriscv"
#: The CSRs Zephyr's LiteX drivers look up by name (DT_INST_REG_ADDR_BY_NAME) in v3.5 and v4.0: a
#: SoC without one of them builds, then hangs or reads nonsense; the timer's uptime registers are
#: the system clock's cycle counter.
DRIVER_CSRS = {
    "uart": ("rxtx", "txfull", "rxempty", "ev_status", "ev_pending", "ev_enable", "txempty", "rxfull"),
    "timer0": (
        "load",
        "reload",
        "en",
        "update_value",
        "value",
        "ev_status",
        "ev_pending",
        "ev_enable",
        "uptime_latch",
        "uptime_cycles",
    ),
}
#: Subsystems the board's defconfig turns on for peripherals (board labels) a SoC may lack: without
#: them, the subsystem has no driver left and its library no sources, so the fragment turns it off.
BOARD_SUBSYSTEMS = {"CLOCK_CONTROL": ("clock0", "clk0", "clk1"), "GPIO": ("gpio_out", "gpio_in")}
#: Kconfig symbol of the SoC's CSR data width (older releases only; later ones support 32 bits alone).
CSR_WIDTH_SYMBOL = "LITEX_CSR_DATA_WIDTH"

#: Devicetree node of each register block: (compatible, node name, label). A block added to the
#: register map must be added here too (generation fails until it is), with a binding in
#: firmware/zephyr/dts/bindings and a driver.
BLOCK_NODES = {
    "ctrl": ("numavia,card-control", "control", "numavia_ctrl"),
    "lac": ("numavia,local-access-controller", "local-access-controller", "numavia_lac"),
    "rac": ("numavia,remote-access-controller", "remote-access-controller", "numavia_rac"),
    "ring": ("numavia,ring-link", "ring-link", "numavia_ring"),
    "via": ("numavia,via-engine", "via-engine", "numavia_via"),
    "doorbell": ("numavia,via-doorbells", "via-doorbells", "numavia_via_doorbells"),
}
CARD_COMPATIBLE = "numavia,card"
CARD_LABEL = "numavia_card"


class OverlayError(NumaviaError):
    pass


def block_counters(block):
    """``(offset in the block, [names])`` of ``block``'s event counters, or ``None``.

    The register map lists each block's counters as ``<BLOCK>_COUNTERS``, laid out as consecutive
    32-bit registers; the devicetree carries the first offset and the names so that one driver
    routine reads the counters of any block.
    """
    counters = getattr(regmap, f"{block.name.upper()}_COUNTERS", None)
    if not counters:
        return None
    offsets = [block.register(name).offset for name, _ in counters]
    if offsets != list(range(offsets[0], offsets[0] + 4 * len(offsets), 4)):
        raise OverlayError(f"block {block.name}: counters are not consecutive registers")
    return offsets[0], [name.lower() for name, _ in counters]


def _litex_cores():
    """``(csr name, board label, disable when absent)`` of the LiteX cores litex_json2dts_zephyr
    maps to board nodes."""
    for name, params in litex_zephyr.overlay_handlers.items():
        if name in ("cpu", RAM_REGION):
            continue
        yield name, params.get("alias", name), params.get("disable_handler", True)


def board_enabled_labels(board_dts):
    """Labels a board .dts turns on with ``&label { ... status = "okay"; ... };``."""
    return sorted(set(re.findall(r'&(\w+)\s*\{[^{}]*status\s*=\s*"okay"', board_dts)))


def defined_labels(dts):
    """Node labels a devicetree source defines (``label: node@addr {``)."""
    return set(re.findall(r"^\s*(\w+):\s*[\w,.@-]+\s*\{", dts, flags=re.M))


@dataclass(frozen=True)
class ZephyrTree:
    """What the overlay needs to know of the Zephyr tree it is built with."""

    board_dts: Path
    labels: frozenset  # labels the board's devicetree defines (its .dts and the .dtsi it includes)
    enabled: tuple  # labels the board turns on
    csr_width_symbol: bool  # the tree's SoC has CONFIG_LITEX_CSR_DATA_WIDTH


def read_tree(zephyr_base):
    """The litex_vexriscv board of the Zephyr tree at ``zephyr_base`` (boards/riscv in v3.5,
    boards/enjoydigital from v3.7 on): its labels, what it enables, its SoC's Kconfig."""
    base = Path(zephyr_base)
    boards = sorted((base / "boards").glob(f"**/{BOARD}/{BOARD}.dts")) if base.is_dir() else []
    if not boards:
        raise OverlayError(f"{base} has no {BOARD} board: not a Zephyr tree, or one without LiteX support")
    board = boards[0]
    include_dirs = [board.parent, base / "dts" / "riscv", base / "dts" / "common", base / "dts"]
    labels, pending, seen = set(), [board], set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        text = path.read_text()
        labels |= defined_labels(text)
        for name in re.findall(r'^#include\s*[<"]([^>"]+\.dtsi)[>"]', text, flags=re.M):
            found = [d / name for d in include_dirs if (d / name).exists()]
            if not found:
                raise OverlayError(f"{path}: cannot find the included {name} in the Zephyr tree")
            pending.append(found[0])
    symbol = re.compile(rf"^config {CSR_WIDTH_SYMBOL}$", re.M)
    width_symbol = any(symbol.search(p.read_text()) for p in (base / "soc").glob("**/Kconfig*"))
    return ZephyrTree(board, frozenset(labels), tuple(board_enabled_labels(board.read_text())), width_symbol)


def _csr_registers(csr, name):
    """The CSRs of core ``name`` in address order: ``[(short name, address, bytes)]``."""
    regs = [
        (reg[len(name) + 1 :], p["addr"], 4 * p["size"])
        for reg, p in csr["csr_registers"].items()
        if reg.startswith(name + "_")
    ]
    return sorted(regs, key=lambda r: r[1])


def _cells(*values):
    return "<" + " ".join(f"0x{v:x}" if v > 9 else str(v) for v in values) + ">"


def _reg_lines(entries, indent):
    """``reg``/``reg-names`` for ``[(name, address, size)]``."""
    pad = "\t" * indent
    regs = (",\n" + pad + "      ").join(_cells(a, s) for _, a, s in entries)
    names = ", ".join(f'"{n}"' for n, _, _ in entries)
    return [f"{pad}reg = {regs};", f"{pad}reg-names = {names};"]


def _interrupt(csr, name):
    return csr["constants"].get(f"{name}_interrupt")


def _check_driver_csrs(csr):
    for core, names in DRIVER_CSRS.items():
        have = {name for name, _, _ in _csr_registers(csr, core)}
        if not have:
            raise OverlayError(f"the SoC has no {core}: Zephyr on {BOARD} needs it")
        missing = [name for name in names if name not in have]
        if missing:
            raise OverlayError(
                f"the SoC's {core} lacks {', '.join(missing)}, which Zephyr's driver needs"
                + (" (LiteX: timer_uptime=True)" if "uptime_latch" in missing else "")
            )


def _given_to_zephyr(csr, tree):
    """``(csr name, label)`` of the LiteX cores the SoC has and the tree's board has a node for."""
    return [
        (name, label)
        for name, label, _ in _litex_cores()
        if _csr_registers(csr, name) and (tree is None or label in tree.labels)
    ]


def _litex_part(csr, tree):
    _check_driver_csrs(csr)
    lines = [
        "/* LiteX SoC: labels of Zephyr's litex_vexriscv board, as litex_json2dts_zephyr names them */",
        f"{CPU_NODE} {{",
        f"\tclock-frequency = <{csr['constants']['config_clock_frequency']}>;",
        "};",
    ]
    present = set()
    for name, label in _given_to_zephyr(csr, tree):
        regs = _csr_registers(csr, name)
        present.add(label)
        lines.append(f"&{label} {{")
        lines += _reg_lines(regs, 1)
        irq = _interrupt(csr, name)
        if irq is not None:
            lines.append(f"\tinterrupts = <{irq} 0>;")
        lines += ['\tstatus = "okay";', "};"]
    if tree is None:
        absent = [label for _, label, disable in _litex_cores() if disable and label not in present]
    else:
        absent = [label for label in tree.enabled if label not in present]
    for label in absent:
        lines += [f"&{label} {{", '\tstatus = "disabled";', "};"]
    ram = csr["memories"].get(RAM_REGION)
    if ram is None:
        raise OverlayError(f"csr.json has no {RAM_REGION} region: Zephyr needs RAM to run from")
    lines += [f"&{RAM_LABEL} {{", f"\treg = {_cells(ram['base'], ram['size'])};", "};"]
    return lines


def _card_part(csr):
    memories = csr["memories"]
    if CARD_REGION not in memories:
        raise OverlayError(f"csr.json has no '{CARD_REGION}' region: not a Numavia node SoC")
    window = memories[CARD_REGION]
    if window["size"] != regmap.CARD.size:
        raise OverlayError(
            f"the SoC maps {window['size']:#x} bytes for the card, the register map needs {regmap.CARD.size:#x}"
        )
    base = window["base"]
    regs = [("registers", base, window["size"])]
    regs += [(name, memories[name]["base"], memories[name]["size"]) for name in CARD_EXTRA_REGIONS if name in memories]

    lines = [
        "/* The Numavia card: window from csr.json, blocks from host/numavia/base/regmap.py */",
        "/ {",
        "\tsoc {",
        f"\t\t{CARD_LABEL}: numavia-card@{base:x} {{",
        f'\t\t\tcompatible = "{CARD_COMPATIBLE}";',
    ]
    lines += _reg_lines(regs, 3)
    # The card's interrupt is the VIA engine's (the firmware's work: mailbox, management frames);
    # a card without the engine has neither, and its VIA blocks get no driver.
    irq = _interrupt(csr, CARD_REGION)
    # Children carry bus addresses (identity ``ranges``), so every address in this file is one
    # the CPU uses and can be checked against csr.json as it stands.
    lines += ["\t\t\t#address-cells = <1>;", "\t\t\t#size-cells = <1>;", "\t\t\tranges;"]
    for block in regmap.CARD.blocks:
        if block.name not in BLOCK_NODES:
            raise OverlayError(
                f"register block '{block.name}' has no devicetree node: add it to "
                "numavia.soc.zephyr_overlay.BLOCK_NODES (and a binding and a driver)"
            )
        compatible, node, label = BLOCK_NODES[block.name]
        addr = base + block.base
        lines += [
            "",
            f"\t\t\t{label}: {node}@{addr:x} {{",
            f'\t\t\t\tcompatible = "{compatible}";',
            f"\t\t\t\treg = {_cells(addr, block.size)};",
        ]
        if block is regmap.VIA and irq is not None:
            lines += ["\t\t\t\tinterrupt-parent = <&intc0>;", f"\t\t\t\tinterrupts = <{irq} 0>;"]
        elif block in regmap.VIA_BLOCKS and irq is None:
            lines.append('\t\t\t\tstatus = "disabled";')
        counters = block_counters(block)
        if counters:
            offset, names = counters
            lines.append(f"\t\t\t\tevent-counters-offset = <0x{offset:x}>;")
            lines.append("\t\t\t\tevent-counters = " + ",\n\t\t\t\t\t".join(f'"{n}"' for n in names) + ";")
        lines.append("\t\t\t};")
    lines += ["\t\t};", "\t};", "};"]
    return lines


def _left_out(csr, tree):
    """What of csr.json the overlay gives Zephyr no node for, said in the overlay itself so that
    nothing is dropped silently (LiteX's flow prints it; a file keeps it)."""
    mapped_cores = {name for name, _ in _given_to_zephyr(csr, tree)}
    cores = sorted(set(csr["csr_bases"]) - mapped_cores)
    regions = sorted(set(csr["memories"]) - {RAM_REGION, CARD_REGION, *CARD_EXTRA_REGIONS})
    return [
        f"/* Not given to Zephyr: CSR cores {', '.join(cores) or 'none'}; "
        f"memory regions {', '.join(regions) or 'none'}. */"
    ]


def overlay(csr, source="csr.json", tree=None):
    """The overlay's text for the SoC described by the parsed ``csr.json`` ``csr``, for the Zephyr
    tree ``tree`` (:func:`read_tree`), or for the labels litex_json2dts_zephyr knows if ``None``."""
    board = f"{BOARD} of {tree.board_dts}" if tree else f"{BOARD} (labels as LiteX's flow names them)"
    head = [
        f"/* Generated by numavia.soc.zephyr_overlay from {source} and host/numavia/base/regmap.py: do not edit.",
        f" * Board: {board}. */",
        *_left_out(csr, tree),
        "",
    ]
    return "\n".join(head + _litex_part(csr, tree) + [""] + _card_part(csr)) + "\n"


def kconfig_fragment(csr, tree=None):
    """Kconfig settings the board needs for this SoC (what litex_json2dts_zephyr passes as -D)."""
    width = csr["constants"]["config_csr_data_width"]
    # The kernel's clock counts the timer's uptime cycles (the SoC's default says 100 MHz).
    lines = [f"CONFIG_SYS_CLOCK_HW_CYCLES_PER_SEC={csr['constants']['config_clock_frequency']}"]
    if tree is None or tree.csr_width_symbol:
        lines.append(f"CONFIG_{CSR_WIDTH_SYMBOL}={width}")
    elif width != 32:
        raise OverlayError(f"the SoC's CSRs are {width} bits wide; this Zephyr tree supports 32 only")
    present = {label for _, label in _given_to_zephyr(csr, tree)}
    for symbol, labels in BOARD_SUBSYSTEMS.items():
        if not present & set(labels):
            lines.append(f"CONFIG_{symbol}=n")
    return "".join(line + "\n" for line in lines)


def write(csr_json, out, conf=None, zephyr_base=None):
    """Write the overlay for ``csr_json`` to ``out`` (and the Kconfig fragment to ``conf``) for the
    Zephyr tree at ``zephyr_base`` (or, if ``None``, the labels LiteX's flow knows)."""
    csr_json = Path(csr_json)
    try:
        csr = json.loads(csr_json.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise OverlayError(f"cannot read {e.filename or csr_json}: {e}") from None
    tree = read_tree(zephyr_base) if zephyr_base else None
    text = overlay(csr, source=csr_json.name, tree=tree)
    Path(out).write_text(text)
    if conf:
        Path(conf).write_text(kconfig_fragment(csr, tree))
    return text
