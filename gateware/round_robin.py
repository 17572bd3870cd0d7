"""Round-robin choice among requesters: the first one after the last chosen, else the first.

Combinational: the user keeps `last` (what it chose before) and decides when a choice is taken.
Costs logic in proportion to the requester count (a mask of the requesters after `last` and two
priority encoders), not its square, so a scheduler over many VIs stays small.
"""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


def lowest_set(m, name, bits):
    """The lowest set bit of a list of 1-bit values, one-hot: isolated as ``bits & -bits`` (a
    carry chain), a few LUT levels where a chain of priority muxes would take one per bit."""
    count = len(bits)
    vector = Signal(count, name=f"{name}_bits")
    lowest = Signal(count, name=f"{name}_lowest")
    m.d.comb += [vector.eq(Cat(*bits)), lowest.eq(vector & -vector)]
    return lowest


def one_hot_index(m, name, one_hot):
    """The index of the set bit of a one-hot value: an OR per index bit."""
    count = len(one_hot)
    index = Signal(range(max(2, count)), name=f"{name}_index")
    for b in range(len(index)):
        m.d.comb += index[b].eq(Cat(*[one_hot[i] for i in range(count) if i >> b & 1]).any())
    return index


def first_set(m, name, bits):
    """(found, index) of the lowest set bit of a list of 1-bit values (``lowest_set``, then
    ``one_hot_index``)."""
    found = Signal(name=f"{name}_found")
    m.d.comb += found.eq(Cat(*bits).any())
    return found, one_hot_index(m, name, lowest_set(m, name, bits))


class RoundRobin(wiring.Component):
    def __init__(self, count):
        self.count = count
        super().__init__(
            {
                "requests": In(count),
                "last": In(range(count)),  # the requester chosen last time
                "found": Out(1),  # some requester is waiting...
                "choice": Out(range(count)),  # ... and this one is next: after `last`, cyclically
            }
        )

    def elaborate(self, platform):
        m = Module()
        n = self.count
        # Requesters numbered above `last`: all ones shifted past it.
        after_last = Signal(n)
        m.d.comb += after_last.eq(self.requests & (C((1 << n) - 1, n) << (self.last + 1))[:n])
        any_after, first_after = first_set(m, "after_last", list(after_last))
        _, first = first_set(m, "first", list(self.requests))
        m.d.comb += [
            self.found.eq(self.requests.any()),
            self.choice.eq(Mux(any_after, first_after, first)),
        ]
        return m
