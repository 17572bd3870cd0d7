"""The VIA engine's Wishbone DMA initiator onto the PCIe DMA requester.

The VIA engine reads and writes host memory as a Wishbone initiator with incrementing bursts
(:mod:`..wishbone_burst`); the requester takes commands that know their length up front
(:class:`.requester.DmaSignature`). Wishbone does not announce a burst's length, so:

* **Reads.** A classic cycle reads one dword. A cycle with ``cti = INCREMENTING`` reads ahead to
  the next ``read_ahead_words`` boundary (which never crosses a 4 KiB page); the words are handed
  to the initiator as ``ack``s (``err`` for a failed read) while it keeps asking for the next
  address. Once a burst has gone past its first piece (a short one, a descriptor, does not pay
  for more), the following pieces of ``read_ahead_words`` are requested ahead, up to
  ``reads_in_flight`` at a time and never past the 4 KiB page, so the host's round trip overlaps
  the hand-out. An initiator that pauses (drops ``cyc`` for at most ``resume_cycles``, as the VIA
  engine's DMA reader does whenever its FIFO is full) and comes back for the next word continues
  where it was. Words the initiator no longer wants (it moved elsewhere, wrote, or stayed away
  longer) are discarded, and so is everything read ahead when ``flush`` pulses: the card pulses it
  on every register write, the point (a doorbell) after which the engine must see what the host
  wrote to its memory before, so no word read ahead earlier is handed out after it. Host memory has no read side effects, so reading a few pieces
  too many is harmless.
* **Writes.** Consecutive words are acknowledged into a buffer of ``write_buffer_words`` until the
  burst ends (the initiator stops, jumps, or the buffer is full); they then become one write
  command with the first and last ``sel`` as byte enables. A word with partial ``sel`` ends its
  write (PCIe allows partial byte enables only on a write's first and last dword), and a write
  is complete before the next access starts: the requester's ordering (writes before later
  reads) then holds for the engine's accesses too.

``idle`` is high when no written word is still waiting to reach the requester: a completion-queue
event raised after the engine's write was acknowledged may be sent as an MSI once ``idle`` is
back, and the MSI then follows the entry's memory write on the link.

Addresses: Wishbone word address *a* is host (bus) address ``4a``.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from numavia.base.params import BUS_ADDR_WIDTH

from .. import wishbone_burst
from .requester import DmaSignature


class WishboneToDma(wiring.Component):
    def __init__(self, *, read_ahead_words=16, reads_in_flight=4, write_buffer_words=64, resume_cycles=16):
        for name, v in (("read_ahead_words", read_ahead_words), ("write_buffer_words", write_buffer_words)):
            if v & (v - 1) or not 1 <= v <= 1024:
                raise ValueError(f"{name} must be a power of two, 1..1024")
        if not 1 <= reads_in_flight <= 16:
            raise ValueError("reads_in_flight must be 1..16")
        self.read_ahead_words = read_ahead_words
        self.reads_in_flight = reads_in_flight
        self.resume_cycles = resume_cycles
        self.write_buffer_words = write_buffer_words
        super().__init__(
            {
                "bus": In(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "dma": Out(DmaSignature()),
                "idle": Out(1),
                "flush": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bus, dma = self.bus, self.dma
        ahead = self.read_ahead_words
        m.submodules.buffer = buffer = SyncFIFOBuffered(width=32, depth=self.write_buffer_words)

        expected = Signal(BUS_ADDR_WIDTH)  # the word address the next ack answers / accepts
        start = Signal(BUS_ADDR_WIDTH)  # first word of the write being collected
        count = Signal(range(self.write_buffer_words + 1))
        first_be = Signal(4)
        last_be = Signal(4)
        streamed = Signal(range(self.write_buffer_words + 1))

        reading = bus.cyc & bus.stb & ~bus.we
        writing = bus.cyc & bus.stb & bus.we
        to_boundary = ahead - (bus.adr & (ahead - 1))
        requested = Signal(BUS_ADDR_WIDTH)  # the word after the last one asked of the requester
        in_flight = Signal(range(self.reads_in_flight + 1))  # read commands not fully handed out
        issued = Signal()
        finished = Signal()
        streaming = Signal()  # the burst has gone past its first piece
        away = Signal(range(self.resume_cycles + 1))  # cycles the initiator has let go of the bus
        m.d.sync += in_flight.eq(in_flight + issued - finished)
        m.d.comb += [
            finished.eq(dma.read_data.valid & dma.read_data.ready & dma.read_data.payload.last),
            issued.eq(dma.read_cmd.valid & dma.read_cmd.ready),
        ]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(1)
                m.d.comb += [
                    dma.read_cmd.payload.addr.eq(Cat(Const(0, 2), bus.adr)),
                    dma.read_cmd.payload.dwords.eq(Mux(bus.cti == wishbone_burst.CTI_INCREMENTING, to_boundary, 1)),
                ]
                m.d.sync += streaming.eq(0)
                with m.If(reading):
                    m.d.comb += dma.read_cmd.valid.eq(1)
                    with m.If(dma.read_cmd.ready):
                        m.d.sync += [
                            expected.eq(bus.adr),
                            requested.eq(bus.adr + dma.read_cmd.payload.dwords),
                            away.eq(0),
                        ]
                        m.next = "READ"
                with m.Elif(writing):
                    m.d.sync += [start.eq(bus.adr), expected.eq(bus.adr), count.eq(0)]
                    m.next = "COLLECT"

            with m.State("READ"):
                beat = dma.read_data
                wanted = reading & (bus.adr == expected)
                # The initiator is done with this read: it asks for another word, or stays away.
                abandoned = (bus.cyc & bus.stb & ~wanted) | (~bus.cyc & (away == self.resume_cycles)) | self.flush
                m.d.sync += away.eq(Mux(bus.cyc, 0, away + 1))
                # Ask for the next piece while the burst goes on, inside the page (1024 words).
                going_on = wanted & (bus.cti == wishbone_burst.CTI_INCREMENTING)
                more = going_on & (streaming | finished) & (in_flight < self.reads_in_flight) & (requested[:10] != 0)
                with m.If(going_on & finished):
                    m.d.sync += streaming.eq(1)
                m.d.comb += [
                    bus.dat_r.eq(beat.payload.data),
                    bus.ack.eq(beat.valid & wanted & ~beat.payload.error),
                    bus.err.eq(beat.valid & wanted & beat.payload.error),
                    beat.ready.eq(wanted | abandoned),
                    dma.read_cmd.valid.eq(more & ~abandoned),
                    dma.read_cmd.payload.addr.eq(Cat(Const(0, 2), requested)),
                    dma.read_cmd.payload.dwords.eq(ahead - (requested & (ahead - 1))),
                ]
                with m.If(issued):
                    m.d.sync += requested.eq(requested + dma.read_cmd.payload.dwords)
                with m.If(beat.valid & wanted):
                    m.d.sync += expected.eq(expected + 1)
                with m.If(finished & (in_flight == 1) & ~issued):
                    m.next = "IDLE"
                with m.Elif(abandoned):
                    m.next = "DRAIN"

            with m.State("DRAIN"):
                m.d.comb += dma.read_data.ready.eq(1)
                with m.If(finished & (in_flight == 1)):
                    m.next = "IDLE"

            with m.State("COLLECT"):
                whole = bus.sel == 0xF
                continues = writing & (bus.adr == expected) & (count < self.write_buffer_words)
                # A partial word may start a write (it is then the only word) or end one; a word
                # with no byte enabled cannot be the last of several.
                accept = continues & ((count == 0) | (bus.sel != 0))
                m.d.comb += [
                    buffer.w_data.eq(bus.dat_w),
                    buffer.w_en.eq(accept),
                    bus.ack.eq(accept),
                ]
                with m.If(accept):
                    m.d.sync += [count.eq(count + 1), expected.eq(expected + 1), last_be.eq(bus.sel)]
                    with m.If(count == 0):
                        m.d.sync += first_be.eq(bus.sel)
                    with m.If(~whole | (count + 1 == self.write_buffer_words)):
                        m.next = "COMMAND"
                with m.Elif(count == 0):
                    m.next = "IDLE"  # the initiator gave the cycle up
                with m.Else():
                    m.next = "COMMAND"

            with m.State("COMMAND"):
                m.d.comb += [
                    dma.write_cmd.valid.eq(1),
                    dma.write_cmd.payload.addr.eq(Cat(Const(0, 2), start)),
                    dma.write_cmd.payload.dwords.eq(count),
                    dma.write_cmd.payload.first_be.eq(first_be),
                    dma.write_cmd.payload.last_be.eq(last_be),
                ]
                with m.If(dma.write_cmd.ready):
                    m.d.sync += streamed.eq(0)
                    m.next = "STREAM"

            with m.State("STREAM"):
                m.d.comb += [
                    dma.write_data.valid.eq(buffer.r_rdy),
                    dma.write_data.payload.data.eq(buffer.r_data),
                    buffer.r_en.eq(dma.write_data.ready),
                ]
                with m.If(dma.write_data.valid & dma.write_data.ready):
                    m.d.sync += streamed.eq(streamed + 1)
                    with m.If(streamed + 1 == count):
                        m.next = "IDLE"
        return m
