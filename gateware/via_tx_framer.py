"""VIA transmit framer: puts the transmit engine's frames into the transmit FIFO, one at a time.

The engine hands it a job: the frame's header, the length of its payload and where the payload
comes from. The framer streams the header's words, then the payload:

* from host memory: the walk of the message window (``walk``: offset and length from the header)
  goes to the scatter/gather walker as the header's first word goes out; the walker's chunks are
  read by DMA and packed into dense words, so a small payload already waits in the reader and the
  packer when the header is in;
* from the firmware's management registers (``mgmt_data``), a word a cycle; a raw management
  frame has no VIA header (the firmware wrote the whole Ethernet frame).

Frames are cut through as soon as nothing can spoil them any more: the FIFO is told the frame's
length (announced) with one of its words, and the MAC side may start on it at once, reading behind
the framer, which from then on writes a word a cycle (far faster than the wire). A frame without
payload is announced with its first word. A frame with payload from host memory is announced with
the word written when its walk has ended without failing and the packer holds every byte of it
with no DMA error (``BytePacker.whole``): for a small payload that is during the header, so the
frame starts on the wire before its payload word is in. A payload larger than the DMA reader's
buffer is announced only near its end, or not at all, and leaves the FIFO whole. If the walk fails
(the ATT changed under a checked transfer) or a DMA read fails, the frame, never announced, ends
with an error word, which makes the FIFO drop it: once a frame has started on the wire it could
not be recalled (LiteEth's transmit path has no way to spoil a frame's FCS).

The job stays valid, its fields unchanged, until the frame is all in the FIFO: ``job.ready`` marks
that cycle (the last header word's, for a frame without payload), and ``error`` beside it says
whether the frame was dropped.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import via_att, via_frame
from numavia.base.params import BUS_ADDR_WIDTH

from . import wishbone_burst
from .byte_packer import BytePacker
from .packet_fifo import Announced, FifoWord
from .via_dma_reader import DmaReader
from .via_layouts import FrameHeader
from .via_links import mgmt_tx_payload_signature
from .via_scatter_gather import OP_WALK, Chunk, WalkCommand, WalkResult

HEADER_WORDS = via_frame.HEADER.size // 4


class PayloadSource(enum.Enum, shape=1):
    HOST = 0  # walked and read by DMA
    FIRMWARE = 1  # the management registers


#: A frame to send: its header, its payload's length in bytes and where the payload comes from.
FrameJob = data.StructLayout({"header": FrameHeader, "length": 16, "source": PayloadSource, "raw": 1})


class TxFramer(wiring.Component):
    def __init__(self):
        super().__init__(
            {
                "job": In(stream.Signature(FrameJob)),
                "error": Out(1),  # with job.ready: the frame ended in error (the FIFO drops it)
                "walk": Out(stream.Signature(WalkCommand)),
                "walk_result": In(stream.Signature(WalkResult)),
                "chunks": In(stream.Signature(Chunk)),
                "read_bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "mgmt_data": Out(mgmt_tx_payload_signature()),
                "frames": Out(stream.Signature(FifoWord)),
                "announce": Out(stream.Signature(Announced)),
                "dma_error": Out(1),  # a payload word read with a bus error
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.reader = reader = DmaReader()
        m.submodules.packer = packer = BytePacker()
        wiring.connect(m, reader.bus, wiring.flipped(self.read_bus))

        job, frames = self.job.payload, self.frames
        hdr_bits = job.header.as_value()
        # The word of the header or of the management payload going out next.
        word = Signal(range(max(HEADER_WORDS, via_frame.MGMT_PAYLOAD_MAX // 4) + 1))
        frame_error = Signal()  # a payload word came with an error
        done = Signal()  # this cycle ends the job (set below, where the frame ends)
        m.d.comb += self.job.ready.eq(done)

        # --- the payload walk: started with the header's first word --------------------------
        walk_wanted = Signal()
        fetching = Signal()  # the job's walk has gone to the walker and its chunks are being read
        walk_done, walk_failed, words_done = Signal(), Signal(), Signal()
        walk_taken = fetching | walk_done  # (a failed walk is done and no longer fetching)
        m.d.comb += walk_wanted.eq(
            self.job.valid & (job.source == PayloadSource.HOST) & (job.length != 0) & ~walk_taken
        )
        # The packer learns the payload's length as the walk starts: both go together.
        m.d.comb += [
            self.walk.valid.eq(walk_wanted & packer.length.ready),
            self.walk.payload.op.eq(OP_WALK),
            self.walk.payload.offset.eq(job.header.offset),
            self.walk.payload.length.eq(job.length),
            packer.length.valid.eq(walk_wanted & self.walk.ready),
            packer.length.payload.eq(job.length),
        ]
        with m.If(self.walk.valid & self.walk.ready):
            m.d.sync += fetching.eq(1)
        with m.If(fetching):
            m.d.comb += self.walk_result.ready.eq(1)
            with m.If(self.walk_result.valid):
                m.d.sync += walk_done.eq(1)
                with m.If(self.walk_result.payload.fail != via_att.FAIL_NONE):
                    m.d.sync += [walk_failed.eq(1), fetching.eq(0)]
        m.d.comb += [
            reader.cmd.valid.eq(fetching & self.chunks.valid),
            reader.cmd.payload.addr.eq(self.chunks.payload.pa),
            reader.cmd.payload.length.eq(self.chunks.payload.length),
            self.chunks.ready.eq(fetching & reader.cmd.ready),
            packer.beats.valid.eq(reader.beats.valid),
            packer.beats.payload.data.eq(reader.beats.payload.data),
            packer.beats.payload.nbytes.eq(reader.beats.payload.nbytes),
            packer.beats.payload.error.eq(reader.beats.payload.error),
            reader.beats.ready.eq(packer.beats.ready),
            self.dma_error.eq(reader.beats.valid & reader.beats.ready & reader.beats.payload.error),
        ]

        payload_words = Signal(len(job.length) - 1)  # the job's payload in words, the last partial
        m.d.comb += payload_words.eq((job.length + 3) >> 2)

        # --- cut-through: the frame announced with a word once nothing can spoil it ----------
        bare = job.length == 0
        announced = Signal()  # this job's frame has been announced
        payload_safe = Signal()  # a host payload that can no longer fail: all in the packer
        m.d.comb += payload_safe.eq(
            (job.source == PayloadSource.HOST) & ~bare & walk_done & ~walk_failed & packer.whole & ~announced
        )
        m.d.comb += [
            self.announce.payload.words.eq(HEADER_WORDS + payload_words),
            self.announce.payload.nbytes.eq(Mux(job.length[:2] == 0, 4, job.length[:2])),
        ]
        # A word offered with the announcement waits until the FIFO can take both (PacketFifo).
        word_held = self.announce.valid & ~self.announce.ready
        with m.If(self.announce.valid & self.announce.ready & frames.valid & frames.ready):
            m.d.sync += announced.eq(1)

        with m.FSM():
            with m.State("HEADER"):
                with m.If(job.raw):
                    with m.If(self.job.valid):
                        with m.If(job.length == 0):
                            m.d.comb += done.eq(1)
                        with m.Else():
                            m.next = "PAYLOAD"
                with m.Else():
                    end = word == HEADER_WORDS - 1
                    m.d.comb += [
                        self.announce.valid.eq(self.job.valid & ((bare & (word == 0)) | payload_safe)),
                        frames.valid.eq(self.job.valid & ~word_held),
                        frames.payload.data.eq(hdr_bits.word_select(word, 32)),
                        frames.payload.nbytes.eq(4),
                        frames.payload.last.eq(end & bare),
                    ]
                    with m.If(frames.valid & frames.ready):
                        m.d.sync += word.eq(word + 1)
                        with m.If(end):
                            with m.If(bare):
                                m.d.comb += done.eq(1)
                            with m.Else():
                                m.d.sync += word.eq(0)
                                m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                with m.If(job.source == PayloadSource.FIRMWARE):
                    end = word == payload_words - 1
                    rem = job.length[:2]
                    m.d.comb += [
                        self.mgmt_data.index.eq(word),
                        frames.valid.eq(1),
                        frames.payload.data.eq(self.mgmt_data.record.word),
                        frames.payload.last.eq(end),
                        frames.payload.nbytes.eq(Mux(end & (rem != 0), rem, 4)),
                    ]
                    with m.If(frames.ready):
                        m.d.sync += word.eq(word + 1)
                        with m.If(end):
                            m.d.comb += done.eq(1)
                            m.next = "HEADER"
                with m.Elif(walk_failed):
                    m.d.sync += frame_error.eq(1)
                    m.next = "ABORT"
                with m.Else():
                    words = packer.words
                    m.d.comb += [
                        # Announced with any payload word but the last (which commits the frame).
                        self.announce.valid.eq(words.valid & ~words.payload.last & payload_safe),
                        packer.words.ready.eq(frames.ready & ~word_held),
                        frames.valid.eq(words.valid & ~word_held),
                        frames.payload.data.eq(words.payload.data),
                        frames.payload.nbytes.eq(words.payload.nbytes),
                        frames.payload.last.eq(words.payload.last),
                        frames.payload.error.eq(words.payload.error),
                    ]
                    with m.If(frames.valid & frames.ready & frames.payload.last):
                        m.d.sync += [words_done.eq(1), frame_error.eq(frames.payload.error)]
                    with m.If(walk_done & words_done):
                        m.d.comb += [done.eq(1), self.error.eq(frame_error)]
                        m.next = "HEADER"

            with m.State("ABORT"):
                # Let the reader finish the chunks it has taken (their words are dropped: the packer
                # must take the reader's beats, or the reader never finishes), then end the frame
                # with an error word and forget what the packer holds.
                m.d.comb += packer.words.ready.eq(1)
                with m.If(~reader.busy):
                    m.d.comb += [
                        packer.abort.eq(1),
                        frames.valid.eq(1),
                        frames.payload.last.eq(1),
                        frames.payload.error.eq(1),
                    ]
                    with m.If(frames.ready):
                        m.d.comb += [done.eq(1), self.error.eq(1)]
                        m.next = "HEADER"

        # The job ends: the next one starts afresh (after the FSM, so this wins over its steps).
        with m.If(done):
            m.d.sync += [
                word.eq(0),
                frame_error.eq(0),
                announced.eq(0),
                fetching.eq(0),
                walk_done.eq(0),
                walk_failed.eq(0),
                words_done.eq(0),
            ]
        return m
