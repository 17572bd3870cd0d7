"""The sequencer's scheduler: which context runs next, and the transaction entries' bookkeeping.

When no context runs, the sequencer starts what :attr:`ContextScheduler.start` says, in this
order: nothing while the last message's data block is still coming in; an incoming message (a
response resumes the context waiting for it, a request starts the handler); a request the ring
could not deliver (its waiting context resumes with an error); a miss from the local access
controller, when a transaction entry is free (or the control store is not loaded: it is refused);
a context whose timer expired.

Per transaction entry it keeps: busy (a miss owns it), waiting (suspended for a response) and a
timer (a backoff, or a SEND retry after a full outgoing queue) that counts down to its expiry.
Backoff delays grow with the context's retries, ``backoff_base << min(retries, max_shift)``, plus
a pseudo-random jitter below ``backoff_base`` so that contending nodes drift apart.

The commands of the scheduling step (``take_free``, ``take_expired``, ``resume``) are applied in
the cycle after they are given, as the sequencer's own registers are. The commands of a running
context (``release``, ``suspend``, ``backoff``, ``retry_send``) come from the instruction just read
out of the control store, so they are registered first and applied a cycle later: that keeps the
block RAM's read-out and the decoder off the path into the entries' bits and timers. A context
that suspends or backs off passes through ``SAVE`` first, so its waiting bit and timer are set by
the time the sequencer schedules again; a released entry may look busy one cycle longer, which at
most delays a miss by that cycle.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from numavia.base.microcode import isa

ENTRY_BITS = (isa.NUM_TRANSACTIONS - 1).bit_length()
TIMER_BITS = 16

EntryCommand = data.StructLayout({"en": 1, "entry": ENTRY_BITS})
BackoffCommand = data.StructLayout({"en": 1, "entry": ENTRY_BITS, "retries": 8})


class Start(enum.Enum, shape=3):
    """What the sequencer starts next."""

    NONE = 0
    MESSAGE = 1  # the incoming packet (response or request)
    FAILED = 2  # an undelivered packet comes back
    MISS = 3  # a miss takes the free entry (or is refused: not loaded)
    EXPIRED = 4  # the expired entry's context resumes


class ContextScheduler(wiring.Component):
    """Members:

    * ``receiving``, ``message``, ``failed``, ``miss``, ``loaded``: what is pending (``message``,
      ``failed``, ``miss``: the valid of the sequencer's incoming streams).
    * ``start``: which of them is taken now; ``free``: the entry a miss takes; ``expired``: the
      entry that resumes.
    * ``take_free``: the free entry becomes busy; ``take_expired``: the expired entry's timer
      stops; ``release``: an entry is no longer busy; ``suspend``/``resume``: an entry starts/stops
      waiting for a response; ``backoff``: an entry's timer starts a backoff; ``retry_send``: an
      entry's timer starts the SEND retry delay.
    * ``busy``, ``waiting``: per entry; ``busy_count``: entries busy.
    """

    def __init__(self, *, num_transactions, backoff_base, backoff_max_shift, send_retry_delay):
        if backoff_base & (backoff_base - 1):
            raise ValueError("backoff_base must be a power of two")
        self.num_transactions = num_transactions
        self.backoff_base = backoff_base
        self.backoff_max_shift = backoff_max_shift
        self.send_retry_delay = send_retry_delay
        n = num_transactions
        super().__init__(
            {
                "receiving": In(1),
                "message": In(1),
                "failed": In(1),
                "miss": In(1),
                "loaded": In(1),
                "start": Out(Start),
                "free": Out(ENTRY_BITS),
                "expired": Out(ENTRY_BITS),
                "take_free": In(1),
                "take_expired": In(1),
                "release": In(EntryCommand),
                "suspend": In(EntryCommand),
                "resume": In(EntryCommand),
                "backoff": In(BackoffCommand),
                "retry_send": In(EntryCommand),
                "busy": Out(n),
                "waiting": Out(n),
                "busy_count": Out(range(isa.NUM_TRANSACTIONS + 2)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        n = self.num_transactions
        busy, waiting = self.busy, self.waiting
        release, suspend = Signal(EntryCommand), Signal(EntryCommand)
        backoff, retry_send = Signal(BackoffCommand), Signal(EntryCommand)
        m.d.sync += [
            release.eq(self.release),
            suspend.eq(self.suspend),
            backoff.eq(self.backoff),
            retry_send.eq(self.retry_send),
        ]

        timer_on = Signal(n)
        timers = [Signal(TIMER_BITS, name=f"timer{i}") for i in range(n)]
        for i, t in enumerate(timers):
            with m.If(timer_on[i] & (t != 0)):
                m.d.sync += t.eq(t - 1)
        expired = Cat(*[timer_on[i] & (timers[i] == 0) for i in range(n)])
        m.d.comb += self.busy_count.eq(sum(busy[i] for i in range(n)))

        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))

        have_free = Signal()
        for i in reversed(range(n)):  # the lowest free / expired entry
            with m.If(~busy[i]):
                m.d.comb += [self.free.eq(i), have_free.eq(1)]
        for i in reversed(range(n)):
            with m.If(expired[i]):
                m.d.comb += self.expired.eq(i)

        with m.If(self.receiving):
            pass  # the last message's data is still coming in: nothing starts until it is in
        with m.Elif(self.message):
            m.d.comb += self.start.eq(Start.MESSAGE)
        with m.Elif(self.failed):
            m.d.comb += self.start.eq(Start.FAILED)
        with m.Elif(self.miss & (have_free | ~self.loaded)):
            m.d.comb += self.start.eq(Start.MISS)
        with m.Elif(expired.any()):
            m.d.comb += self.start.eq(Start.EXPIRED)

        with m.If(self.take_free):
            m.d.sync += busy.bit_select(self.free, 1).eq(1)
        with m.If(release.en):
            m.d.sync += busy.bit_select(release.entry, 1).eq(0)
        with m.If(suspend.en):
            m.d.sync += waiting.bit_select(suspend.entry, 1).eq(1)
        with m.If(self.resume.en):
            m.d.sync += waiting.bit_select(self.resume.entry, 1).eq(0)

        def start_timer(entry, delay):
            with m.Switch(entry):
                for k in range(n):
                    with m.Case(k):
                        m.d.sync += timers[k].eq(delay)
            m.d.sync += timer_on.bit_select(entry, 1).eq(1)

        with m.If(self.take_expired):
            m.d.sync += timer_on.bit_select(self.expired, 1).eq(0)
        with m.If(backoff.en):
            retries = backoff.retries
            shift = Mux(retries > self.backoff_max_shift, self.backoff_max_shift, retries)
            jitter = lfsr[: (self.backoff_base - 1).bit_length()] if self.backoff_base > 1 else 0
            start_timer(backoff.entry, (self.backoff_base << shift) + jitter)
        with m.If(retry_send.en):
            start_timer(retry_send.entry, self.send_retry_delay)
        return m
