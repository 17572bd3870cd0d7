"""A block's event counters in one memory, not in flip-flops.

A counter in flip-flops costs its register, a 32-bit adder and an input of the register bank's read
multiplexer; a block has dozens. Here every counter is a word of one memory: a sweep visits one
counter a cycle and adds what it gathered since its last visit, so the block keeps only a few
bits a counter (``pending``), one adder and the memory (as Corundum keeps its statistics).

``increments[i]`` is counter ``i``'s events this cycle (0..``most``). ``read`` answers the register
bank in the same cycle: in the cycle the bus reads a counter (``read.reading``) the sweep visits
that one instead, so the bus takes what the visit writes (the word plus what was pending) and a
read is exact wherever the sweep is, with one read port and one adder for both. The bus reads at
most every other cycle, so the sweep still moves on at least every other cycle: a counter is
visited within ``2 * count`` cycles and its pending count never exceeds ``2 * most * count``.
``clear`` zeroes every counter at once, the events of that cycle included: a flag per counter
makes it read 0 until the sweep next writes it. With ``saturate`` a counter stays at all ones
instead of wrapping.

``late`` registers the increments before counting them: an event is counted a cycle after it is
given (and a clear drops the events of the cycle before it instead), so the counters' adders and
memory are off the paths that decide the events; a block whose events come out of long decisions
(the ring link's verdict, the sequencer's dispatch) asks for it.

``in_memory=False`` keeps the counters in flip-flops instead, a register and an adder each, behind
the same ports and with the same answers: for a card whose clock needs the memory's read and
sweep off its paths more than its LUTs need the saving (``CardConfig.counters_in_memory``).
"""

from amaranth import Array, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from .register_bank import indexed_signature


class EventCounters(wiring.Component):
    def __init__(self, count, *, most=1, width=32, saturate=False, in_memory=True, late=False):
        if count < 1 or most < 1:
            raise ValueError(f"event counters need at least one counter and one event a cycle, not {count} and {most}")
        self.count, self.most, self.width, self.saturate = count, most, width, saturate
        self.in_memory, self.late = in_memory, late
        super().__init__(
            {
                "increments": In(data.ArrayLayout(unsigned(most.bit_length()), count)),
                "clear": In(1),
                "read": In(indexed_signature(count, width)),
            }
        )

    def _total(self, base, pending):
        """``base + pending``, wrapped or held at all ones."""
        total = base + pending
        if self.saturate:
            return Mux(total[self.width], (1 << self.width) - 1, total[: self.width])
        return total[: self.width]

    def _counted_increments(self, m):
        """The increments the counters add this cycle: as given, or given a cycle ago (``late``)."""
        if not self.late:
            return self.increments
        given = Signal.like(self.increments, name="given")
        m.d.sync += given.eq(self.increments)
        return given

    def elaborate(self, platform):
        if not self.in_memory:
            return self._in_flip_flops()
        m = Module()
        increments = self._counted_increments(m)
        count = self.count
        m.submodules.words = words = Memory(shape=self.width, depth=count, init=[])
        pending = Array(Signal(range(2 * self.most * count + 1), name=f"pending{i}") for i in range(count))
        cleared = Signal(count)  # reads 0 until the sweep writes it
        sweep = Signal(range(count))
        visit = Signal(range(count))  # the counter visited: the one the bus reads, else the sweep's

        # The visited counter's word takes what it gathered (and the bus reads that), its pending
        # count starts again with this cycle's events.
        read, write = words.read_port(domain="comb"), words.write_port()
        counted = Signal(self.width)
        m.d.comb += [
            visit.eq(Mux(self.read.reading, self.read.index, sweep)),
            read.addr.eq(visit),
            counted.eq(self._total(Mux(cleared.bit_select(visit, 1), 0, read.data), pending[visit])),
            write.addr.eq(visit),
            write.en.eq(1),
            write.data.eq(counted),
            self.read.value.eq(counted),
        ]
        with m.If(~self.read.reading):
            m.d.sync += sweep.eq(Mux(sweep == count - 1, 0, sweep + 1))
        with m.If(self.clear):
            m.d.sync += [cleared.eq((1 << count) - 1), *(p.eq(0) for p in pending)]
        with m.Else():
            m.d.sync += cleared.bit_select(visit, 1).eq(0)
            for i, p in enumerate(pending):
                m.d.sync += p.eq(Mux(visit == i, 0, p) + increments[i])
        return m

    def _in_flip_flops(self):
        """A register and an adder a counter, read through a multiplexer."""
        m = Module()
        increments = self._counted_increments(m)
        counters = Array(Signal(self.width, name=f"counter{i}") for i in range(self.count))
        for i, counter in enumerate(counters):
            m.d.sync += counter.eq(Mux(self.clear, 0, self._total(counter, increments[i])))
        m.d.comb += self.read.value.eq(counters[self.read.index])
        return m
