"""DMA reader: reads byte ranges of host memory over Wishbone and streams them out.

Each command is a byte address and a length; the reader fetches the 32-bit words that hold the
range and emits one beat per word with the range's bytes moved down to lane 0 (``nbytes`` of them,
1..4; a zero-length command emits a single empty beat), ``last`` on the command's final beat. A
bus error marks that beat ``error`` and the command continues, so the stream framing never breaks.

Reads are issued back to back as an incrementing burst (a word a cycle on a bursting target, a
word every other cycle on a classic one) while a small FIFO has room, so a slow consumer throttles
the bus instead of losing data. After ``max_burst`` words the reader drops ``cyc`` for a cycle so
that other initiators (the CPU, the other DMA engines) get the bus.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from numavia.base.params import BUS_ADDR_WIDTH

from . import wishbone_burst

ReadCommand = data.StructLayout({"addr": 32, "length": 16})
ReadBeat = data.StructLayout({"data": 32, "nbytes": 3, "last": 1, "error": 1})


class DmaReader(wiring.Component):
    def __init__(self, *, fifo_depth=8, max_burst=16):
        self.fifo_depth = fifo_depth
        self.max_burst = max_burst
        super().__init__(
            {
                "bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "cmd": In(stream.Signature(ReadCommand)),
                "beats": Out(stream.Signature(ReadBeat)),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=ReadBeat.size, depth=self.fifo_depth)
        m.d.comb += [
            self.beats.payload.eq(fifo.r_data),
            self.beats.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.beats.ready),
        ]

        active = Signal()
        word_adr = Signal(BUS_ADDR_WIDTH)
        lane = Signal(2)  # first byte's lane in the current word
        remaining = Signal(17)  # bytes of the command not yet emitted
        empty_command = Signal()  # a zero-length command: one empty beat, no bus access
        burst = Signal(range(self.max_burst))

        # Room for the next word once this cycle's is in (the FIFO only fills through us).
        room = fifo.w_level < self.fifo_depth - 2
        m.d.comb += self.busy.eq(active | fifo.r_rdy)

        take = Signal(3)
        m.d.comb += take.eq(Mux(remaining < 4 - lane, remaining, 4 - lane))
        beat = ReadBeat(Signal(ReadBeat.size))
        m.d.comb += [
            beat.data.eq(bus.dat_r >> (lane * 8)),
            beat.nbytes.eq(take),
            beat.last.eq(remaining == take),
            beat.error.eq(bus.err),
            fifo.w_data.eq(beat.as_value()),
        ]

        m.d.comb += self.cmd.ready.eq(~active)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [
                active.eq(1),
                word_adr.eq(self.cmd.payload.addr[2:]),
                lane.eq(self.cmd.payload.addr[:2]),
                remaining.eq(self.cmd.payload.length),
                empty_command.eq(self.cmd.payload.length == 0),
            ]

        with m.If(active & empty_command):
            m.d.comb += [fifo.w_en.eq(1), beat.nbytes.eq(0), beat.last.eq(1), beat.error.eq(0)]
            with m.If(fifo.w_rdy):
                m.d.sync += active.eq(0)
        with m.Elif(active):
            m.d.comb += [
                bus.adr.eq(word_adr),
                bus.sel.eq(0xF),
                bus.we.eq(0),
                bus.cti.eq(wishbone_burst.CTI_INCREMENTING),
            ]
            with m.If(bus.cyc & bus.stb & (bus.ack | bus.err)):
                m.d.comb += fifo.w_en.eq(1)
                m.d.sync += [
                    word_adr.eq(word_adr + 1),
                    lane.eq(0),
                    remaining.eq(remaining - take),
                ]
                m.d.sync += burst.eq(burst + 1)
                with m.If(remaining == take):
                    m.d.sync += [active.eq(0), bus.cyc.eq(0), bus.stb.eq(0)]
                with m.Elif(~room | (burst == self.max_burst - 1)):
                    m.d.sync += [bus.cyc.eq(0), bus.stb.eq(0)]
            with m.Elif(~bus.cyc & room):
                m.d.sync += [bus.cyc.eq(1), bus.stb.eq(1), burst.eq(0)]
        return m
