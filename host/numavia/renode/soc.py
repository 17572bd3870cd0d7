"""What a Renode platform needs to know about the node SoC, read from LiteX's ``csr.json``.

Everything the generators emit (addresses, sizes, interrupt lines, the CPU type, the clock) comes
from here, so a change to the SoC (a new peripheral, a moved region) reaches the Renode files the
next time they are generated, and a peripheral Renode cannot model stops generation with a clear
message instead of being left out silently.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from numavia.base.errors import NumaviaError


class RenodeError(NumaviaError):
    """A Renode file cannot be generated or run; the message says why in one line."""


#: LiteX places each CSR block in its own page of this many bytes (``SoCCSRHandler.paging``).
CSR_PAGE_BYTES = 0x800

#: ``csr.json`` memory regions that are the card: its register window and the host port's
#: shared window. Both are served by the co-simulated card Verilog.
CARD_REGIONS = ("card", "shared")

#: Memory regions modelled as plain RAM in Renode (the ROM is RAM the script loads firmware into;
#: ``hostmem`` stands for the host's memory, where VIA descriptors and buffers live).
RAM_REGIONS = ("rom", "sram", "main_ram", "hostmem")

#: Regions that are a second window onto another region's RAM (``NumaviaSoC._add_host_memory``:
#: the CPU reaches host memory uncached there). Renode registers the one memory at both addresses.
ALIASED_REGIONS = {"hostmem_uncached": "hostmem"}

#: Where an Ethernet MAC is, by what csr.json holds: a LiteEth MAC with its own packet buffer
#: (``ethmac``), or the LiteEth MAC core between the card's VIA engine and the PHY (``via_mac``),
#: in which case frames enter and leave through the card.
ETHERNET_LITEX, ETHERNET_CARD = "litex", "card"

#: VexRiscv variants LiteX builds, and the ISA Renode's VexRiscv must emulate for each. Renode
#: wants the CSR and fence extensions spelled out.
VEXRISCV_ISA = {
    "minimal": "rv32i_zicsr_zifencei",
    "lite": "rv32im_zicsr_zifencei",
    "standard": "rv32im_zicsr_zifencei",
    "full": "rv32im_zicsr_zifencei",
}


@dataclass(frozen=True)
class Peripheral:
    """One CSR peripheral: its name in csr.json, CSR base and interrupt line (or None)."""

    name: str
    base: int
    irq: int | None = None


@dataclass(frozen=True)
class Region:
    name: str
    base: int
    size: int
    aliases: tuple = ()  # further base addresses of the same memory


@dataclass(frozen=True)
class SocDescription:
    cpu_variant: str
    clock_hz: int
    csr_data_width: int
    ram: tuple  # Region per RAM_REGIONS entry present
    card: tuple  # Region per CARD_REGIONS entry, in that order
    peripherals: tuple  # Peripheral per csr_bases entry, sorted by base
    ethernet_buffer: Region | None  # LiteEth's packet buffer (memories["ethmac"]), if any
    card_irq: int | None = None  # the card's interrupt line (csr.json card_interrupt), if it has one
    csr_registers: dict = field(default_factory=dict, compare=False)  # name -> address

    def register_offsets(self, peripheral):
        """``{register: offset from the block's base}`` of one CSR block's registers in csr.json."""
        p, prefix = self.peripheral(peripheral), f"{peripheral}_"
        return {
            name[len(prefix) :]: address - p.base
            for name, address in self.csr_registers.items()
            if name.startswith(prefix)
        }

    constants: dict = field(default_factory=dict, compare=False)

    @property
    def cpu_isa(self):
        return VEXRISCV_ISA[self.cpu_variant]

    def peripheral(self, name):
        for p in self.peripherals:
            if p.name == name:
                return p
        return None

    def region(self, name):
        for r in (*self.ram, *self.card):
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def ethernet(self):
        """ETHERNET_LITEX, ETHERNET_CARD or None (see those constants)."""
        if self.peripheral("ethmac") is not None:
            return ETHERNET_LITEX
        if self.peripheral("via_mac") is not None:
            return ETHERNET_CARD
        return None


def load_csr_json(path):
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RenodeError(f"{path} does not exist: build the SoC first (numavia renode does)") from None
    except json.JSONDecodeError as e:
        raise RenodeError(f"{path} is not valid JSON: {e}") from None


def describe(csr):
    """A :class:`SocDescription` of the ``csr.json`` contents ``csr`` (a dict)."""
    try:
        constants, memories, bases = csr["constants"], csr["memories"], csr["csr_bases"]
    except KeyError as e:
        raise RenodeError(f"csr.json has no {e.args[0]!r} section: not a LiteX csr.json") from None

    cpu_types = [k[len("config_cpu_type_") :] for k in constants if k.startswith("config_cpu_type_")]
    if cpu_types != ["vexriscv"]:
        raise RenodeError(
            f"the SoC's CPU is {', '.join(cpu_types) or 'not named'}; the Renode platform models a VexRiscv"
        )
    variants = [k[len("config_cpu_variant_") :] for k in constants if k.startswith("config_cpu_variant_")]
    if len(variants) != 1 or variants[0] not in VEXRISCV_ISA:
        raise RenodeError(f"VexRiscv variant {variants} has no Renode ISA mapping (known: {', '.join(VEXRISCV_ISA)})")

    known = set(RAM_REGIONS) | set(ALIASED_REGIONS) | set(CARD_REGIONS) | {"csr", "ethmac"}
    unknown = sorted(set(memories) - known)
    if unknown:
        raise RenodeError(
            f"memory region(s) {', '.join(unknown)} in csr.json have no Renode model: add them to numavia.renode.soc"
        )
    missing = [name for name in CARD_REGIONS if name not in memories]
    if missing:
        raise RenodeError(f"csr.json has no {', '.join(missing)} region: is the card in this SoC?")

    def region(name):
        aliases = []
        for alias, target in ALIASED_REGIONS.items():
            if target == name and alias in memories:
                if memories[alias]["size"] != memories[name]["size"]:
                    raise RenodeError(f"{alias} is a window onto {name} but their sizes differ")
                aliases.append(memories[alias]["base"])
        return Region(name, memories[name]["base"], memories[name]["size"], tuple(aliases))

    orphans = [alias for alias, target in ALIASED_REGIONS.items() if alias in memories and target not in memories]
    if orphans:
        raise RenodeError(f"{', '.join(orphans)} in csr.json without the region it is a window onto")

    peripherals = tuple(
        sorted(
            (Peripheral(name, base, constants.get(f"{name}_interrupt")) for name, base in bases.items()),
            key=lambda p: p.base,
        )
    )
    has_mac = "ethmac" in bases
    if has_mac != ("ethmac" in memories) or has_mac != ("ethphy" in bases):
        raise RenodeError(
            "csr.json has part of a LiteEth MAC (ethmac CSRs, ethmac buffer, ethphy CSRs must all be present)"
        )
    return SocDescription(
        cpu_variant=variants[0],
        clock_hz=int(constants["config_clock_frequency"]),
        csr_data_width=int(constants.get("config_csr_data_width", 8)),
        ram=tuple(region(name) for name in RAM_REGIONS if name in memories),
        card=tuple(region(name) for name in CARD_REGIONS),
        peripherals=peripherals,
        ethernet_buffer=region("ethmac") if has_mac else None,
        card_irq=constants.get(f"{CARD_REGIONS[0]}_interrupt"),
        csr_registers={name: r["addr"] for name, r in csr.get("csr_registers", {}).items()},
        constants=dict(constants),
    )
