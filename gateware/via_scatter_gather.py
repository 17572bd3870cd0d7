"""Scatter/gather walker: turns a message window into physical DMA chunks.

The engine loads a descriptor's data segments (virtual address, memory handle, length) into the
walker's segment table, or a single segment for the remote side of an RDMA. Then:

* ``VALIDATE`` looks every segment up in the ATT (the whole range of each, with the VI's
  protection tag and the right the operation needs) and answers the first failure, or success
  and the segments' total length. Nothing is transferred before this passes, so a failing
  descriptor touches no memory.
* ``WALK offset length`` emits the physical chunks that hold message bytes
  ``offset .. offset+length``, split where a segment or a page ends, for the DMA engines. A chunk
  in the first page of the first segment takes the physical address ``VALIDATE`` found for it, so a
  small message costs one lookup, not two; every other chunk is looked up (and checked) again.

``result`` answers every command once, after the last chunk of a walk.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base import via_att

from .via_translate import lookup_signature

OP_VALIDATE, OP_WALK = 0, 1

Segment = data.StructLayout({"va": 64, "handle": 32, "length": 32})
WalkCommand = data.StructLayout({"op": 1, "offset": 32, "length": 32})
WalkResult = data.StructLayout({"fail": 3, "total": 32})
Chunk = data.StructLayout({"pa": 32, "length": 16})


def lend(m, sg, walk, walk_result, active):
    """The walker's command and result ports to a block that walks for its job (`walk`,
    `walk_result`: the framer, the payload writer) while `active`. The engine's own commands
    (VALIDATE), assigned after this in its states, take the ports back."""
    m.d.comb += [
        sg.cmd.valid.eq(walk.valid),
        sg.cmd.payload.eq(walk.payload),
        walk.ready.eq(sg.cmd.ready),
        walk_result.valid.eq(sg.result.valid & active),
        walk_result.payload.eq(sg.result.payload),
        sg.result.ready.eq(walk_result.ready),
    ]


class ScatterGather(wiring.Component):
    def __init__(self, *, max_segments):
        self.max_segments = max_segments
        super().__init__(
            {
                "seg_index": In(range(max_segments)),
                "seg_data": In(Segment),
                "seg_write": In(1),
                "count": In(range(max_segments + 1)),
                "ptag": In(16),
                "need": In(2),
                "cmd": In(stream.Signature(WalkCommand)),
                "result": Out(stream.Signature(WalkResult)),
                "chunks": Out(stream.Signature(Chunk)),
                "att": Out(lookup_signature()),
            }
        )

    def elaborate(self, platform):
        m = Module()
        # The segments in LUT RAM, read where the walk is: as flip-flops, the 128-bit word behind a
        # multiplexer of `max_segments` inputs cost 1,024 flip-flops and about 1,000 LUTs a walker.
        m.submodules.table = table = Memory(shape=Segment, depth=self.max_segments, init=[])
        table_w = table.write_port()
        table_r = table.read_port(domain="comb")
        # VALIDATE's answer for the first segment: the physical address of its first byte and the
        # bytes to the end of that page. Forgotten when the segment changes or the next VALIDATE starts.
        first_pa = Signal(32)
        first_left = Signal(via_att.PAGE_SHIFT + 1)
        first_known = Signal()
        m.d.comb += [table_w.addr.eq(self.seg_index), table_w.data.eq(self.seg_data), table_w.en.eq(self.seg_write)]
        with m.If(self.seg_write):
            with m.If(self.seg_index == 0):
                m.d.sync += first_known.eq(0)

        index = Signal(range(self.max_segments + 1))
        skip = Signal(32)  # bytes of segment `index` before the window position
        remaining = Signal(32)  # bytes of the window still to emit
        total = Signal(33)
        fail = Signal(3)
        request_length = Signal(32)
        chunk_length = Signal(16)
        wanted = Signal(32)
        # The entry at `index` is used from a register: the table's read is not in series with the
        # walk's arithmetic (three carry chains), which it led as the routed card's longest path
        # (docs/boards.md). A step waits a cycle where the index has moved or the table was written.
        seg = Signal(Segment)
        seg_index = Signal.like(index)
        written = Signal()
        m.d.comb += table_r.addr.eq(index)
        m.d.sync += [seg.eq(table_r.data), seg_index.eq(index), written.eq(self.seg_write)]
        seg_ready = (seg_index == index) & ~written
        avail = Signal(32)
        m.d.comb += avail.eq(seg.length - skip)
        in_range = index < self.count

        att = self.att
        m.d.comb += [
            att.req.payload.handle.eq(seg.handle),
            att.req.payload.ptag.eq(self.ptag),
            att.req.payload.need.eq(self.need),
        ]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [
                        index.eq(0),
                        skip.eq(self.cmd.payload.offset),
                        total.eq(0),
                        fail.eq(0),
                        remaining.eq(self.cmd.payload.length),
                    ]
                    with m.If(self.cmd.payload.op == OP_VALIDATE):
                        m.d.sync += first_known.eq(0)
                        m.next = "VALIDATE"
                    with m.Else():
                        m.next = "SKIP"

            # --- VALIDATE: one whole-range lookup per segment --------------------------------
            with m.State("VALIDATE"):
                m.d.comb += [att.req.payload.va.eq(seg.va), att.req.payload.length.eq(seg.length)]
                with m.If(~seg_ready):
                    pass  # the entry at `index` is registered in this cycle
                with m.Elif(~in_range):
                    with m.If(total[32]):
                        m.d.sync += fail.eq(via_att.FAIL_RANGE)  # more than 4 GiB in all
                    m.next = "ANSWER"
                with m.Else():
                    m.d.comb += att.req.valid.eq(1)
                    with m.If(att.req.ready):
                        m.next = "VALIDATE_WAIT"
            with m.State("VALIDATE_WAIT"):
                m.d.comb += att.resp.ready.eq(1)
                with m.If(att.resp.valid):
                    m.d.sync += [total.eq(total + seg.length), index.eq(index + 1)]
                    with m.If(att.resp.payload.fail != via_att.FAIL_NONE):
                        m.d.sync += fail.eq(att.resp.payload.fail)
                        m.next = "ANSWER"
                    with m.Else():
                        with m.If(index == 0):
                            m.d.sync += [
                                first_pa.eq(att.resp.payload.pa),
                                first_left.eq(att.resp.payload.page_left),
                                first_known.eq(1),
                            ]
                        m.next = "VALIDATE"

            # --- WALK: find the window's first segment, then one lookup per chunk ------------
            with m.State("SKIP"):
                with m.If(~seg_ready):
                    pass  # the entry at `index` is registered in this cycle
                with m.Elif(in_range & (skip >= seg.length)):
                    m.d.sync += [skip.eq(skip - seg.length), index.eq(index + 1)]
                with m.Else():
                    m.next = "CHUNK"

            def emit(pa, length):
                """Offer the chunk; once taken, move the window on past it."""
                m.d.comb += [
                    self.chunks.valid.eq(1),
                    self.chunks.payload.pa.eq(pa),
                    self.chunks.payload.length.eq(length),
                ]
                with m.If(self.chunks.ready):
                    m.d.sync += remaining.eq(remaining - length)
                    with m.If(length == avail):
                        m.d.sync += [index.eq(index + 1), skip.eq(0)]
                    with m.Else():
                        m.d.sync += skip.eq(skip + length)
                    m.next = "CHUNK"

            with m.State("CHUNK"):
                m.d.comb += request_length.eq(Mux(avail < remaining, avail, remaining))
                m.d.comb += [att.req.payload.va.eq(seg.va + skip), att.req.payload.length.eq(request_length)]
                known_left = Signal(via_att.PAGE_SHIFT + 1)
                m.d.comb += known_left.eq(first_left - skip)
                with m.If(remaining == 0):
                    m.next = "ANSWER"
                with m.Elif(~seg_ready):
                    pass  # the entry at `index` is registered in this cycle
                with m.Elif(~in_range):
                    m.d.sync += fail.eq(via_att.FAIL_RANGE)  # the window runs past the segments
                    m.next = "ANSWER"
                with m.Elif(avail == 0):
                    m.d.sync += [index.eq(index + 1), skip.eq(0)]  # an empty segment
                with m.Elif((index == 0) & first_known & (skip < first_left)):
                    emit(first_pa + skip, Mux(request_length < known_left, request_length, known_left))
                with m.Else():
                    m.d.comb += att.req.valid.eq(1)
                    with m.If(att.req.ready):
                        m.next = "CHUNK_WAIT"
            with m.State("CHUNK_WAIT"):
                m.d.comb += wanted.eq(Mux(avail < remaining, avail, remaining))
                page_left = att.resp.payload.page_left
                m.d.comb += chunk_length.eq(Mux(wanted < page_left, wanted, page_left))
                with m.If(att.resp.valid & (att.resp.payload.fail != via_att.FAIL_NONE)):
                    m.d.comb += att.resp.ready.eq(1)
                    m.d.sync += fail.eq(att.resp.payload.fail)
                    m.next = "ANSWER"
                with m.Elif(att.resp.valid):
                    m.d.comb += att.resp.ready.eq(self.chunks.ready)
                    emit(att.resp.payload.pa, chunk_length)

            with m.State("ANSWER"):
                m.d.comb += [
                    self.result.valid.eq(1),
                    self.result.payload.fail.eq(fail),
                    self.result.payload.total.eq(total[:32]),
                ]
                with m.If(self.result.ready):
                    m.next = "IDLE"
        return m
