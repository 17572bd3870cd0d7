"""Retransmission timers of the VIs' send queues: when to go back N, and when to give up.

Each VI has one timer, armed while it has frames the peer has not acknowledged. The transmit engine
drives it from its visit to a VI (``vi``): sending a frame ``start``s the timer if it is not running
(so the deadline belongs to the oldest frame in flight); an acknowledgement of new frames
(``acked``) restarts it and forgives the retries, and stops it once everything sent is
acknowledged (``acked_all``); an expiry the engine acts on is a ``retry``; ``stop`` is for a rewind,
a failed VI and a flush. ``due`` tells the engine's scheduler which VIs' timers have expired, and
``out_of_retries`` whether the visited VI's expiry is its last allowed one (``retry_limit``).

A deadline is set when the engine queues a frame, which then waits in the transmit buffer for
the frames before it: every new deadline is ``rto`` plus ``backlog``, the buffer's drain time at
line rate when it is set (a deadline set on acknowledgement covers the VI's frames still queued).
With a deadline from the queueing alone, a full buffer (32 KiB drains in 262 us at GbE) outlasted
the default RTO (250 us at 100 MHz) and a stream over many VIs retransmitted frames nobody lost.

Outside the visit: a long RDMA read response arriving (``keepalive``) keeps its VI's timer from
expiring while it streams in, and connecting a VI (``clear``) stops its timer and forgets its
retries. Where two of these hit one VI in one cycle, the visit's command wins, then ``clear``.

The VI count is meant to cost memory, not logic: deadlines and retry counts are memories (one
write port each), and a scanner compares one deadline a cycle with the clock, so an expiry is seen
at most ``detection_latency`` cycles late (nothing beside an RTO of thousands of cycles). Per VI
there are three flip-flops: armed, passed (the scanner's last finding) and fresh (retries forgiven
since the last count was written, so forgiving needs no write). A keepalive whose deadline write
meets a visit's waits a cycle in a one-entry latch (a visit writes in single cycles, and
keepalives come a frame apart).

The commands (with the VI they are for), keepalives and clears take effect a cycle after they
are given, from registers: the visit's decisions (its acknowledgement's comparisons, its frame's)
are not in series with the timers' decoding and memory writes. So ``expired`` and ``due`` show a
command from the cycle after next on. ``out_of_retries`` is a cycle later still: the visited VI's
retry count is read into a register, and only its increment and the comparison with the limit
follow it (the count's read at the VI, its increment, the comparison and the engine's register
were the routed card's longest path, docs/boards.md). It is the VI the visit was at two cycles
before, with the commands given three or more cycles before: the engine reads it after at least
two cycles at its VI, three or more after it gave that VI a retry. A command that forgives the
retries (an acknowledgement, a keepalive, a clear) also moves the deadline or disarms, so
``expired`` is low until the count read after it has arrived.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

#: What the engine gives the timers, taken a cycle later (see above).
_COMMANDS = ("vi", "start", "acked", "acked_all", "retry", "stop", "keepalive", "keepalive_vi", "clear")


class RetransmitTimers(wiring.Component):
    def __init__(self, vis):
        self.vis = vis
        super().__init__(
            {
                "rto": In(32),  # card cycles from a (re)start to the expiry ...
                "backlog": In(32),  # ... plus these: the transmit buffer's drain time
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

    @property
    def detection_latency(self):
        """Cycles an expiry may be seen after its deadline: a lap of the scanner and its read."""
        return self.vis + 2

    def elaborate(self, platform):
        m = Module()
        vis = self.vis
        all_vis = (1 << vis) - 1
        given = {name: Signal.like(getattr(self, name), name=f"{name}_given") for name in _COMMANDS}
        m.d.sync += [given[name].eq(getattr(self, name)) for name in _COMMANDS]
        vi, start, acked, acked_all, retry, stop, keepalive, keepalive_vi, clear = given.values()

        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        armed = Signal(vis)
        passed = Signal(vis)
        fresh = Signal(vis, init=all_vis)

        m.submodules.deadlines = deadlines = Memory(shape=32, depth=vis, init=[])
        m.submodules.retry_counts = retry_counts = Memory(shape=16, depth=vis, init=[])
        deadline_w = deadlines.write_port()
        scan_r = deadlines.read_port(transparent_for=())
        count_w = retry_counts.write_port()
        count_r = retry_counts.read_port(domain="comb")

        retries = Signal(16)  # of the VI given, for a retry's write ...
        retries_read = Signal(16)  # ... and a cycle later, for the limit's comparison
        m.d.comb += [
            count_r.addr.eq(vi),
            retries.eq(Mux(fresh.bit_select(vi, 1), 0, count_r.data)),
            self.due.eq(armed & passed),
            self.expired.eq(self.due.bit_select(self.vi, 1)),
            self.out_of_retries.eq(retries_read + 1 >= self.retry_limit),
        ]
        m.d.sync += retries_read.eq(retries)

        # The scanner: read one deadline a cycle, judge it the next. Wrapping time: past the
        # deadline when `now - deadline` is non-negative as a signed number.
        scan, judged = Signal(range(vis)), Signal(range(vis))
        stale = Signal()  # the deadline being read was rewritten in the read's cycle
        m.d.comb += scan_r.addr.eq(scan)
        m.d.sync += [scan.eq(Mux(scan == vis - 1, 0, scan + 1)), judged.eq(scan)]
        m.d.sync += stale.eq(deadline_w.en & (deadline_w.addr == scan))
        with m.If(~stale):
            m.d.sync += passed.bit_select(judged, 1).eq(~(now - scan_r.data)[31])

        def new_deadline(of_vi):
            deadline = now + self.rto + self.backlog
            m.d.comb += [deadline_w.en.eq(1), deadline_w.addr.eq(of_vi), deadline_w.data.eq(deadline)]
            m.d.sync += passed.bit_select(of_vi, 1).eq(0)  # after the scanner's: this one wins

        # Whole-vector assignments first: the single bits assigned after them win.
        m.d.sync += [armed.eq(armed & ~clear), fresh.eq(fresh | clear)]

        # A keepalive takes the deadline port unless the visit needs it; else it waits a cycle.
        visit_writes = (start & ~armed.bit_select(vi, 1)) | acked
        keep_pending, keep_vi = Signal(), Signal(range(vis))
        with m.If(keepalive & visit_writes):
            m.d.sync += [keep_pending.eq(1), keep_vi.eq(keepalive_vi)]
        with m.Elif(~visit_writes):
            m.d.sync += keep_pending.eq(0)
        keep_now = Mux(keepalive, keepalive_vi, keep_vi)
        with m.If((keepalive | keep_pending) & ~visit_writes):
            new_deadline(keep_now)
            m.d.sync += fresh.bit_select(keep_now, 1).eq(1)

        with m.If(start & ~armed.bit_select(vi, 1)):
            new_deadline(vi)
            m.d.sync += armed.bit_select(vi, 1).eq(1)
        with m.If(acked):
            new_deadline(vi)
            m.d.sync += [armed.bit_select(vi, 1).eq(~acked_all), fresh.bit_select(vi, 1).eq(1)]
        with m.If(retry):
            m.d.comb += [count_w.en.eq(1), count_w.addr.eq(vi), count_w.data.eq(retries + 1)]
            m.d.sync += fresh.bit_select(vi, 1).eq(0)
        with m.If(stop):
            m.d.sync += armed.bit_select(vi, 1).eq(0)
        return m
