"""The card's DMA kept to host memory: an access outside it answers ``err`` and reaches nothing.

On the SoC the card's DMA initiator is joined to host memory alone, not to the SoC bus, as a PCIe
card's DMA reaches the host's memory and nothing of the board it sits on. The firmware registers
only host memory for DMA (``nv_via_host_range``); this is the hardware's side of that rule. Host
memory decodes only the address bits below its size, so without the check an address outside
would land on its alias inside. ``base`` and ``size`` are in bytes; ``size`` is a power of two and
``base`` a multiple of it, so the check is one comparison of the upper address bits.

An access outside answers ``err`` a cycle later, once, as the card's decoder answers an unmapped
register, and the DMA engines count and report it (``DMA_ERRORS``, the VI's error completion).
Everything else passes straight through, bursts included.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import wishbone_burst


class HostWindow(wiring.Component):
    def __init__(self, *, addr_width, base, size):
        if size < 4 or size & (size - 1):
            raise ValueError(f"host memory of {size:#x} bytes: its size must be a power of two of at least a word")
        if base % size:
            raise ValueError(f"host memory at {base:#x} is not aligned to its size ({size:#x})")
        if base + size > 4 << addr_width:
            raise ValueError(f"host memory at {base:#x} ({size:#x} bytes) is past {addr_width} word address bits")
        self.base, self.size = base, size
        sig = wishbone_burst.Signature(addr_width=addr_width)
        super().__init__({"initiator": In(sig), "bus": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        ini, bus = self.initiator, self.bus
        offset_bits = (self.size // 4).bit_length() - 1  # the word address bits host memory decodes
        inside = Signal()
        refused = Signal()
        m.d.comb += [
            inside.eq((ini.adr >> offset_bits) == (self.base // 4) >> offset_bits),
            bus.cyc.eq(ini.cyc & inside),
            bus.stb.eq(ini.stb & inside),
            *(getattr(bus, name).eq(getattr(ini, name)) for name in ("we", "adr", "dat_w", "sel", "cti", "bte")),
            ini.dat_r.eq(bus.dat_r),
            ini.ack.eq(bus.ack),
            ini.err.eq(bus.err | refused),
        ]
        m.d.sync += refused.eq(ini.cyc & ini.stb & ~inside & ~refused)
        return m
