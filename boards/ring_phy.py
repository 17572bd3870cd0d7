"""The SCI ring link on board pins: a source-synchronous parallel link between neighbouring boards.

In simulation every node runs on one clock and the ring is a wire. Boards have their own
oscillators, so each direction carries a forwarded clock: the sender drives its symbol (16 data
bits + ``frame``) from registers on the falling edge of the clock it forwards, and the receiver
samples it on the rising edge of that clock, in its own ``ring_rx`` clock domain.

Moving symbols from ``ring_rx`` into the card's clock domain is the job of
:class:`PacketElasticBuffer`. The card's link needs every packet contiguous (``frame`` high on
each symbol, the low cycle between packets is the only delimiter), and the two clocks differ by
a few hundred ppm either way, so a symbol-by-symbol FIFO would run dry inside a packet whenever
the reader is faster. The buffer therefore stores whole packets and starts sending one only when
all of it has arrived; between packets it sends idle (``frame`` low) symbols. The idle gaps
absorb the clock difference, as SCI's idle symbols do.
"""

from litex.build.io import DDROutput
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from migen import Cat, ClockDomain, ClockDomainsRenamer, ClockSignal, If, Signal
from migen.genlib.cdc import GrayCounter, GrayDecoder, MultiReg

from numavia.base.sci_packet import MAX_PACKET_SYMBOLS, SYMBOL_BITS

#: Signals per direction: the symbol's data bits, ``frame``, and the forwarded clock.
LANES = SYMBOL_BITS + 1


class PacketElasticBuffer(LiteXModule):
    """Whole packets from clock domain ``cd_write`` to ``cd_read``.

    Write side (``cd_write``): ``write_data``/``write_frame``, one symbol per cycle, as on the ring.
    Read side (``cd_read``): ``read_data``/``read_frame``, registered: packets contiguous, at least
    one idle symbol between them. The buffer holds at least ``packets`` packets; a packet that
    begins when there is no room for a whole one is dropped entirely (``dropped`` pulses) and the
    sender's echo timeout resends it, as for a corrupt packet.
    """

    def __init__(self, cd_write="ring_rx", cd_read="sys", packets=4):
        self.write_data = Signal(SYMBOL_BITS)
        self.write_frame = Signal()
        self.read_data = Signal(SYMBOL_BITS)
        self.read_frame = Signal()
        self.dropped = Signal()

        # # #

        depth = 1 << (packets * MAX_PACKET_SYMBOLS - 1).bit_length()  # the FIFO's pointers are Gray
        fifo = stream.AsyncFIFO([("data", SYMBOL_BITS)], depth=depth)
        self.fifo = fifo = ClockDomainsRenamer({"write": cd_write, "read": cd_read})(fifo)
        write, read = getattr(self.sync, cd_write), getattr(self.sync, cd_read)

        # Symbols read, counted for the writer's room check (Gray across the clock boundary).
        read_words = ClockDomainsRenamer(cd_read)(GrayCounter(16))
        read_words_w, read_words_bin = Signal(16), GrayDecoder(16)
        self.submodules += read_words, read_words_bin
        self.specials += MultiReg(read_words.q, read_words_w, cd_write)

        # Write side: a symbol is a packet's last when the next one is idle, so the FIFO input runs
        # one symbol behind the ring. Room for a whole packet is checked as it begins, so a packet
        # is never cut short; the room seen is an underestimate (the read count arrives late).
        held_data, held_frame = Signal(SYMBOL_BITS), Signal()
        discarding = Signal()
        written_words = Signal(16)
        completed = ClockDomainsRenamer(cd_write)(GrayCounter(8))  # whole packets written
        self.submodules += completed
        starts = self.write_frame & ~held_frame
        ends = held_frame & ~self.write_frame
        room = Signal()
        self.comb += [
            read_words_bin.i.eq(read_words_w),
            room.eq((written_words - read_words_bin.o)[:16] <= depth - MAX_PACKET_SYMBOLS),
            fifo.sink.valid.eq(held_frame & ~discarding),
            fifo.sink.data.eq(held_data),
            fifo.sink.last.eq(ends),
            completed.ce.eq(fifo.sink.valid & ends),
            self.dropped.eq(ends & discarding),
            read_words.ce.eq(fifo.source.valid & fifo.source.ready),
        ]
        write += [
            held_data.eq(self.write_data),
            held_frame.eq(self.write_frame),
            If(starts, discarding.eq(~room)),
            If(fifo.sink.valid, written_words.eq(written_words + 1)),
        ]

        # Read side: count the packets the writer completed; send one only when it is whole. The
        # FIFO's own pointer crosses as fast as the packet count, and a packet's last symbol is read
        # at least two cycles after its count is seen, so the FIFO never runs dry inside a packet.
        completed_r, completed_bin = Signal(8), GrayDecoder(8)
        self.submodules += completed_bin
        self.specials += MultiReg(completed.q, completed_r, cd_read)
        taken = Signal(8)
        sending = Signal()
        self.comb += [completed_bin.i.eq(completed_r), fifo.source.ready.eq(sending)]
        read += [
            self.read_frame.eq(0),
            If(
                sending,
                self.read_frame.eq(1),
                self.read_data.eq(fifo.source.data),
                If(fifo.source.last, sending.eq(0), taken.eq(taken + 1)),
            ).Elif(
                completed_bin.o != taken,
                # Starts the cycle after a packet's last symbol: one idle symbol between packets.
                sending.eq(1),
            ),
        ]


class RingPins(LiteXModule):
    """The card's ring port (``card.ring_rx``/``card.ring_tx``, :data:`SymbolLayout` each way) on
    two groups of pads, ``tx_pads``/``rx_pads``, each with ``clk``, ``frame`` and ``data``."""

    def __init__(self, card, tx_pads, rx_pads, packets=4):
        # Transmit: symbol from the card's registered tx, forwarded clock inverted (data changes on
        # our rising edge, the receiver samples on the middle of the bit).
        tx = Signal(LANES)
        self.sync += tx.eq(card.ring_tx)
        self.comb += [tx_pads.data.eq(tx[:SYMBOL_BITS]), tx_pads.frame.eq(tx[SYMBOL_BITS])]
        self.specials += DDROutput(i1=0, i2=1, o=tx_pads.clk, clk=ClockSignal("sys"))

        # Receive: sample in the neighbour's clock, then across into ours whole packets at a time.
        self.cd_ring_rx = ClockDomain()
        self.comb += self.cd_ring_rx.clk.eq(rx_pads.clk)
        sampled_data, sampled_frame = Signal(SYMBOL_BITS), Signal()
        self.sync.ring_rx += [sampled_data.eq(rx_pads.data), sampled_frame.eq(rx_pads.frame)]
        self.elastic = PacketElasticBuffer("ring_rx", "sys", packets=packets)
        self.comb += [
            self.elastic.write_data.eq(sampled_data),
            self.elastic.write_frame.eq(sampled_frame),
            card.ring_rx.eq(Cat(self.elastic.read_data, self.elastic.read_frame)),
        ]
        # Link activity, for a LED: a packet arrived in the last ~2^23 cycles.
        self.rx_active = Signal()
        recent = Signal(23)
        self.sync += If(self.elastic.read_frame, recent.eq(2**23 - 1)).Elif(recent != 0, recent.eq(recent - 1))
        self.comb += self.rx_active.eq(recent != 0)
