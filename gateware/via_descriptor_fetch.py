"""Descriptor fetcher: reads one VI descriptor from host memory by DMA.

It reads the descriptor in one burst: the control segment and, before it knows how long the
descriptor is, the address segment and one data segment (a small message's whole descriptor, never
past the end of the VI's descriptor area). It checks the operation and the segment count while the
burst goes on, writes the data segments straight into a scatter/gather walker's segment table, and
reads a second burst only for segments past the first (words read past a shorter descriptor are
dropped). The control and address segments stay on its outputs until the next
fetch. The answer is OK, FORMAT (bad operation, CONTROL bits no version defines, more segments
than the card handles, or segments running past the end of the VI's descriptor area) or DMA (a
bus error: the descriptor address does not hold memory).

``postable`` is the doorbell side of the same rule (checked by the engine as a doorbell arrives): a
doorbell names a descriptor whose control segment lies in host memory and in its VI's descriptor
area; the rest is checked here, once the control segment has said how long the descriptor is.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import via_descriptor
from numavia.base.params import BUS_ADDR_WIDTH

from . import wishbone_burst
from .via_dma_reader import DmaReader
from .via_layouts import DescAddress, DescControl
from .via_scatter_gather import Segment

FETCH_OK, FETCH_FORMAT, FETCH_DMA = 0, 1, 2

#: A fetch: the descriptor's address and the end (exclusive) of its VI's descriptor area.
FetchCommand = data.StructLayout({"addr": 32, "area_end": 33})


def postable(p, addr, area_base, area_size):
    """Whether a doorbell may queue the descriptor at ``addr`` (``p``: the engine's ViaParams):
    aligned, and its control segment inside host memory and inside the VI's descriptor area."""
    end = addr + via_descriptor.CONTROL_SEGMENT.size
    return (
        (addr[: (via_descriptor.DESCRIPTOR_ALIGN - 1).bit_length()] == 0)
        & (addr >= p.host_base)
        & (end <= p.host_base + p.host_size)
        & (addr >= area_base)
        & (end <= area_base + area_size)
    )


_CONTROL_WORDS = via_descriptor.CONTROL_SEGMENT.size // 4
_ADDRESS_WORDS = via_descriptor.ADDRESS_SEGMENT.size // 4
_DATA_WORDS = via_descriptor.DATA_SEGMENT.size // 4
#: Bytes of the first burst: a descriptor with an address segment and one data segment.
FIRST_BURST_BYTES = via_descriptor.descriptor_size(1, rdma=True)


class DescriptorFetcher(wiring.Component):
    def __init__(self, *, max_segments):
        self.max_segments = max_segments
        super().__init__(
            {
                "bus": Out(wishbone_burst.Signature(addr_width=BUS_ADDR_WIDTH)),
                "cmd": In(stream.Signature(FetchCommand)),
                "result": Out(stream.Signature(2)),
                "control": Out(DescControl),
                "address": Out(DescAddress),
                "seg_index": Out(range(max_segments)),
                "seg_data": Out(Segment),
                "seg_write": Out(1),
                "seg_count": Out(range(max_segments + 1)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.reader = reader = DmaReader()
        wiring.connect(m, reader.bus, wiring.flipped(self.bus))

        addr = Signal(32)
        area_end = Signal(33)
        words = Signal(range(_ADDRESS_WORDS + _DATA_WORDS * self.max_segments + _CONTROL_WORDS + 1))
        error = Signal()
        status = Signal(2)
        segment = Signal(128)
        control = Signal(DescControl.size)
        address = Signal(DescAddress.size)
        m.d.comb += [self.control.eq(control), self.address.eq(address)]
        view = DescControl(control)
        op = view.control.op
        rdma = (op == via_descriptor.CONTROL_OP.RDMA_WRITE) | (op == via_descriptor.CONTROL_OP.RDMA_READ)
        head_words = Signal(range(_ADDRESS_WORDS + 1))
        m.d.comb += head_words.eq(rdma * _ADDRESS_WORDS)

        beat = reader.beats.payload
        got = reader.beats.valid & reader.beats.ready
        rest_words = Signal.like(words)  # the words after the control segment this descriptor has
        m.d.comb += rest_words.eq(head_words + view.seg_count * _DATA_WORDS)
        burst_end = Signal(33)  # the end of what has been asked of the reader
        burst_over = Signal()  # the reader has delivered its last beat

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    # The control segment whatever the area says (the doorbell checked it), and no
                    # more of the first burst than the area holds.
                    cmd = self.cmd.payload
                    end = cmd.addr + FIRST_BURST_BYTES
                    limit = Mux(
                        cmd.area_end < cmd.addr + _CONTROL_WORDS * 4, cmd.addr + _CONTROL_WORDS * 4, cmd.area_end
                    )
                    m.d.sync += [
                        addr.eq(cmd.addr),
                        area_end.eq(cmd.area_end),
                        burst_end.eq(Mux(end > limit, limit, end)),
                        words.eq(0),
                        error.eq(0),
                        burst_over.eq(0),
                        self.seg_count.eq(0),
                    ]
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += [
                    reader.cmd.valid.eq(1),
                    reader.cmd.payload.addr.eq(addr),
                    reader.cmd.payload.length.eq(burst_end - addr),
                ]
                with m.If(reader.cmd.ready):
                    m.next = "CONTROL"
            with m.State("CONTROL"):
                m.d.comb += reader.beats.ready.eq(1)
                with m.If(got):
                    m.d.sync += [
                        control.eq(Cat(control[32:], beat.data)),
                        error.eq(error | beat.error),
                        words.eq(words + 1),
                        burst_over.eq(beat.last),
                    ]
                    with m.If(words == _CONTROL_WORDS - 1):
                        m.next = "CHECK"
            with m.State("CHECK"):
                # The rest of the first burst waits in the reader meanwhile.
                m.d.sync += words.eq(0)
                with m.If(error):
                    m.d.sync += status.eq(FETCH_DMA)
                    m.next = "DRAIN"
                with m.Elif(
                    (op == 3)
                    | (view.control.as_value() & via_descriptor.CONTROL_UNDEFINED_MASK).any()
                    | (view.seg_count > self.max_segments)
                    | (addr + via_descriptor.CONTROL_SEGMENT.size + rest_words * 4 > area_end)
                ):
                    m.d.sync += status.eq(FETCH_FORMAT)
                    m.next = "DRAIN"
                with m.Elif(rest_words == 0):
                    m.d.sync += status.eq(FETCH_OK)
                    m.next = "DRAIN"
                with m.Elif(burst_over):
                    m.next = "READ_REST"
                with m.Else():
                    m.next = "REST"
            with m.State("READ_REST"):
                # Segments past the first burst.
                m.d.comb += [
                    reader.cmd.valid.eq(1),
                    reader.cmd.payload.addr.eq(addr + via_descriptor.CONTROL_SEGMENT.size + words * 4),
                    reader.cmd.payload.length.eq((rest_words - words) * 4),
                ]
                with m.If(reader.cmd.ready):
                    m.d.sync += burst_over.eq(0)
                    m.next = "REST"
            with m.State("REST"):
                m.d.comb += reader.beats.ready.eq(1)
                needed = words < rest_words
                with m.If(got):
                    m.d.sync += [words.eq(words + 1), burst_over.eq(beat.last)]
                    with m.If(needed):
                        m.d.sync += error.eq(error | beat.error)
                        with m.If(words < head_words):
                            m.d.sync += address.eq(Cat(address[32:], beat.data))
                        with m.Else():
                            m.d.sync += segment.eq(Cat(segment[32:], beat.data))
                            with m.If((words - head_words)[:2] == _DATA_WORDS - 1):
                                m.d.comb += self.seg_write.eq(1)
                    with m.If(words + 1 == rest_words):
                        m.d.sync += [
                            status.eq(Mux(error | beat.error, FETCH_DMA, FETCH_OK)),
                            self.seg_count.eq(view.seg_count),
                        ]
                    with m.If(beat.last):
                        with m.If(words + 1 >= rest_words):
                            m.next = "ANSWER"
                        with m.Else():
                            m.next = "READ_REST"
            with m.State("DRAIN"):
                # Words of the first burst past a descriptor that ended (or failed) sooner.
                m.d.comb += reader.beats.ready.eq(1)
                with m.If(burst_over | (got & beat.last)):
                    m.next = "ANSWER"
            with m.State("ANSWER"):
                m.d.comb += [self.result.valid.eq(1), self.result.payload.eq(status)]
                with m.If(self.result.ready):
                    m.next = "IDLE"

        # A segment is written when its fourth word arrives: the table gets the assembled words.
        m.d.comb += [
            self.seg_index.eq((words - head_words) >> 2),
            self.seg_data.eq(Cat(segment[32:], beat.data)),
        ]
        return m
