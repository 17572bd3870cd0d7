"""Ownership of the tags and memories: the local access controller and the sequencer take turns.

Each holds ownership for one indivisible piece of work (the local side: one access, lookup to
answer; the sequencer: one run of a context), so neither ever sees the other's half-done update
of a line. The local side wins when both ask in the same cycle; a requester that was refused
gets ownership as soon as the other lets go, so neither starves.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Ownership(wiring.Component):
    local_req: In(1)
    local_grant: Out(1)
    remote_req: In(1)
    remote_grant: Out(1)

    def elaborate(self, platform):
        m = Module()
        owner = Signal(2)  # 0: nobody, 1: local, 2: remote
        remote_waited = Signal()  # the sequencer was refused: it goes next
        with m.Switch(owner):
            with m.Case(0):
                with m.If(self.remote_req & (remote_waited | ~self.local_req)):
                    m.d.sync += [owner.eq(2), remote_waited.eq(0)]
                with m.Elif(self.local_req):
                    m.d.sync += owner.eq(1)
            with m.Case(1):
                with m.If(self.remote_req):
                    m.d.sync += remote_waited.eq(1)
                with m.If(~self.local_req):
                    m.d.sync += owner.eq(0)
            with m.Case(2):
                with m.If(~self.remote_req):
                    m.d.sync += owner.eq(0)
        m.d.comb += [self.local_grant.eq(owner == 1), self.remote_grant.eq(owner == 2)]
        return m
