"""The heads and tails of the VIs' work queues (one side's: send or receive), as records per VI.

The queues' descriptor addresses are in the engine's memory, ``depth`` slots a VI; this component
keeps where each queue starts and ends, so the VI count costs memory, not logic. Positions count
twice round (``range(2 * depth)``), so a full queue and an empty one differ.

* The engine owns the heads: it is at VI ``vi``, reads that VI's ``head`` and ``tail``, and
  ``advance`` moves the head on by one at the next edge (a descriptor done with). Both are read a
  cycle ahead, at ``next_vi`` (where ``vi`` will be in the next cycle), into registers: the
  engine's VI does not run through a 64-way read into its decisions (the routed card's longest
  path, docs/boards.md).
* The doorbells own the tails: a doorbell (at most one a cycle, never stalled) is ``taken`` if its
  VI's queue has room, and ``slot`` is where the engine writes its address; else it is
  ``refused``. A doorbell for the engine's VI is seen in ``tail`` from the next cycle.
* The bus reads a VI's count of queued descriptors (``queued``, in the cycle after it names
  ``status_vi``: from copies in block RAM).
* ``posted``: which VIs' queues hold descriptors, for a flush that looks at every VI.
"""

from amaranth import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .vi_records import ViRecords
from .via_links import doorbell_signature


class QueuePointers(wiring.Component):
    def __init__(self, vis, depth):
        if depth & (depth - 1):
            raise ValueError(f"a queue of {depth} slots: the depth must be a power of two")
        self.vis, self.depth = vis, depth
        position = range(2 * depth)
        super().__init__(
            {
                "vi": In(range(vis)),
                "next_vi": In(range(vis)),
                "head": Out(position),
                "tail": Out(position),
                "advance": In(1),
                "doorbell": In(doorbell_signature(vis)),
                "taken": Out(1),
                "refused": Out(1),
                "slot": Out(range(vis * depth)),
                "status_vi": In(range(vis)),
                "queued": Out(range(depth + 1)),
                "posted": Out(vis),
            }
        )

    def elaborate(self, platform):
        m = Module()
        vis, depth = self.vis, self.depth
        position = range(2 * depth)
        doorbell_vi = self.doorbell.payload.vi
        m.submodules.heads = heads = ViRecords(
            data.StructLayout({"head": position}), vis, peeks=1, peeks_next=1, read_ahead=True
        )
        m.submodules.tails = tails = ViRecords(data.StructLayout({"tail": position}), vis, peeks_ahead=1, peeks_next=1)
        m.d.comb += [
            heads.owner.vi.eq(self.vi),
            heads.owner.next_vi.eq(self.next_vi),
            heads.peek[0].vi.eq(doorbell_vi),
            heads.peek_next[0].vi.eq(self.status_vi),
            tails.owner.vi.eq(doorbell_vi),
            tails.peek_ahead[0].vi.eq(self.vi),
            tails.peek_ahead[0].next_vi.eq(self.next_vi),
            tails.peek_next[0].vi.eq(self.status_vi),
        ]
        head, tail = heads.owner.record.head, tails.peek_ahead[0].record.tail
        doorbell_tail = tails.owner.record.tail
        bits = len(head)

        def queued(tail_, head_):
            return (tail_ - head_)[:bits]

        m.d.comb += [
            self.head.eq(head),
            self.tail.eq(tail),
            self.queued.eq(queued(tails.peek_next[0].record.tail, heads.peek_next[0].record.head)),
            self.slot.eq(doorbell_vi * depth + doorbell_tail[: bits - 1]),
        ]
        with m.If(self.advance):
            m.d.comb += heads.update(head=head + 1)
            with m.If((head + 1)[:bits] == tail):
                m.d.sync += self.posted.bit_select(self.vi, 1).eq(0)
        with m.If(self.doorbell.valid):
            with m.If(queued(doorbell_tail, heads.peek[0].record.head) < depth):
                m.d.comb += [self.taken.eq(1), tails.update(tail=doorbell_tail + 1)]
                m.d.sync += self.posted.bit_select(doorbell_vi, 1).eq(1)  # after the advance's clear: it wins
            with m.Else():
                m.d.comb += self.refused.eq(1)
        return m
