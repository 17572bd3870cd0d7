"""Host-port accesses as Wishbone single accesses: BAR0 reaches the card's register window.

The completer speaks the host-port protocol to both BARs; this bridge serves a burst of ``count``
words on the register bus one word at a time (registers have side effects, so no word is read
that was not asked for). A Wishbone ``err`` (no register at that offset, a write to a read-only
register) marks that word's response ``error``; a write's single response carries the OR.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .. import wishbone
from ..host_port import HostPortSignature


class HostPortToWishbone(wiring.Component):
    def __init__(self, *, addr_width):
        super().__init__(
            {
                "host": In(HostPortSignature()),
                "bus": Out(wishbone.Signature(addr_width=addr_width)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        host, bus = self.host, self.bus
        word = Signal(30)
        remaining = Signal(7)
        error = Signal()
        read_data = Signal(32)
        done = bus.ack | bus.err

        m.d.comb += [bus.adr.eq(word), bus.dat_w.eq(host.wdata.payload.data), bus.sel.eq(host.wdata.payload.be)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += host.req.ready.eq(1)
                with m.If(host.req.valid):
                    m.d.sync += [word.eq(host.req.payload.addr[2:]), remaining.eq(host.req.payload.count), error.eq(0)]
                    m.next = "READ"
                    with m.If(host.req.payload.write):
                        m.next = "WRITE"
            with m.State("READ"):
                m.d.comb += [bus.cyc.eq(1), bus.stb.eq(1)]
                with m.If(done):
                    m.d.sync += [read_data.eq(bus.dat_r), error.eq(bus.err)]
                    m.next = "READ_RESPONSE"
            with m.State("READ_RESPONSE"):
                m.d.comb += [
                    host.resp.valid.eq(1),
                    host.resp.payload.data.eq(read_data),
                    host.resp.payload.error.eq(error),
                    host.resp.payload.last.eq(remaining == 1),
                ]
                with m.If(host.resp.ready):
                    m.d.sync += [word.eq(word + 1), remaining.eq(remaining - 1)]
                    m.next = "READ"
                    with m.If(remaining == 1):
                        m.next = "IDLE"
            with m.State("WRITE"):
                m.d.comb += [
                    bus.cyc.eq(host.wdata.valid),
                    bus.stb.eq(host.wdata.valid),
                    bus.we.eq(1),
                    host.wdata.ready.eq(done),
                ]
                with m.If(host.wdata.valid & done):
                    m.d.sync += [word.eq(word + 1), remaining.eq(remaining - 1), error.eq(error | bus.err)]
                    with m.If(remaining == 1):
                        m.next = "WRITE_RESPONSE"
                    with m.Else():
                        m.next = "WRITE_GAP"
            with m.State("WRITE_GAP"):
                # One idle cycle between words: the registered ack of the last word is gone.
                m.next = "WRITE"
            with m.State("WRITE_RESPONSE"):
                m.d.comb += [host.resp.valid.eq(1), host.resp.payload.error.eq(error), host.resp.payload.last.eq(1)]
                with m.If(host.resp.ready):
                    m.next = "IDLE"
        return m
