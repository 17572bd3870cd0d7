"""Allocation filter: the remote lines that missed lately, so the network cache takes a line at
its second read miss and not at its first, and not at all while its copies die unused.

A line read once (an FFT's transpose) gains nothing from the network cache and costs its home a
recall when the home writes it again; NUMA mode never pays that. A line's first read miss is
therefore read without caching it (``LocalKind.READ_ONCE``), and the filter remembers it; a
second read miss while it is remembered caches it. A line whose cached copy is purged (a writer,
or its home, took it back) before the host ever hit it is producer-consumer data (Ocean's
boundary rows): the filter marks it dead, and its read misses are not cached until a write miss
caches it and the host hits it, or the filter forgets it. So does a second miss its home answers
uncached because it wrote the line since the first (the home's SHOWN state, sci.uasm). A forgotten line (another line took its
entry) only starts over: the filter decides a policy, never coherence.

One entry per index, direct mapped by the network cache's own set hash, holding the whole
global line address, so a line is never taken for another.
"""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from numavia.base.coherence import CacheGeometry

from .tag_store import set_of_line


class AllocationFilter(wiring.Component):
    """The access controller's side: ``line``, a global line address held steady; ``seen``: it
    missed lately, ``dead``: its copies died unused (both valid from the second cycle ``line``
    is steady). ``remember``: record ``line`` (its first miss); ``referenced``: the host hit
    ``line`` in the network cache (it is remembered).

    The sequencer's side: ``purged``, a line whose copy here a writer purged, or whose second
    miss its home declined to cache (it wrote the line since the first). The two sides own
    the card in turn (``Ownership``), so their updates never meet; a purge takes two cycles (read
    the entry, write it)."""

    def __init__(self, geometry=CacheGeometry()):
        self.geometry = geometry
        super().__init__(
            {
                "line": In(32),
                "seen": Out(1),
                "dead": Out(1),
                "remember": In(1),
                "referenced": In(1),
                "purged": In(stream.Signature(32, always_ready=True)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        entry = data.StructLayout({"valid": 1, "line": g.line_addr_bits, "hit": 1, "dead": 1})
        m.submodules.memory = memory = Memory(shape=entry, depth=g.filter_lines, init=[])
        read, write = memory.read_port(), memory.write_port()

        def index(addr):
            return set_of_line(addr, g, g.filter_lines)

        line = self.line[g.offset_bits :]
        m.d.comb += [
            read.addr.eq(index(self.line)),
            self.seen.eq(read.data.valid & (read.data.line == line)),
            self.dead.eq(read.data.dead),
            write.addr.eq(index(self.line)),
            write.data.valid.eq(1),
            write.data.line.eq(line),
            write.data.hit.eq(self.referenced),
            write.en.eq(self.remember | self.referenced),
        ]

        # A purge: read the line's entry, then mark it dead unless the host hit the copy (a hit
        # is then used up: the next copy has to be hit again).
        purging = Signal()
        purged = Signal(32)
        m.d.sync += purging.eq(self.purged.valid)
        with m.If(self.purged.valid):
            m.d.sync += purged.eq(self.purged.payload)
            m.d.comb += read.addr.eq(index(self.purged.payload))
        with m.If(purging & read.data.valid & (read.data.line == purged[g.offset_bits :])):
            m.d.comb += [
                write.addr.eq(index(purged)),
                write.data.line.eq(purged[g.offset_bits :]),
                write.data.hit.eq(0),
                write.data.dead.eq(~read.data.hit),
                write.en.eq(1),
            ]
        return m
