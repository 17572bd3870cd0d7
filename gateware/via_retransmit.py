"""Retransmission timers of the VIs' send queues: when to go back N, and when to give up.

Each VI has one timer, armed while it has frames the peer has not acknowledged. The transmit engine
drives it from its visit to a VI (``vi``): sending a frame ``start``s the timer if it is not running
(so the deadline belongs to the oldest frame in flight); an acknowledgement of new frames
(``acked``) restarts it and forgives the retries, and stops it once everything sent is
acknowledged (``acked_all``); an expiry the engine acts on is a ``retry``; ``stop`` is for a rewind,
a failed VI and a flush. ``due`` tells the engine's scheduler which VIs' timers have expired, and
``out_of_retries`` whether the visited VI's expiry is its last allowed one (``retry_limit``).

Outside the visit: a long RDMA read response arriving (``keepalive``) keeps its VI's timer from
expiring while it streams in, and connecting a VI (``clear``) stops its timer and forgets its
retries. Where two of these hit one VI in one cycle, the visit's command wins, then ``clear``.
"""

from amaranth import Array, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class RetransmitTimers(wiring.Component):
    def __init__(self, vis):
        self.vis = vis
        super().__init__(
            {
                "rto": In(32),  # card cycles from a (re)start to the expiry
                "retry_limit": In(16),
                "vi": In(range(vis)),  # the VI the commands below are for
                "start": In(1),
                "acked": In(1),
                "acked_all": In(1),
                "retry": In(1),
                "stop": In(1),
                "keepalive": In(1),
                "keepalive_vi": In(range(vis)),
                "clear": In(vis),
                "due": Out(vis),  # armed and past the deadline
                "expired": Out(1),  # `due` of the visited VI
                "out_of_retries": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        vis = self.vis

        def per_vi(name, width):
            return Array(Signal(width, name=f"{name}{v}") for v in range(vis))

        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        deadline, armed, retries = per_vi("deadline", 32), per_vi("armed", 1), per_vi("retries", 16)
        # Wrapping time: past the deadline when `now - deadline` is non-negative as a signed number.
        m.d.comb += [
            self.due.eq(Cat(armed[v] & ~(now - deadline[v])[31] for v in range(vis))),
            self.expired.eq(self.due.bit_select(self.vi, 1)),
            self.out_of_retries.eq(retries[self.vi] + 1 >= self.retry_limit),
        ]

        # Later assignments win: keepalive, then clear, then the visit's command.
        with m.If(self.keepalive):
            m.d.sync += [deadline[self.keepalive_vi].eq(now + self.rto), retries[self.keepalive_vi].eq(0)]
        for v in range(vis):
            with m.If(self.clear[v]):
                m.d.sync += [armed[v].eq(0), retries[v].eq(0)]

        vi = self.vi
        with m.If(self.start & ~armed[vi]):
            m.d.sync += [armed[vi].eq(1), deadline[vi].eq(now + self.rto)]
        with m.If(self.acked):
            m.d.sync += [armed[vi].eq(~self.acked_all), deadline[vi].eq(now + self.rto), retries[vi].eq(0)]
        with m.If(self.retry):
            m.d.sync += retries[vi].eq(retries[vi] + 1)
        with m.If(self.stop):
            m.d.sync += armed[vi].eq(0)
        return m
