"""Packet FIFO: frames buffered whole (store-and-forward), or passed on as they come (cut-through).

A frame is written word by word and becomes visible to the reader only when its last word is in
(commit); a frame whose last word carries ``error`` is discarded, so a frame with a bad FCS never
reaches the VIA receive logic, and a frame the transmit logic abandons never reaches the MAC.

Two write disciplines:

* ``drop_when_full=True`` (receive): the writer is never stalled (the MAC cannot wait); a frame
  that does not fit is dropped whole and ``dropped_full`` pulses;
* ``drop_when_full=False`` (transmit): the writer waits for room.

The reader sees the head frame's length in bytes (``head_length``, when ``head_valid``), streams its
words (``last`` on the final one, ``nbytes`` 1..4), and may ``skip`` the rest of it. ``level`` is
the words held, read or not yet (the transmit engine's measure of how long a frame it queues now
waits for the wire).

Cut-through, two ways:

* ``announce`` (transmit): a writer that knows a frame's length and will write the rest of it a
  word a cycle with no error (the transmit framer, once nothing can spoil the frame) gives the
  length in the cycle it writes one of the frame's words but the last; the reader (the MAC side,
  far slower than a word a cycle) may start on the frame at once and follows it as its words come
  in.
* ``cut_through=True`` (receive): while no whole frame waits, the reader may read the frame coming
  in (``head_early``) as far as its newest word; its last word comes only with its verdict, when
  it is committed (``head_valid``). If it is dropped instead, ``early_dropped`` pulses and the
  reader is back where the next frame will start: what it read must be forgotten, and nothing of
  it may have been acted on.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

FifoWord = data.StructLayout({"data": 32, "nbytes": 3, "last": 1, "error": 1})
FifoOut = data.StructLayout({"data": 32, "nbytes": 3, "last": 1})
#: A frame announced with its first word: its length in words and the bytes of its last word.
Announced = data.StructLayout({"words": 16, "nbytes": 3})


class PacketFifo(wiring.Component):
    def __init__(self, *, depth_words, max_frames=32, drop_when_full, cut_through=False):
        if depth_words & (depth_words - 1):
            raise ValueError("depth_words must be a power of two")
        self.depth = depth_words
        self.max_frames = max_frames
        self.drop_when_full = drop_when_full
        self.cut_through = cut_through
        super().__init__(
            {
                "w": In(stream.Signature(FifoWord)),
                "announce": In(stream.Signature(Announced)),
                "r": Out(stream.Signature(FifoOut)),
                "head_valid": Out(1),
                "head_length": Out(16),
                "head_early": Out(1),  # cut-through: words of a frame still coming in can be read
                "early_dropped": Out(1),  # ... and that frame, partly read, was dropped
                "skip": In(1),
                "dropped_full": Out(1),
                "dropped_error": Out(1),
                "committed": Out(1),
                "level": Out(range(depth_words + 1)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        aw = (self.depth - 1).bit_length()
        mem = Memory(shape=32, depth=self.depth, init=[])
        m.submodules.mem = mem
        wport = mem.write_port()
        rport = mem.read_port(transparent_for=(wport,))
        # Unbuffered: a frame's length is there the cycle after its last word (cut-through relies on it).
        m.submodules.lengths = lengths = SyncFIFO(width=16 + 3, depth=self.max_frames)

        wr = Signal(aw + 1)  # next word to write (of the frame being written)
        committed = Signal(aw + 1)  # end of the last committed frame
        rd = Signal(aw + 1)  # next word to read
        words = Signal(16)  # words of the frame being written
        dropping = Signal()  # the frame being written no longer fits: drop it at its end
        announced = Signal()  # the frame being written was announced: its length is queued already
        dropped = Signal()  # the frame being written ends here and is dropped

        free = Signal(aw + 1)
        m.d.comb += [free.eq(self.depth - (wr - rd)), self.level.eq(wr - rd)]
        w = self.w.payload
        if self.drop_when_full:
            fits = (free != 0) & (~w.last | announced | lengths.w_rdy)
        else:
            # A waiting writer's ready does not wait on its own word's `last` (decided late in
            # the framer's cycle): every word waits for room for the frame's length too.
            fits = (free != 0) & (announced | lengths.w_rdy)
        m.d.comb += self.announce.ready.eq(lengths.w_rdy)
        announcing = self.announce.valid & self.announce.ready & self.w.valid & self.w.ready  # with the first word
        with m.If(announcing):
            m.d.comb += lengths.w_en.eq(1)
            m.d.sync += announced.eq(1)

        if self.drop_when_full:
            m.d.comb += self.w.ready.eq(1)
        else:
            m.d.comb += self.w.ready.eq(fits)
        write = self.w.valid & self.w.ready

        m.d.comb += [
            wport.addr.eq(wr[:aw]),
            wport.data.eq(w.data),
            lengths.w_data.eq(Mux(announcing, self.announce.payload.as_value(), Cat((words + 1)[:16], w.nbytes))),
        ]
        with m.If(write):
            with m.If(~dropping & fits):
                m.d.comb += wport.en.eq(1)
                m.d.sync += [wr.eq(wr + 1), words.eq(words + 1)]
            with m.Else():
                m.d.sync += dropping.eq(1)
            with m.If(w.last):
                m.d.sync += [words.eq(0), dropping.eq(0), announced.eq(0)]
                with m.If(~dropping & fits & ~w.error):
                    m.d.comb += [lengths.w_en.eq(~announced), self.committed.eq(1)]
                    m.d.sync += committed.eq(wr + 1)
                with m.Else():
                    m.d.comb += dropped.eq(1)
                    m.d.sync += wr.eq(committed)
                    with m.If(w.error & ~dropping & fits):
                        m.d.comb += self.dropped_error.eq(1)
                    with m.Else():
                        m.d.comb += self.dropped_full.eq(1)

        # Read side: the memory's output always shows the word at rd (addressed one cycle ahead).
        head_words = Signal(16)
        head_nbytes = Signal(3)
        m.d.comb += [head_words.eq(lengths.r_data[:16]), head_nbytes.eq(lengths.r_data[16:])]
        taken = Signal(16)  # words of the head frame read
        words_left = head_words - taken
        # Cut-through: with no whole frame waiting, the words of the frame coming in, but its newest
        # (which may be its last, whose verdict is not in yet).
        early = Signal()
        if self.cut_through:
            m.d.comb += early.eq(~lengths.r_rdy & ((wr - rd)[: aw + 1] > 1))
        last = lengths.r_rdy & (words_left == 1)
        m.d.comb += [
            self.head_valid.eq(lengths.r_rdy),
            self.head_length.eq(((head_words - 1) << 2) + head_nbytes),
            self.head_early.eq(early),
            # An announced head frame may have words still to come: its reader waits for them.
            self.r.valid.eq(~self.skip & ((lengths.r_rdy & (rd != wr)) | early)),
            self.r.payload.data.eq(rport.data),
            self.r.payload.last.eq(last),
            self.r.payload.nbytes.eq(Mux(last, head_nbytes, 4)),
        ]
        rd_next = Signal(aw + 1)
        m.d.comb += [rd_next.eq(rd), rport.addr.eq(rd_next[:aw])]
        m.d.sync += rd.eq(rd_next)
        with m.If(self.skip & lengths.r_rdy):
            m.d.comb += [rd_next.eq(rd + words_left), lengths.r_en.eq(1)]
            m.d.sync += taken.eq(0)
        with m.Elif(self.r.valid & self.r.ready):
            m.d.comb += rd_next.eq(rd + 1)
            with m.If(last):
                m.d.comb += lengths.r_en.eq(1)
                m.d.sync += taken.eq(0)
            with m.Else():
                m.d.sync += taken.eq(taken + 1)
        if self.cut_through:
            # The frame read ahead was dropped: the reader goes back to where the next one will
            # start. (Only here does the writer's verdict reach the read address in its cycle.)
            with m.If(dropped & (taken != 0) & ~lengths.r_rdy):
                m.d.comb += [rd_next.eq(committed), self.early_dropped.eq(1)]
                m.d.sync += taken.eq(0)
        return m
