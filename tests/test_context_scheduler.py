"""The sequencer's scheduler alone: what starts next in priority order, the lowest free entry for
a miss, busy/waiting bookkeeping, and the backoff and SEND-retry timers' expiry."""

from support.amaranth_helpers import rejected
from support.sim import run_testbench

from numavia.gateware.context_scheduler import ContextScheduler, Start

N = 4
BASE, MAX_SHIFT, RETRY_DELAY = 8, 3, 5


def run(testbench):
    dut = ContextScheduler(
        num_transactions=N, backoff_base=BASE, backoff_max_shift=MAX_SHIFT, send_retry_delay=RETRY_DELAY
    )
    run_testbench(dut, testbench)


async def command(ctx, port, entry, **fields):
    ctx.set(port.en, 1)
    ctx.set(port.entry, entry)
    for name, value in fields.items():
        ctx.set(getattr(port, name), value)
    await ctx.tick()
    ctx.set(port.en, 0)


async def pulse(ctx, signal):
    ctx.set(signal, 1)
    await ctx.tick()
    ctx.set(signal, 0)


async def cycles_to_expiry(ctx, dut, limit=10_000):
    for n in range(limit):
        if ctx.get(dut.start) == Start.EXPIRED:
            return n
        await ctx.tick()
    raise AssertionError("no timer expired")


def test_starts_in_priority_order():
    async def testbench(ctx, dut):
        ctx.set(dut.loaded, 1)
        assert ctx.get(dut.start) == Start.NONE
        await command(ctx, dut.retry_send, 2)  # an expired timer: the lowest priority
        await ctx.tick().repeat(RETRY_DELAY + 1)
        assert ctx.get(dut.start) == Start.EXPIRED and ctx.get(dut.expired) == 2
        ctx.set(dut.miss, 1)
        assert ctx.get(dut.start) == Start.MISS
        ctx.set(dut.failed, 1)
        assert ctx.get(dut.start) == Start.FAILED
        ctx.set(dut.message, 1)
        assert ctx.get(dut.start) == Start.MESSAGE
        ctx.set(dut.receiving, 1)  # a data block still coming in holds everything back
        assert ctx.get(dut.start) == Start.NONE
        ctx.set(dut.receiving, 0)
        ctx.set(dut.message, 0)
        ctx.set(dut.failed, 0)
        ctx.set(dut.miss, 0)
        await pulse(ctx, dut.take_expired)  # its timer stops: nothing left to start
        assert ctx.get(dut.start) == Start.NONE

    run(testbench)


def test_misses_take_the_lowest_free_entry_until_none_is_left():
    async def testbench(ctx, dut):
        ctx.set(dut.loaded, 1)
        ctx.set(dut.miss, 1)
        for expected in range(N):
            assert ctx.get(dut.start) == Start.MISS and ctx.get(dut.free) == expected
            assert ctx.get(dut.busy_count) == expected
            await pulse(ctx, dut.take_free)
        assert ctx.get(dut.busy) == (1 << N) - 1 and ctx.get(dut.busy_count) == N
        assert ctx.get(dut.start) == Start.NONE  # no entry free: the miss waits
        ctx.set(dut.loaded, 0)
        assert ctx.get(dut.start) == Start.MISS  # not loaded: taken anyway, to be refused
        ctx.set(dut.loaded, 1)
        await command(ctx, dut.release, 1)
        assert ctx.get(dut.start) == Start.NONE  # registered first: entry 1 is free a cycle later
        await ctx.tick()
        assert ctx.get(dut.start) == Start.MISS and ctx.get(dut.free) == 1
        assert ctx.get(dut.busy) == 0b1101 and ctx.get(dut.busy_count) == N - 1

    run(testbench)


def test_waiting_entries_are_marked_until_resumed():
    async def testbench(ctx, dut):
        await command(ctx, dut.suspend, 3)
        await command(ctx, dut.suspend, 0)
        assert ctx.get(dut.waiting) == 0b1000  # a running context's command is registered first
        await ctx.tick()
        assert ctx.get(dut.waiting) == 0b1001
        await command(ctx, dut.resume, 3)
        assert ctx.get(dut.waiting) == 0b0001

    run(testbench)


def test_send_retry_timer_expires_after_its_delay():
    async def testbench(ctx, dut):
        await command(ctx, dut.retry_send, 1)
        # registered, then loaded: the count starts a cycle after the command
        assert await cycles_to_expiry(ctx, dut) == RETRY_DELAY + 1
        assert ctx.get(dut.expired) == 1
        await ctx.tick().repeat(3)
        assert ctx.get(dut.start) == Start.EXPIRED  # stays expired until taken
        await pulse(ctx, dut.take_expired)
        await ctx.tick().repeat(2 * RETRY_DELAY)
        assert ctx.get(dut.start) == Start.NONE

    run(testbench)


def test_backoff_grows_with_retries_up_to_its_cap_with_jitter_below_the_base():
    async def testbench(ctx, dut):
        jitters = set()
        for retries in (0, 1, 2, 3, 7, 255):
            for _ in range(4):
                await command(ctx, dut.backoff, 2, retries=retries)
                delay = await cycles_to_expiry(ctx, dut) - 1  # the cycle the command is registered
                floor = BASE << min(retries, MAX_SHIFT)
                assert floor <= delay < floor + BASE, (retries, delay)
                jitters.add(delay - floor)
                await pulse(ctx, dut.take_expired)
        assert len(jitters) > 1  # the delays are not all alike

    run(testbench)


def test_timers_run_side_by_side():
    async def testbench(ctx, dut):
        await command(ctx, dut.backoff, 3, retries=MAX_SHIFT)  # the longest
        await command(ctx, dut.retry_send, 0)
        await cycles_to_expiry(ctx, dut)
        assert ctx.get(dut.expired) == 0
        await pulse(ctx, dut.take_expired)
        await cycles_to_expiry(ctx, dut)
        assert ctx.get(dut.expired) == 3

    run(testbench)


def test_rejects_a_backoff_base_that_is_not_a_power_of_two():
    with rejected(ValueError, "power of two"):
        ContextScheduler(num_transactions=N, backoff_base=12, backoff_max_shift=3, send_retry_delay=4)
