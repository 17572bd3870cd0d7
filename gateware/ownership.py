"""Ownership of the tags and memories: the local access controller and the sequencer take turns.

Each holds ownership for one indivisible piece of work (the local side: one access, lookup to
answer; the sequencer: one run of a context), so neither ever sees the other's half-done update
of a line. A grant comes the cycle after the request. The local side wins when both ask in the
same cycle; a requester that was refused gets ownership in the cycle after the other lets go
(the hand-over costs no idle cycle), so neither starves.
"""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

_NOBODY, _LOCAL, _REMOTE = 0, 1, 2


class Ownership(wiring.Component):
    local_req: In(1)
    local_grant: Out(1)
    remote_req: In(1)
    remote_grant: Out(1)

    def elaborate(self, platform):
        m = Module()
        owner = Signal(2)
        remote_waited = Signal()  # the sequencer was refused: it goes next
        with m.Switch(owner):
            with m.Case(_NOBODY):
                with m.If(self.remote_req & (remote_waited | ~self.local_req)):
                    m.d.sync += [owner.eq(_REMOTE), remote_waited.eq(0)]
                with m.Elif(self.local_req):
                    m.d.sync += owner.eq(_LOCAL)
            with m.Case(_LOCAL):
                with m.If(~self.local_req):
                    with m.If(self.remote_req):
                        m.d.sync += [owner.eq(_REMOTE), remote_waited.eq(0)]
                    with m.Else():
                        m.d.sync += owner.eq(_NOBODY)
                with m.Elif(self.remote_req):
                    m.d.sync += remote_waited.eq(1)
            with m.Case(_REMOTE):
                with m.If(~self.remote_req):
                    with m.If(self.local_req):
                        m.d.sync += owner.eq(_LOCAL)
                    with m.Else():
                        m.d.sync += owner.eq(_NOBODY)
        m.d.comb += [self.local_grant.eq(owner == _LOCAL), self.remote_grant.eq(owner == _REMOTE)]
        return m
