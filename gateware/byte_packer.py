"""Byte packer: gathers beats of 0..4 bytes into dense 32-bit words, one frame payload at a time.

The payload of a frame comes from several DMA reads (one per data segment and page), each of which
starts and ends at any byte. The packer is told the payload's total length, takes beats until it
has that many bytes, and emits full words with only the final one partial (``last``). An ``error``
on any input beat is carried to the frame's last word, so the frame can be dropped. ``abort``
forgets the frame in progress. ``whole`` says that every byte of the payload is in and none came
with an error: the words it still holds follow a word a cycle.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

PackerBeat = data.StructLayout({"data": 32, "nbytes": 3, "error": 1})
PackedWord = data.StructLayout({"data": 32, "nbytes": 3, "last": 1, "error": 1})


class BytePacker(wiring.Component):
    def __init__(self):
        super().__init__(
            {
                "length": In(stream.Signature(16)),
                "beats": In(stream.Signature(PackerBeat)),
                "words": Out(stream.Signature(PackedWord)),
                "abort": In(1),
                "whole": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        buf = Signal(64)
        count = Signal(4)  # bytes in buf
        have_length = Signal()
        to_emit = Signal(16)  # payload bytes not yet emitted as words
        to_take = Signal(16)  # payload bytes not yet taken from the beats
        error = Signal()

        out = self.words
        m.d.comb += self.length.ready.eq(~have_length)
        with m.If(self.length.valid & self.length.ready):
            m.d.sync += [
                have_length.eq(self.length.payload != 0),
                to_emit.eq(self.length.payload),
                to_take.eq(self.length.payload),
                error.eq(0),
            ]

        m.d.comb += self.whole.eq((have_length | out.valid) & (to_take == 0) & ~error)  # until its last word is taken

        n_emit = Signal(3)
        m.d.comb += n_emit.eq(Mux(count >= 4, 4, count))
        emit = have_length & (count != 0) & ((count >= 4) | (count == to_emit))
        load = Signal()
        m.d.comb += load.eq(emit & (~out.valid | out.ready))

        consumed = Signal(3)
        kept = Signal(4)
        m.d.comb += [
            consumed.eq(Mux(load, n_emit, 0)),
            kept.eq(count - consumed),
            self.beats.ready.eq(have_length & (kept <= 4) & (to_take != 0)),
        ]
        taken = self.beats.valid & self.beats.ready
        beat = self.beats.payload
        beat_bytes = Signal(32)  # bytes past nbytes may hold anything: clear them
        m.d.comb += beat_bytes.eq(beat.data & ((1 << (beat.nbytes * 8)) - 1)[:32])
        m.d.sync += [
            buf.eq((buf >> (consumed * 8)) | Mux(taken, beat_bytes << (kept * 8), 0)),
            count.eq(kept + Mux(taken, beat.nbytes, 0)),
        ]
        with m.If(taken):
            m.d.sync += to_take.eq(to_take - beat.nbytes)
            with m.If(beat.error):
                m.d.sync += error.eq(1)

        with m.If(out.valid & out.ready):
            m.d.sync += out.valid.eq(0)
        with m.If(load):
            last = to_emit == n_emit
            m.d.sync += [
                out.valid.eq(1),
                out.payload.data.eq(buf[:32]),
                out.payload.nbytes.eq(n_emit),
                out.payload.last.eq(last),
                out.payload.error.eq(error | (taken & beat.error)),
                to_emit.eq(to_emit - n_emit),
            ]
            with m.If(last):
                m.d.sync += have_length.eq(0)
        with m.If(self.abort):
            m.d.sync += [have_length.eq(0), count.eq(0), out.valid.eq(0), error.eq(0)]
        return m
