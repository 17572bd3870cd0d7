"""Wishbone B4 classic, as LiteX's SoC bus speaks it: word addresses, byte selects, ``err``.

(amaranth-soc is not released on PyPI, so the card carries the small part of Wishbone it needs.)
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Signature(wiring.Signature):
    """Initiator's view: ``Out`` members are driven by the initiator. ``extra`` adds members
    (the bursting variant's ``cti``/``bte``)."""

    def __init__(self, *, addr_width, data_width=32, granularity=8, extra=None):
        if data_width % granularity:
            raise ValueError("data_width must be a multiple of granularity")
        self.addr_width = addr_width
        self.data_width = data_width
        self.granularity = granularity
        super().__init__(
            {
                "cyc": Out(1),
                "stb": Out(1),
                "we": Out(1),
                "adr": Out(addr_width),
                "dat_w": Out(data_width),
                "sel": Out(data_width // granularity),
                **(extra or {}),
                "dat_r": In(data_width),
                "ack": In(1),
                "err": In(1),
            }
        )

    def __eq__(self, other):
        return type(other) is type(self) and (self.addr_width, self.data_width, self.granularity) == (
            other.addr_width,
            other.data_width,
            other.granularity,
        )

    def __repr__(self):
        return (
            f"{type(self).__module__.rsplit('.', 1)[-1]}.Signature(addr_width={self.addr_width}, "
            f"data_width={self.data_width})"
        )


def byte_mask(sel, granularity=8):
    """Expand a byte-select vector into a bit mask."""
    return Cat(*[s.replicate(granularity) for s in sel])


class Decoder(wiring.Component):
    """Routes one target port to several sub-buses by address; unmapped addresses answer ``err``.

    ``windows`` is a list of ``(name, word_base, sub_addr_width)``; each window decodes the
    ``sub_addr_width`` low address bits and must be aligned to its size.

    The sub-buses answer from registers, a cycle or more after the access reaches them (as every
    register bank does), so the answer is routed by the window of the cycle before: ``ack`` and
    ``err`` are the sub-buses' own (only the addressed one answers) and ``dat_r`` is selected by
    a registered match. The address then reaches only the sub-buses' decoders, not back through
    ``ack`` into the initiator's next address (while the card's DMA was a master of the SoC bus,
    that loop was the card's longest path: docs/boards.md).
    """

    def __init__(self, *, addr_width, windows, data_width=32):
        self._windows = list(windows)
        members = {"bus": In(Signature(addr_width=addr_width, data_width=data_width))}
        for name, base, sub_width in self._windows:
            if base % (1 << sub_width):
                raise ValueError(f"window {name} at {base:#x} is not aligned to its size")
            if base + (1 << sub_width) > (1 << addr_width):
                raise ValueError(f"window {name} does not fit in {addr_width} address bits")
            members[name] = Out(Signature(addr_width=sub_width, data_width=data_width))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        hit_any = Signal()
        unmapped_err = Signal()
        acks, errs, hits = [], [], []
        for name, base, sub_width in self._windows:
            sub = getattr(self, name)
            hit = Signal(name=f"hit_{name}")
            answering = Signal(name=f"answering_{name}")  # the window addressed a cycle ago
            m.d.comb += [
                hit.eq((bus.adr >> sub_width) == (base >> sub_width)),
                sub.adr.eq(bus.adr[:sub_width]),
                sub.dat_w.eq(bus.dat_w),
                sub.sel.eq(bus.sel),
                sub.we.eq(bus.we),
                sub.cyc.eq(bus.cyc & hit),
                sub.stb.eq(bus.stb & hit),
            ]
            m.d.sync += answering.eq(hit)
            with m.If(answering):
                m.d.comb += bus.dat_r.eq(sub.dat_r)
            hits.append(hit)
            acks.append(sub.ack)
            errs.append(sub.err)
        m.d.comb += hit_any.eq(Cat(*hits).any() if hits else Const(0))
        # An access nobody decodes is refused, once, so the initiator never hangs.
        m.d.sync += unmapped_err.eq(bus.cyc & bus.stb & ~hit_any & ~unmapped_err)
        m.d.comb += [
            bus.ack.eq(Cat(*acks).any() if acks else 0),
            bus.err.eq((Cat(*errs).any() if errs else 0) | unmapped_err),
        ]
        return m


class RequestRegister(wiring.Component):
    """A register stage on the request of a target that is not on a latency path: its decode sees
    the address a cycle after the initiator put it on the bus, so the initiator's address (from the
    SoC's bus, through LiteX's and the card's decoders) ends at these flip-flops instead of running
    on into the target's own decode. Each access takes a cycle more.

    The answer (``ack``, ``err``, ``dat_r``) passes straight back: the targets register it (as
    every register bank does). The registered ``stb`` drops in the cycle after the target answers,
    while the initiator's is still up for it, so that the target never sees the access twice. An
    access the initiator abandons before its answer still reaches the target (LiteX's initiators
    never abandon one).
    """

    def __init__(self, *, addr_width, data_width=32):
        sig = Signature(addr_width=addr_width, data_width=data_width)
        super().__init__({"bus": In(sig), "target": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        bus, target = self.bus, self.target
        answered = target.ack | target.err
        m.d.sync += [
            target.cyc.eq(bus.cyc & ~answered),
            target.stb.eq(bus.stb & ~answered),
            target.we.eq(bus.we),
            target.adr.eq(bus.adr),
            target.dat_w.eq(bus.dat_w),
            target.sel.eq(bus.sel),
        ]
        m.d.comb += [bus.dat_r.eq(target.dat_r), bus.ack.eq(target.ack), bus.err.eq(target.err)]
        return m
