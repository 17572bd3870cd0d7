"""Retry side of the SCI ring link: the packets in flight, their echoes, timeouts, BUSY back-off
and give-up (the protocol: ``ring_link``'s docstring, "Transmit").

Queued packets (``queued``, from the transmit side) wait in arrival order, a list that can lose
any entry: the dispatcher gives the oldest packet whose target has nothing in flight a context, so
per-target order holds while other targets overtake a blocked one. A context offers its packet on
``send`` (round robin among the contexts ready to send), learns on ``sent`` that it went out (or
was aborted), waits for the echo that answers it (``echo_received``), and finally frees its slot
(``slots.freed``) or, given up, reports its header on ``failed``.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from numavia.base import regmap
from numavia.base.coherence import NODE_ID_BITS
from numavia.base.sci_packet import EchoStatus

from .ring_receive import ReceivedEchoLayout
from .ring_transmit import index_bits, queued_layout, send_layout, sent_layout, slots_signature
from .round_robin import RoundRobin, first_set
from .sci_layouts import HeaderLayout

_RING = regmap.RING

#: Events the retry side counts (ring counter names): TIMEOUTS up to one per context a cycle.
RETRY_EVENTS = ("TX_ACCEPTED", "SEND_FAILURES", "BUSY_RECEIVED")


class _Context(enum.Enum, shape=3):
    """State of a transmit context (one own packet in flight)."""

    FREE = 0
    READY = 1  # to be (re)sent when the output gives own traffic its turn
    SENDING = 2
    WAIT_ECHO = 3  # timer counts towards ECHO_TIMEOUT
    BACKOFF = 4  # BUSY received; timer counts towards BUSY_DELAY
    DONE = 5  # ACCEPTED: to be released (slot freed, alternating bit toggled)
    FAILED = 6  # given up: to be reported on ``failed``, then released


class RingRetry(wiring.Component):
    """``out_depth`` outgoing slots, ``contexts`` packets in flight at once (at most one per
    target). ``echo_timeout``, ``busy_delay`` and ``max_attempts`` come from the link's registers."""

    def __init__(self, *, out_depth, contexts):
        self.out_depth = out_depth
        self.contexts = contexts
        super().__init__(
            {
                "node_id": In(NODE_ID_BITS),
                "queued": In(stream.Signature(queued_layout(out_depth), always_ready=True)),
                "send": Out(stream.Signature(send_layout(out_depth, contexts))),
                "sent": In(stream.Signature(sent_layout(contexts), always_ready=True)),
                "slots": Out(slots_signature(out_depth)),
                "echo_received": In(stream.Signature(ReceivedEchoLayout, always_ready=True)),
                "failed": Out(stream.Signature(HeaderLayout)),
                "echo_timeout": In(_RING.register("ECHO_TIMEOUT").width),
                "busy_delay": In(_RING.register("BUSY_DELAY").width),
                "max_attempts": In(_RING.register("MAX_ATTEMPTS").width),
                "outstanding": Out(range(contexts + 1)),
                "events": Out(
                    data.StructLayout({**{name: 1 for name in RETRY_EVENTS}, "TIMEOUTS": range(contexts + 1)})
                ),
            }
        )

    def elaborate(self, platform):
        m = Module()
        n_contexts = self.contexts
        slot_bits = index_bits(self.out_depth)
        events = self.events
        slots = self.slots

        ctx_state = [Signal(_Context, name=f"ctx{c}_state") for c in range(n_contexts)]
        ctx_slot = [Signal(slot_bits, name=f"ctx{c}_slot") for c in range(n_contexts)]
        ctx_target = [Signal(NODE_ID_BITS, name=f"ctx{c}_target") for c in range(n_contexts)]
        ctx_seq = [Signal(name=f"ctx{c}_seq") for c in range(n_contexts)]
        ctx_attempts = [Signal(8, name=f"ctx{c}_attempts") for c in range(n_contexts)]
        ctx_timer = [Signal(16, name=f"ctx{c}_timer") for c in range(n_contexts)]
        ctx_accepted = [Signal(name=f"ctx{c}_accepted_while_sending") for c in range(n_contexts)]
        ctx_sent = [Signal(name=f"ctx{c}_sent") for c in range(n_contexts)]  # sent whole at least once
        # Aborted for want of data: resent only once its slot is complete, so it cannot underrun twice.
        ctx_underran = [Signal(name=f"ctx{c}_underran") for c in range(n_contexts)]
        ctx_in_use = [state != _Context.FREE for state in ctx_state]
        m.d.comb += self.outstanding.eq(sum(ctx_in_use))

        # --- Queued packets, dispatched to contexts ---------------------------------------------------
        queue_slot = [Signal(slot_bits, name=f"queue{i}_slot") for i in range(self.out_depth)]
        queue_target = [Signal(NODE_ID_BITS, name=f"queue{i}_target") for i in range(self.out_depth)]
        queue_length = Signal(range(self.out_depth + 1))
        eligible = []
        for i in range(self.out_depth):
            target_busy = Cat(*[ctx_in_use[c] & (ctx_target[c] == queue_target[i]) for c in range(n_contexts)]).any()
            eligible.append((i < queue_length) & ~target_busy)
        any_eligible, take = first_set(m, "dispatch", eligible)
        any_free_context, free_context = first_set(m, "free_context", [~in_use for in_use in ctx_in_use])
        dispatch = Signal()
        m.d.comb += dispatch.eq(any_eligible & any_free_context)
        enqueue = self.queued.valid
        append_at = queue_length - dispatch
        for i in range(self.out_depth):
            next_slot = queue_slot[i + 1] if i + 1 < self.out_depth else 0
            next_target = queue_target[i + 1] if i + 1 < self.out_depth else 0
            with m.If(enqueue & (append_at == i)):
                m.d.sync += [queue_slot[i].eq(self.queued.payload.slot), queue_target[i].eq(self.queued.payload.target)]
            with m.Elif(dispatch & (i >= take)):
                m.d.sync += [queue_slot[i].eq(next_slot), queue_target[i].eq(next_target)]
        m.d.sync += queue_length.eq(queue_length + enqueue - dispatch)
        dispatch_slot = Signal(slot_bits)
        dispatch_target = Signal(NODE_ID_BITS)
        with m.Switch(take):
            for i in range(self.out_depth):
                with m.Case(i):
                    m.d.comb += [dispatch_slot.eq(queue_slot[i]), dispatch_target.eq(queue_target[i])]

        # Per-target alternating bit of own packets. A dispatched context takes its target's bit a
        # cycle later (`fresh`), off the dispatcher's choice: the target has nothing else in
        # flight, so the bit cannot change meanwhile, and the context's first offer reads it
        # directly.
        tx_seq = Signal(1 << NODE_ID_BITS)
        fresh = Signal()  # `fresh_context` was dispatched in the last cycle
        fresh_context = Signal(range(n_contexts))
        fresh_target = Signal(NODE_ID_BITS)
        fresh_seq = tx_seq.bit_select(fresh_target, 1)
        m.d.sync += [fresh.eq(dispatch), fresh_context.eq(free_context), fresh_target.eq(dispatch_target)]

        # --- Echoes received: find the context they answer -------------------------------------------
        echo = self.echo_received
        echo_accepted = echo.valid & (echo.payload.status == EchoStatus.ACCEPTED)
        echo_refused = echo.valid & (echo.payload.status == EchoStatus.BUSY)
        echo_match = [
            ctx_in_use[c] & (ctx_target[c] == echo.payload.source) & (ctx_seq[c] == echo.payload.seq)
            for c in range(n_contexts)
        ]

        # --- Offering packets to the output -------------------------------------------------------------
        # Round robin among contexts ready to send: the first after the last one sent, else the first.
        last_sent = Signal.like(self.send.payload.context)
        slot_complete = [~slots.filling | (slots.fill_slot != ctx_slot[c]) for c in range(n_contexts)]
        ready_contexts = [
            (ctx_state[c] == _Context.READY) & (~ctx_underran[c] | slot_complete[c]) for c in range(n_contexts)
        ]
        m.submodules.offer = offer = RoundRobin(n_contexts)
        send_context = Signal.like(last_sent)
        m.d.comb += [
            offer.requests.eq(Cat(*ready_contexts)),
            offer.last.eq(last_sent),
            send_context.eq(offer.choice),
            self.send.valid.eq(offer.found),
            self.send.payload.context.eq(send_context),
        ]
        with m.Switch(send_context):
            for c in range(n_contexts):
                with m.Case(c):
                    m.d.comb += [
                        self.send.payload.slot.eq(ctx_slot[c]),
                        self.send.payload.seq.eq(Mux(fresh & (fresh_context == c), fresh_seq, ctx_seq[c])),
                    ]
        # The output's decision to take a packet ends a long path (the ring's receive, bypass and
        # output arbitration in one cycle); the context's bookkeeping follows it a cycle later,
        # from registers. The output is busy with that packet meanwhile and takes nothing else,
        # and no packet is sent or aborted in its first cycle.
        taken = Signal()  # the output took `taken_context`'s packet in the last cycle
        taken_context = Signal.like(send_context)
        m.d.sync += [taken.eq(self.send.valid & self.send.ready), taken_context.eq(send_context)]
        with m.If(taken):
            m.d.sync += last_sent.eq(taken_context)
        sent_whole = self.sent.valid & ~self.sent.payload.aborted
        sent_aborted = self.sent.valid & self.sent.payload.aborted

        # --- Releasing contexts: slot freed (accepted) or header reported (given up) ------------------
        releasing = [state == _Context.DONE for state in ctx_state]
        any_release, release_context = first_set(m, "release", releasing)
        failing = [state == _Context.FAILED for state in ctx_state]
        any_failed, failed_context = first_set(m, "failed", failing)
        release_slot = Signal(slot_bits)
        release_target = Signal(NODE_ID_BITS)
        failed_slot = Signal(slot_bits)
        failed_seq = Signal()
        with m.Switch(release_context):
            for c in range(n_contexts):
                with m.Case(c):
                    m.d.comb += [release_slot.eq(ctx_slot[c]), release_target.eq(ctx_target[c])]
        with m.Switch(failed_context):
            for c in range(n_contexts):
                with m.Case(c):
                    m.d.comb += [failed_slot.eq(ctx_slot[c]), failed_seq.eq(ctx_seq[c])]
        m.d.comb += [
            slots.lookup.eq(failed_slot),
            self.failed.valid.eq(any_failed),
            self.failed.payload.eq(slots.header),
            self.failed.payload.source.eq(self.node_id),
            self.failed.payload.seq.eq(failed_seq),
        ]
        failed_taken = self.failed.valid & self.failed.ready
        with m.If(any_release):
            m.d.sync += tx_seq.eq(tx_seq ^ (Const(1, len(tx_seq)) << release_target))
        # A slot is freed in the cycle after its context is released or its report is taken, from
        # registers: ``failed.ready`` comes from the sequencer's scheduler, which also weighs a
        # packet the ring is judging in that cycle, and the choice of the context released comes
        # from every context's state; neither path may run on into the transmit side's free-slot
        # count.
        released_slot, reported_slot = Signal(self.out_depth), Signal(self.out_depth)
        m.d.sync += [
            released_slot.eq(Mux(any_release, Const(1, self.out_depth) << release_slot, 0)),
            reported_slot.eq(Mux(failed_taken, Const(1, self.out_depth) << failed_slot, 0)),
        ]
        m.d.comb += [
            slots.freed.eq(released_slot | reported_slot),
            events.TX_ACCEPTED.eq(any_release),
            events.SEND_FAILURES.eq(failed_taken),
            events.BUSY_RECEIVED.eq(echo_refused),
        ]

        # --- Context state machines -------------------------------------------------------------------
        timeouts = []
        for c in range(n_contexts):
            state, timer = ctx_state[c], ctx_timer[c]
            match = echo_match[c]
            timed_out = Signal(name=f"ctx{c}_timed_out")
            timeouts.append(timed_out)
            this_sent = self.sent.payload.context == c
            with m.Switch(state):
                with m.Case(_Context.FREE):
                    with m.If(dispatch & (free_context == c)):
                        m.d.sync += [
                            state.eq(_Context.READY),
                            ctx_slot[c].eq(dispatch_slot),
                            ctx_target[c].eq(dispatch_target),
                            ctx_attempts[c].eq(0),
                            ctx_sent[c].eq(0),
                            ctx_underran[c].eq(0),
                        ]
                with m.Case(_Context.READY):
                    with m.If(fresh & (fresh_context == c)):
                        m.d.sync += ctx_seq[c].eq(fresh_seq)
                    # A late echo of an earlier copy completes it; a packet never sent cannot
                    # have been answered (an echo with its target and seq is older than it).
                    # Taken in the last cycle, it is being sent: such an echo waits for the end.
                    earlier_accepted = match & echo_accepted & ctx_sent[c]
                    with m.If(taken & (taken_context == c)):
                        m.d.sync += [
                            state.eq(_Context.SENDING),
                            ctx_accepted[c].eq(earlier_accepted),
                            ctx_attempts[c].eq(Mux(ctx_attempts[c] == 0xFF, 0xFF, ctx_attempts[c] + 1)),
                        ]
                    with m.Elif(earlier_accepted):
                        m.d.sync += state.eq(_Context.DONE)
                with m.Case(_Context.SENDING):
                    # The slot is being read: an ACCEPTED echo (of an earlier copy) waits for the end.
                    earlier_accepted = match & echo_accepted & ctx_sent[c]
                    with m.If(earlier_accepted):
                        m.d.sync += ctx_accepted[c].eq(1)
                    with m.If(sent_whole & this_sent):
                        m.d.sync += [timer.eq(0), ctx_sent[c].eq(1)]
                        with m.If(ctx_accepted[c] | earlier_accepted):
                            m.d.sync += state.eq(_Context.DONE)
                        with m.Else():
                            m.d.sync += state.eq(_Context.WAIT_ECHO)
                    with m.Elif(sent_aborted & this_sent):
                        # Nobody takes an aborted copy: not an attempt; again as soon as the data is in.
                        m.d.sync += [
                            ctx_underran[c].eq(1),
                            ctx_attempts[c].eq(Mux(ctx_attempts[c] == 0, 0, ctx_attempts[c] - 1)),
                        ]
                        with m.If(ctx_accepted[c] | earlier_accepted):
                            m.d.sync += state.eq(_Context.DONE)
                        with m.Else():
                            m.d.sync += state.eq(_Context.READY)
                with m.Case(_Context.WAIT_ECHO):
                    with m.If(match & echo_accepted):
                        m.d.sync += state.eq(_Context.DONE)
                    with m.Elif(match & echo_refused):
                        m.d.sync += [state.eq(_Context.BACKOFF), timer.eq(0)]
                    with m.Elif(timer >= self.echo_timeout):
                        m.d.comb += timed_out.eq(1)
                        with m.If(ctx_attempts[c] >= self.max_attempts):
                            m.d.sync += state.eq(_Context.FAILED)
                        with m.Else():
                            m.d.sync += state.eq(_Context.READY)
                    with m.Else():
                        m.d.sync += timer.eq(timer + 1)
                with m.Case(_Context.BACKOFF):
                    with m.If(match & echo_accepted):
                        m.d.sync += state.eq(_Context.DONE)
                    with m.Elif(timer >= self.busy_delay):
                        m.d.sync += state.eq(_Context.READY)
                    with m.Else():
                        m.d.sync += timer.eq(timer + 1)
                with m.Case(_Context.DONE):
                    with m.If(any_release & (release_context == c)):
                        m.d.sync += state.eq(_Context.FREE)
                with m.Case(_Context.FAILED):
                    with m.If(failed_taken & (failed_context == c)):
                        m.d.sync += state.eq(_Context.FREE)  # reported: its slot is freed next cycle
                    with m.Elif(match & echo_accepted):
                        m.d.sync += state.eq(_Context.DONE)  # delivered after all: no report
            # A BUSY answer proves the receiver alive: only consecutive silent transmissions count
            # towards MAX_ATTEMPTS.
            with m.If(match & echo_refused & (state != _Context.DONE) & (state != _Context.FAILED)):
                m.d.sync += ctx_attempts[c].eq(0)
        m.d.comb += events.TIMEOUTS.eq(sum(timeouts))
        return m
