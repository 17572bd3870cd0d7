"""A Wishbone RAM for Amaranth simulations that behaves like LiteX's ``wishbone.SRAM`` on the
SoC bus: ``ack`` the cycle after a request (a word every other cycle) or, with ``bursting`` and an
incrementing burst (``cti == 0b010``), a word every cycle from an internal address counter, exactly
as LiteX's does (including its registered ``ack`` after the initiator lets go, and its rewriting
of a burst's first word); ``err`` outside its window, like the SoC's interconnect.

Testbenches read and write its contents as bytes with :func:`load` and :func:`dump`;
:class:`OnSram` puts a block's Wishbone initiator on one.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from numavia.gateware import wishbone_burst


class WishboneSRAM(wiring.Component):
    def __init__(self, *, base, size, addr_width=30, bursting=True):
        self.base = base  # byte address of the first word
        self.size = size  # bytes
        self.bursting = bursting
        self.mem = Memory(shape=32, depth=size // 4, init=[])
        super().__init__({"bus": In(wishbone_burst.Signature(addr_width=addr_width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = self.mem
        bus = self.bus
        rd = self.mem.read_port(domain="comb")
        wr = self.mem.write_port(granularity=8)
        burst = Signal()
        latched = Signal()
        counter = Signal(len(bus.adr))
        adr = Signal(len(bus.adr))
        m.d.comb += [
            burst.eq(self.bursting & (bus.cti == wishbone_burst.CTI_INCREMENTING)),
            adr.eq(Mux(burst & latched, counter, bus.adr)),
        ]
        index = Signal(range(self.size // 4 + 1))
        inside = Signal()
        m.d.comb += [
            index.eq(adr - self.base // 4),
            inside.eq((adr >= self.base // 4) & (adr < (self.base + self.size) // 4)),
            rd.addr.eq(index),
            wr.addr.eq(index),
            wr.data.eq(bus.dat_w),
        ]
        active = bus.cyc & bus.stb
        request = active & ~bus.err & (~bus.ack | burst)
        m.d.sync += [bus.ack.eq(request & inside), bus.err.eq(request & ~inside)]
        with m.If(active & burst):
            m.d.sync += [latched.eq(1), counter.eq(Mux(latched, counter + 1, bus.adr + ~bus.we))]
        with m.Else():
            m.d.sync += [latched.eq(0), counter.eq(0)]
        with m.If(active & inside):
            m.d.sync += bus.dat_r.eq(rd.data)
            with m.If(bus.we & (request | self.bursting)):
                m.d.comb += wr.en.eq(bus.sel)
        return m


def load(ctx, sram, addr, data):
    """Write ``data`` (bytes) at byte address ``addr`` (any alignment)."""
    for i, byte in enumerate(data):
        a = addr + i - sram.base
        word = ctx.get(sram.mem.data[a // 4])
        shift = 8 * (a % 4)
        ctx.set(sram.mem.data[a // 4], (word & ~(0xFF << shift)) | (byte << shift))


def load_words(ctx, sram, addr, data):
    """Faster :func:`load` for word-aligned ``addr`` and a multiple of 4 bytes."""
    assert addr % 4 == 0 and len(data) % 4 == 0
    for i in range(0, len(data), 4):
        ctx.set(sram.mem.data[(addr - sram.base + i) // 4], int.from_bytes(data[i : i + 4], "little"))


def dump(ctx, sram, addr, length):
    out = bytearray()
    for i in range(length):
        a = addr + i - sram.base
        out.append((ctx.get(sram.mem.data[a // 4]) >> (8 * (a % 4))) & 0xFF)
    return bytes(out)


class OnSram(wiring.Component):
    """``dut`` with its Wishbone initiator port (``port``) on a :class:`WishboneSRAM` (``sram``,
    built with ``sram_args``)."""

    def __init__(self, dut, *, port="bus", **sram_args):
        self.dut, self.port = dut, port
        self.sram = WishboneSRAM(**sram_args)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        m.submodules.sram = self.sram
        wiring.connect(m, getattr(self.dut, self.port), self.sram.bus)
        return m
