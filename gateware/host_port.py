"""The card's host port: how the host (PCI in the paper, the SoC bus, a trace player or PCIe here)
reaches the shared window and the private memory.

A host access is a *request* (byte address, read/write, burst length in 32-bit words), followed
for writes by one *write beat* per word (data + byte enables). The card answers every request:
a read with one *response beat* per word, a write with a single beat, ``last`` on the final beat
and ``error`` set on every beat of a refused access (bad address, bad length). Requests are
served in order.

Host port address map (bytes; parameters of :class:`HostAddressMap`)::

    0                               max_nodes * slice_bytes          + private_bytes
    | node 0 slice | node 1 slice | ... |     private (never shared)    |
"""

from dataclasses import dataclass

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.coherence import LINE_BYTES, MAX_NODES

from . import wishbone
from .round_robin import RoundRobin

MAX_BURST_WORDS = 64

RequestLayout = data.StructLayout({"addr": 32, "write": 1, "count": 7})
WriteBeatLayout = data.StructLayout({"data": 32, "be": 4})
ResponseLayout = data.StructLayout({"data": 32, "error": 1, "last": 1})


class HostPortSignature(wiring.Signature):
    """Initiator's (host's) view."""

    def __init__(self):
        super().__init__(
            {
                "req": Out(stream.Signature(RequestLayout)),
                "wdata": Out(stream.Signature(WriteBeatLayout)),
                "resp": In(stream.Signature(ResponseLayout)),
            }
        )


@dataclass(frozen=True)
class HostAddressMap:
    slice_bytes: int = 256 * 1024
    max_nodes: int = MAX_NODES
    private_bytes: int = 64 * 1024

    def __post_init__(self):
        for name in ("slice_bytes", "private_bytes"):
            v = getattr(self, name)
            if v & (v - 1) or v < LINE_BYTES:
                raise ValueError(f"{name} must be a power of two of at least one line")
        if self.slice_bytes > 1 << 26:
            raise ValueError("a slice is at most 64 MiB (26 offset bits in a line address)")

    @property
    def slice_bits(self):
        return self.slice_bytes.bit_length() - 1

    @property
    def shared_bytes(self):
        return self.max_nodes * self.slice_bytes

    @property
    def private_base(self):
        return self.shared_bytes

    @property
    def window_bytes(self):
        """The smallest power of two holding the shared window and the private memory."""
        size = self.shared_bytes + self.private_bytes
        return 1 << (size - 1).bit_length()

    def decode(self, addr):
        """``("shared", home, offset)``, ``("private", offset)`` or ``None``; for models and tests."""
        if addr < self.shared_bytes:
            return ("shared", addr >> self.slice_bits, addr & (self.slice_bytes - 1))
        if addr < self.private_base + self.private_bytes:
            return ("private", addr - self.private_base)
        return None


class WishboneHostPort(wiring.Component):
    """A Wishbone target (the SoC bus window onto the card) turned into single-word host accesses.

    ``bus`` addresses are word addresses relative to the window. An ``error`` response becomes a
    Wishbone ``err``.
    """

    def __init__(self, *, addr_width):
        super().__init__(
            {
                "bus": In(wishbone.Signature(addr_width=addr_width)),
                "host": Out(HostPortSignature()),
            }
        )

    def elaborate(self, platform):
        m = Module()
        bus, host = self.bus, self.host
        m.d.comb += [
            host.req.payload.addr.eq(bus.adr << 2),
            host.req.payload.write.eq(bus.we),
            host.req.payload.count.eq(1),
            host.wdata.payload.data.eq(bus.dat_w),
            host.wdata.payload.be.eq(bus.sel),
        ]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += host.req.valid.eq(bus.cyc & bus.stb & ~bus.ack & ~bus.err)
                with m.If(host.req.valid & host.req.ready):
                    m.next = "WDATA"
                    with m.If(~bus.we):
                        m.next = "RESP"
            with m.State("WDATA"):
                m.d.comb += host.wdata.valid.eq(1)
                with m.If(host.wdata.ready):
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += host.resp.ready.eq(1)
                with m.If(host.resp.valid):
                    m.d.sync += [
                        bus.dat_r.eq(host.resp.payload.data),
                        bus.ack.eq(~host.resp.payload.error),
                        bus.err.eq(host.resp.payload.error),
                    ]
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.sync += [bus.ack.eq(0), bus.err.eq(0)]
                m.next = "IDLE"
        return m


class HostPortArbiter(wiring.Component):
    """Several hosts onto one host port, round robin, one whole access at a time."""

    def __init__(self, count):
        self.count = count
        members = {f"host{i}": In(HostPortSignature()) for i in range(count)}
        members["out"] = Out(HostPortSignature())
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        hosts = [getattr(self, f"host{i}") for i in range(self.count)]
        out = self.out
        grant = Signal(range(self.count))
        busy = Signal()

        # Of the waiting hosts, the first one after the last granted one.
        m.submodules.next_host = next_host = RoundRobin(self.count)
        m.d.comb += [next_host.requests.eq(Cat(h.req.valid for h in hosts)), next_host.last.eq(grant)]
        with m.If(~busy & next_host.found):
            m.d.sync += [grant.eq(next_host.choice), busy.eq(1)]
        for i, h in enumerate(hosts):
            selected = busy & (grant == i)
            with m.If(selected):
                m.d.comb += [
                    out.req.payload.eq(h.req.payload),
                    out.req.valid.eq(h.req.valid),
                    h.req.ready.eq(out.req.ready),
                    out.wdata.payload.eq(h.wdata.payload),
                    out.wdata.valid.eq(h.wdata.valid),
                    h.wdata.ready.eq(out.wdata.ready),
                    h.resp.payload.eq(out.resp.payload),
                    h.resp.valid.eq(out.resp.valid),
                    out.resp.ready.eq(h.resp.ready),
                ]
        # The grant ends with the last response beat of the access.
        with m.If(busy & out.resp.valid & out.resp.ready & out.resp.payload.last):
            m.d.sync += busy.eq(0)
        return m
