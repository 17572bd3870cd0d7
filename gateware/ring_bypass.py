"""Bypass of the SCI ring link: packets for other nodes, forwarded unchanged through a FIFO, and
the scrubber that removes corrupt packets nobody else would (the protocol: ``ring_link``'s
docstring, "Scrubber").

``passing`` brings every packet that is not this node's, symbol by symbol, then its end (with
whether it proved corrupt); ``out`` gives the forwarded symbols, each packet followed by an end
marker (``end`` set), to the output, which pops an entry a cycle while it sends a bypassed packet.
An empty FIFO is passed by: the entry coming in is offered on ``out`` in the same cycle, and stored
only if the output does not take it.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.sci_packet import SYMBOL_BITS

from .ring_receive import PassingLayout

#: An entry of the bypass FIFO: a symbol, or (``end`` set) the end of a packet.
BypassEntry = data.StructLayout({"data": SYMBOL_BITS, "end": 1})

#: Events the bypass counts (ring counter names and ERRORS fields), each at most once a cycle.
BYPASS_EVENTS = ("BYPASSED", "SCRUBBED", "BYPASS_OVERFLOW")


class RingBypass(wiring.Component):
    """``depth``: entries of the bypass FIFO (symbols plus one end marker per packet).
    ``scrub_window``: cycles the scrubber remembers a corrupt packet's first symbol."""

    def __init__(self, *, depth):
        self.depth = depth
        super().__init__(
            {
                "passing": In(stream.Signature(PassingLayout, always_ready=True)),
                "enable": In(1),
                "scrub_window": In(16),
                "out": Out(stream.Signature(BypassEntry)),
                "level": Out(range(depth + 1)),
                "events": Out(data.StructLayout({name: 1 for name in BYPASS_EVENTS})),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = bypass = fifo.SyncFIFO(width=BypassEntry.size, depth=self.depth)
        incoming = self.passing.payload
        starting = self.passing.valid & incoming.first
        ending = self.passing.valid & incoming.end

        # Scrubber memory: the first symbol of the last corrupt packet forwarded.
        suspect = Signal(SYMBOL_BITS)
        suspect_valid = Signal()
        suspect_age = Signal(16)
        first_q = Signal(SYMBOL_BITS)
        forward_q = Signal()
        scrub = self.enable & suspect_valid & (incoming.data == suspect)
        forward_now = Mux(incoming.first, ~scrub, forward_q)
        with m.If(starting):
            m.d.sync += [forward_q.eq(~scrub), first_q.eq(incoming.data)]
        m.d.comb += [
            self.events.BYPASSED.eq(starting & ~scrub),
            self.events.SCRUBBED.eq(starting & scrub),
        ]

        with m.If(starting & scrub):
            m.d.sync += suspect_valid.eq(0)
        with m.Elif(suspect_valid & (suspect_age >= self.scrub_window)):
            m.d.sync += suspect_valid.eq(0)
        with m.Else():
            m.d.sync += suspect_age.eq(Mux(suspect_age == 0xFFFF, suspect_age, suspect_age + 1))
        with m.If(ending & forward_q & incoming.corrupt & self.enable):
            m.d.sync += [suspect.eq(first_q), suspect_valid.eq(1), suspect_age.eq(0)]

        # Forwarded packets: their symbols, then an end marker.
        forwarding = self.passing.valid & forward_now
        entry = Cat(incoming.data, incoming.end)
        passed_by = ~bypass.r_rdy & self.out.ready  # the FIFO is empty and the output takes the entry
        m.d.comb += [
            self.out.valid.eq(bypass.r_rdy | forwarding),
            self.out.payload.eq(Mux(bypass.r_rdy, bypass.r_data, entry)),
            bypass.r_en.eq(self.out.ready),
            bypass.w_en.eq(forwarding & ~passed_by),
            bypass.w_data.eq(entry),
            self.level.eq(bypass.level),
            self.events.BYPASS_OVERFLOW.eq(bypass.w_en & ~bypass.w_rdy),
        ]
        return m
