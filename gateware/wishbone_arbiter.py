"""Round-robin arbiter: several Wishbone initiators share one initiator port.

A grant lasts while the granted initiator holds ``cyc``; when it drops ``cyc`` the next requester
(in round-robin order) is granted on the following cycle, so a target's late ``ack`` after a burst
still goes to the initiator that owned it. Routing is combinational, so a granted initiator sees
the target exactly as if it were connected directly. Ports are :mod:`wishbone_burst` ports.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import wishbone_burst
from .round_robin import RoundRobin


class WishboneArbiter(wiring.Component):
    def __init__(self, *, count, addr_width, data_width=32):
        if count < 1:
            raise ValueError("an arbiter needs at least one initiator")
        self.count = count
        sig = wishbone_burst.Signature(addr_width=addr_width, data_width=data_width)
        super().__init__(
            {
                "initiators": In(sig).array(count),
                "bus": Out(sig),
            }
        )

    def elaborate(self, platform):
        m = Module()
        n = self.count
        grant = Signal(range(n))
        requests = Cat(*(i.cyc for i in self.initiators))

        # Keep the grant while its owner holds cyc; otherwise move to the next requester after it.
        m.submodules.next_initiator = next_initiator = RoundRobin(n)
        m.d.comb += [next_initiator.requests.eq(requests), next_initiator.last.eq(grant)]
        with m.If(~(requests.bit_select(grant, 1)) & next_initiator.found):
            m.d.sync += grant.eq(next_initiator.choice)

        for i, ini in enumerate(self.initiators):
            granted = grant == i
            m.d.comb += [
                ini.dat_r.eq(self.bus.dat_r),
                ini.ack.eq(self.bus.ack & granted),
                ini.err.eq(self.bus.err & granted),
            ]
            with m.If(granted):
                m.d.comb += [
                    self.bus.cyc.eq(ini.cyc),
                    self.bus.stb.eq(ini.stb),
                    self.bus.we.eq(ini.we),
                    self.bus.adr.eq(ini.adr),
                    self.bus.dat_w.eq(ini.dat_w),
                    self.bus.sel.eq(ini.sel),
                    self.bus.cti.eq(ini.cti),
                    self.bus.bte.eq(ini.bte),
                ]
        return m
