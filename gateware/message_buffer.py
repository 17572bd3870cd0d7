"""The sequencer's message buffer: the data block of the message a run started or resumed with.

A block is taken in beside the run, a word per cycle as the ring link hands it over, so the run
need not wait for it: ``start`` (in the cycle the message's header is taken) begins a block of
``line_words`` words handed over from word ``first`` on, wrapping round the line (an answer's word
asked for comes first: ``sci_layouts.data_block_first``); ``words`` counts those already
written, and :meth:`holds` tells whether one of them can be read. ``keep`` low drains the block
without writing it (a message nobody takes). The read port is synchronous: the word of ``read_addr`` (with ``read_en``) is on
``read_data`` the next cycle, and holds while ``read_en`` is low."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


class MessageBuffer(wiring.Component):
    def __init__(self, line_words):
        assert line_words & (line_words - 1) == 0, "a line is a power of two words (blocks wrap round it)"
        self.line_words = line_words
        self.word_bits = word_bits = max(1, (line_words - 1).bit_length())
        self._first = Signal(word_bits)  # the block's first word
        super().__init__(
            {
                "data": In(stream.Signature(32)),
                "start": In(1),
                "first": In(word_bits),
                "keep": In(1),
                "receiving": Out(1),
                "words": Out(range(line_words + 1)),
                "read_addr": In(word_bits),
                "read_en": In(1),
                "read_data": Out(32),
            }
        )

    def holds(self, index):
        """The buffer holds word ``index`` of the current block (written in an earlier cycle)."""
        return ~self.receiving | (self.words > (index - self._first)[: self.word_bits])

    def elaborate(self, platform):
        m = Module()
        m.submodules.words = mem = Memory(shape=32, depth=self.line_words, init=[])
        rd, wr = mem.read_port(), mem.write_port()
        keep = Signal()
        m.d.comb += [rd.addr.eq(self.read_addr), rd.en.eq(self.read_en), self.read_data.eq(rd.data)]
        m.d.comb += [wr.addr.eq((self._first + self.words)[: self.word_bits]), wr.data.eq(self.data.payload)]
        with m.If(self.start):
            m.d.sync += [self.receiving.eq(1), self.words.eq(0), keep.eq(self.keep), self._first.eq(self.first)]
        with m.Elif(self.receiving):
            m.d.comb += [self.data.ready.eq(1), wr.en.eq(self.data.valid & keep)]
            with m.If(self.data.valid):
                m.d.sync += self.words.eq(self.words + 1)
                with m.If(self.words == self.line_words - 1):
                    m.d.sync += self.receiving.eq(0)
        return m
