"""VIA payload writer: a received frame's payload into host memory, through the walker and DMA.

The receive engine hands it a job when a frame's header has passed every check and its target
(a receive descriptor, a registered region or an RDMA read's buffers) has been validated: the
payload's place in its message (``offset``) and its length. The writer sends the walk of that
window to the scatter/gather walker and writes the frame's payload words (``words``, from the
receive FIFO) into the chunks the walker answers with, by DMA at any alignment.

The walker looks every chunk past the first page up again, so a memory handle deregistered while
the message arrives fails the walk: the writer then stops at once, drops what it holds and ends
the job with ``error`` (the engine drops the rest of the frame). Otherwise the job ends when every
byte is written (``written`` pulses with it: the frame's payload is in host memory).

The job stays valid, its fields unchanged, until ``job.ready``; a job without payload ends at once.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import via_att
from numavia.base.params import BUS_ADDR_WIDTH

from . import wishbone_burst
from .packet_fifo import FifoOut
from .via_dma_writer import DmaWriter
from .via_scatter_gather import OP_WALK, Chunk, WalkCommand, WalkResult

#: A frame's payload to write: its byte offset in the message and its length.
PayloadJob = data.StructLayout({"offset": 32, "length": 16})


class PayloadWriter(wiring.Component):
    def __init__(self):
        super().__init__(
            {
                "job": In(stream.Signature(PayloadJob)),
                "error": Out(1),  # with job.ready: the walk failed, the payload is not all written
                "walk": Out(stream.Signature(WalkCommand)),
                "walk_result": In(stream.Signature(WalkResult)),
                "chunks": In(stream.Signature(Chunk)),
                "words": In(stream.Signature(FifoOut)),  # the frame's words after its header
                "bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "written": Out(1),  # the payload is in host memory
                "dma_error": Out(1),  # a write failed on the bus
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.writer = writer = DmaWriter()
        wiring.connect(m, writer.bus, wiring.flipped(self.bus))
        m.d.comb += self.dma_error.eq(writer.error)

        job = self.job.payload
        words_left = Signal(16)  # payload words still to come from the frame
        last_nbytes = Signal(3)
        m.d.comb += last_nbytes.eq(Mux(job.length[:2] == 0, 4, job.length[:2]))
        failed = self.walk_result.valid & (self.walk_result.payload.fail != via_att.FAIL_NONE)

        def stream_payload():
            """The walker's chunks become the DMA writer's commands, the frame's words its data
            (the frame's last word may be padding: only the payload's bytes are taken)."""
            m.d.comb += [
                writer.cmd.valid.eq(self.chunks.valid),
                writer.cmd.payload.addr.eq(self.chunks.payload.pa),
                writer.cmd.payload.length.eq(self.chunks.payload.length),
                self.chunks.ready.eq(writer.cmd.ready),
                writer.data.valid.eq(self.words.valid & (words_left != 0)),
                writer.data.payload.data.eq(self.words.payload.data),
                writer.data.payload.nbytes.eq(Mux(words_left == 1, last_nbytes, 4)),
                self.words.ready.eq(writer.data.ready & (words_left != 0)),
            ]
            with m.If(self.words.valid & self.words.ready):
                m.d.sync += words_left.eq(words_left - 1)

        with m.FSM():
            with m.State("WALK"):
                with m.If(self.job.valid & (job.length == 0)):
                    m.d.comb += self.job.ready.eq(1)
                with m.Else():
                    m.d.comb += [
                        self.walk.valid.eq(self.job.valid),
                        self.walk.payload.op.eq(OP_WALK),
                        self.walk.payload.offset.eq(job.offset),
                        self.walk.payload.length.eq(job.length),
                    ]
                    with m.If(self.walk.valid & self.walk.ready):
                        m.d.sync += words_left.eq((job.length + 3) >> 2)
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                stream_payload()
                # The walk's answer is taken once the words are all in, or at once if it failed.
                m.d.comb += self.walk_result.ready.eq((words_left == 0) | failed)
                with m.If(failed):
                    # The ATT changed under a checked message: give the payload up.
                    m.d.comb += [writer.flush.eq(1), self.job.ready.eq(1), self.error.eq(1)]
                    m.next = "WALK"
                with m.Elif(self.walk_result.valid & self.walk_result.ready):
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                # The walker has answered, so no chunk is left to come: the writer's last
                # command is all there is to wait for.
                stream_payload()
                with m.If(~writer.busy):
                    m.d.comb += [writer.flush.eq(1), self.written.eq(1), self.job.ready.eq(1)]
                    m.next = "WALK"
        return m
