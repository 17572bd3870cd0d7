"""DMA writer: writes a byte stream into byte ranges of host memory over Wishbone.

The data stream carries bytes packed from lane 0 (``nbytes`` per beat, normally 4); each command
(byte address, length) takes the next ``length`` bytes of the stream and writes them with byte
selects, so ranges may start and end at any alignment and one beat may feed two ranges. A write is
issued as soon as its bytes are buffered; consecutive words go out as an incrementing burst (a
word a cycle on a bursting target).
``flush`` drops buffered bytes nobody will take (the end of a frame), a beat taken in the same
cycle with them, and abandons the command in progress. A bus error pulses ``error`` and the
command continues.

``data.ready`` depends on registers only, not on the bus's ``ack`` in the same cycle (on the SoC
the ``ack`` comes through the bus arbiter and address decoder, and passing it on to the receive
FIFO's read address made that the card's slowest path), nor on ``flush`` (which the payload writer
decides from the walker's chunk, late in the cycle). The buffer holds 12 bytes so that a beat
fits whenever 8 or fewer are buffered, which keeps a word a cycle at any alignment.
"""

from amaranth import Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.params import BUS_ADDR_WIDTH

from . import wishbone_burst

WriteCommand = data.StructLayout({"addr": 32, "length": 16})
WriteData = data.StructLayout({"data": 32, "nbytes": 3})

BUFFER_BYTES = 12  # a beat enters while 8 or fewer bytes wait: a word a cycle at any alignment


class DmaWriter(wiring.Component):
    def __init__(self, *, max_burst=16):
        self.max_burst = max_burst
        super().__init__(
            {
                "bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "cmd": In(stream.Signature(WriteCommand)),
                "data": In(stream.Signature(WriteData)),
                "flush": In(1),
                "busy": Out(1),
                "error": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bus = self.bus

        buf = Signal(8 * BUFFER_BYTES)  # buffered stream bytes, the oldest at bits 0..7
        count = Signal(range(BUFFER_BYTES + 1))
        active = Signal()
        word_adr = Signal(BUS_ADDR_WIDTH)
        lane = Signal(2)  # lane of the next write's first byte
        remaining = Signal(17)  # bytes of the command not yet written
        burst = Signal(range(self.max_burst))

        done_now = bus.cyc & bus.stb & (bus.ack | bus.err)

        def take_for(lane_, remaining_):
            room = (4 - Value.cast(lane_)).as_unsigned()[:3]
            return Mux(remaining_ < room, remaining_, room)[:3]

        take = Signal(3)  # bytes the current write covers
        m.d.comb += take.eq(take_for(lane, remaining))

        # Bytes leave the buffer when a write completes; a beat enters when it fits whatever the
        # bus does this cycle.
        consumed = Signal(3)
        m.d.comb += consumed.eq(Mux(done_now, take, 0))
        kept = Signal.like(count)
        m.d.comb += [
            kept.eq(count - consumed),
            self.data.ready.eq(count <= BUFFER_BYTES - 4),
        ]
        accepted = self.data.valid & self.data.ready
        buf_next = Signal.like(buf)
        count_next = Signal.like(count)
        beat_bytes = Signal(32)  # bytes past nbytes may hold anything: clear them
        m.d.comb += [
            beat_bytes.eq(self.data.payload.data & ((1 << (self.data.payload.nbytes * 8)) - 1)[:32]),
            buf_next.eq((buf >> (consumed * 8)) | Mux(accepted, beat_bytes << (kept * 8), 0)),
            count_next.eq(kept + Mux(accepted, self.data.payload.nbytes, 0)),
        ]
        m.d.sync += [buf.eq(buf_next), count.eq(count_next)]

        m.d.comb += [
            self.busy.eq(active),
            self.error.eq(bus.cyc & bus.stb & bus.err),
            self.cmd.ready.eq(~active),
            bus.we.eq(1),
            bus.cti.eq(wishbone_burst.CTI_INCREMENTING),
        ]

        def start(adr, lane_, remaining_, source):
            """Latch a write of the first ``take_for(lane_, remaining_)`` bytes of ``source``."""
            n = take_for(lane_, remaining_)
            mask = Signal(4, name="start_mask")
            m.d.comb += mask.eq(((1 << n) - 1) << lane_)
            return [bus.adr.eq(adr), bus.dat_w.eq(source[:32] << (lane_ * 8)), bus.sel.eq(mask)]

        with m.If(self.cmd.valid & self.cmd.ready):
            with m.If(self.cmd.payload.length != 0):
                m.d.sync += [
                    active.eq(1),
                    word_adr.eq(self.cmd.payload.addr[2:]),
                    lane.eq(self.cmd.payload.addr[:2]),
                    remaining.eq(self.cmd.payload.length),
                ]

        with m.If(active & ~bus.cyc):
            with m.If(count >= take):
                m.d.sync += [bus.cyc.eq(1), bus.stb.eq(1), burst.eq(0)]
                m.d.sync += start(word_adr, lane, remaining, buf)
        with m.Elif(done_now):
            left = Signal(17)
            m.d.comb += left.eq(remaining - take)
            next_take = take_for(0, left)
            m.d.sync += [
                word_adr.eq(word_adr + 1),
                lane.eq(0),
                remaining.eq(left),
                burst.eq(burst + 1),
            ]
            with m.If(left == 0):
                m.d.sync += [active.eq(0), bus.cyc.eq(0), bus.stb.eq(0)]
            with m.Elif((count_next >= next_take) & (burst != self.max_burst - 1)):
                m.d.sync += start(word_adr + 1, 0, left, buf_next)  # back to back: stb stays up
            with m.Else():
                m.d.sync += [bus.cyc.eq(0), bus.stb.eq(0)]
        with m.If(self.flush):
            # The buffer's bytes past `count` must be zeros: a beat enters by OR.
            m.d.sync += [buf.eq(0), count.eq(0), active.eq(0), bus.cyc.eq(0), bus.stb.eq(0)]
        return m
