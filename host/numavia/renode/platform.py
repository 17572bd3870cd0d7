"""The node platform (``.repl``): VexRiscv, memories, LiteX peripherals and the co-simulated card.

Each CSR peripheral in csr.json is emitted by the handler registered for its name below; a name
without a handler stops generation (see :mod:`numavia.renode.soc`) so nothing is silently missing.
"""

from .soc import CSR_PAGE_BYTES, ETHERNET_CARD, RenodeError

#: The card's type in the platform: a co-simulated peripheral defined in RingLink.cs.
CARD_TYPE = "CoSimulated.NumaviaCard"
CARD_NAME = "card"

#: Renode's LiteEth model needs a PHY behind it; this MDIO status value reports the link up.
ETHPHY_LINK_UP_STATUS = 0x4400


def _hex(value):
    return f"{value:#x}"


def _litex_model(soc, name8, name32):
    """LiteX peripherals come in 8-bit and 32-bit CSR flavours; Renode has a model for each."""
    if soc.csr_data_width == 32:
        return name32
    if soc.csr_data_width == 8:
        return name8
    raise RenodeError(f"csr_data_width {soc.csr_data_width}: Renode models LiteX CSRs of 8 or 32 bits")


def _irq_line(irq):
    return [f"    -> cpu@{irq}"] if irq is not None else []


def _ctrl(soc, p):
    model = _litex_model(soc, "Miscellaneous.LiteX_SoC_Controller", "Miscellaneous.LiteX_SoC_Controller_CSR32")
    return [f"{p.name}: {model} @ sysbus {_hex(p.base)}"]


def _uart(soc, p):
    # Renode's LiteX_UART decodes its registers at a 4-byte stride: one model for both CSR widths.
    # Without a transmit FIFO each character leaves when written: the model's FIFO holds a line's
    # last characters until 200 ms of virtual time pass, minutes of a co-simulated ring.
    return [f"{p.name}: UART.LiteX_UART @ sysbus {_hex(p.base)}", "    txFifoCapacity: 0", *_irq_line(p.irq)]


#: Where Renode's LiteX_Timer_CSR32 (v1.16.1) decodes LiteX's timer registers, uptime included
#: (Zephyr's timer driver reads the kernel's cycles there): a timer laid out otherwise would have
#: Zephyr read other registers in Renode, so generation stops instead.
TIMER_CSR32_OFFSETS = {
    "load": 0x00,
    "reload": 0x04,
    "en": 0x08,
    "update_value": 0x0C,
    "value": 0x10,
    "ev_status": 0x14,
    "ev_pending": 0x18,
    "ev_enable": 0x1C,
    "uptime_latch": 0x20,
    "uptime_cycles": 0x24,
}


def _timer(soc, p):
    model = _litex_model(soc, "Timers.LiteX_Timer", "Timers.LiteX_Timer_CSR32")
    if soc.csr_data_width == 32:
        moved = [
            f"{name} at {offset:#x}"
            for name, offset in sorted(soc.register_offsets(p.name).items())
            if TIMER_CSR32_OFFSETS.get(name) != offset
        ]
        if moved:
            raise RenodeError(
                f"{p.name} in csr.json has {', '.join(moved)}, where Renode's {model} "
                f"decodes other registers (numavia.renode.platform.TIMER_CSR32_OFFSETS)"
            )
    return [f"{p.name}: {model} @ sysbus {_hex(p.base)}", f"    frequency: {soc.clock_hz}", *_irq_line(p.irq)]


def _ethmac(soc, p):
    """LiteEth: MAC CSRs, the packet buffer and the PHY's CSRs are three regions of one model."""
    model = _litex_model(soc, "Network.LiteX_Ethernet", "Network.LiteX_Ethernet_CSR32")
    buffer, phy = soc.ethernet_buffer, soc.peripheral("ethphy")
    registrations = "; ".join(
        [
            f"sysbus <{_hex(p.base)}, +{_hex(CSR_PAGE_BYTES)}>",
            f'sysbus new Bus.BusMultiRegistration {{ address: {_hex(buffer.base)}; size: {_hex(buffer.size)}; region: "buffer" }}',
            f'sysbus new Bus.BusMultiRegistration {{ address: {_hex(phy.base)}; size: {_hex(CSR_PAGE_BYTES)}; region: "phy" }}',
        ]
    )
    lines = [f"{p.name}: {model} @ {{ {registrations} }}"]
    for key, prop in (("ethmac_tx_slots", "numberOfWriteSlots"), ("ethmac_rx_slots", "numberOfReadSlots")):
        if key in soc.constants:
            lines.append(f"    {prop}: {soc.constants[key]}")
    lines += _irq_line(p.irq)
    lines += [
        "",
        "ethphy: Network.EthernetPhysicalLayer @ ethmac 0",
        f"    VendorSpecific1: {_hex(ETHPHY_LINK_UP_STATUS)}",
    ]
    return lines


def _covered_by_ethmac(soc, p):
    return []


def _silenced(why):
    """CSRs the firmware never reads: reads return 0 without a warning."""

    def emit(soc, p):
        return [
            f"// {p.name}: {why}",
            "sysbus:",
            "    init add:",
            f"        SilenceRange <{_hex(p.base)} {_hex(CSR_PAGE_BYTES)}>",
        ]

    return emit


#: csr.json CSR block name -> emitter of its .repl entry.
PERIPHERAL_HANDLERS = {
    "ctrl": _ctrl,
    "uart": _uart,
    "timer0": _timer,
    "ethmac": _ethmac,
    "ethphy": _covered_by_ethmac,
    "identifier_mem": _silenced("LiteX's SoC identifier, unused by the firmware"),
    # The LiteEth MAC core between the card's VIA engine and the PHY (preamble, FCS, padding):
    # in Renode the card's frames go to the switch directly, so only its counters would be here.
    "via_mac": _silenced("the VIA engine's LiteEth MAC core; frames reach the switch through the card"),
}


def card_registrations(soc):
    """The card's bus registrations: the register window and the shared window, absolute."""
    return "; ".join(f"sysbus <{_hex(r.base)}, +{_hex(r.size)}>" for r in soc.card)


def repl(soc, *, provenance):
    """The platform description text for ``soc`` (a :class:`SocDescription`)."""
    unknown = [p.name for p in soc.peripherals if p.name not in PERIPHERAL_HANDLERS]
    if unknown:
        raise RenodeError(
            f"CSR peripheral(s) {', '.join(unknown)} in csr.json have no Renode model: "
            f"add a handler to numavia.renode.platform.PERIPHERAL_HANDLERS"
        )
    entries = [
        [
            f"// Numavia node: generated by `numavia renode` from {provenance}. Do not edit.",
            f"// VexRiscv {soc.cpu_variant} at {soc.clock_hz} Hz; the card is its Verilog, co-simulated.",
        ]
    ]
    for r in soc.ram:
        where = (
            f"{{ {'; '.join(f'sysbus {_hex(b)}' for b in (r.base, *r.aliases))} }}"
            if r.aliases
            else f"sysbus {_hex(r.base)}"
        )
        entries.append([f"{r.name}: Memory.MappedMemory @ {where}", f"    size: {_hex(r.size)}"])
    entries.append(["cpu: CPU.VexRiscv @ sysbus", f'    cpuType: "{soc.cpu_isa}"'])
    for p in soc.peripherals:
        lines = PERIPHERAL_HANDLERS[p.name](soc, p)
        if lines:
            entries.append(lines)
    entries.append(
        [
            "// The card's gateware in Verilator through Renode's co-simulation (renode/cosim), clocked",
            "// by the ring (RingLink.cs) at this frequency; it decodes the absolute addresses of both",
            "// windows itself.",
            *(
                [
                    "// Its VIA engine's DMA reaches host memory on the system bus; the ring switches its",
                    "// Ethernet frames.",
                ]
                if soc.ethernet == ETHERNET_CARD
                else []
            ),
            *(
                ["// Its interrupt (the VIA engine's wake-up for the firmware) on its csr.json line."]
                if soc.card_irq is not None
                else []
            ),
            f"{CARD_NAME}: {CARD_TYPE} @ {{ {card_registrations(soc)} }}",
            f"    frequency: {soc.clock_hz}",
            *_irq_line(soc.card_irq),
        ]
    )
    return "\n\n".join("\n".join(lines) for lines in entries) + "\n"
