# amaranth: UnusedElaboratable=no
"""Event counters in memory: every read, at any counter and wherever the sweep is (reads as often
as the bus makes them hold it back), equals the events counted so far (several a cycle, on every counter at once); a counter wraps, or with
`saturate` stays at all ones; a clear zeroes every counter, the events of its cycle included;
with ``late`` every event counts a cycle later (a clear drops the cycle before's instead).
Every test runs on both kinds: the counters in memory and in flip-flops (``in_memory=False``)."""

import random

import pytest
from support.sim import run_testbench

from numavia.gateware.event_counters import EventCounters


@pytest.fixture(params=[True, False], ids=["in-memory", "flip-flops"])
def in_memory(request):
    return request.param


def drive(dut, seed, cycles, *, rate=0.5, clear_at=(), reads=0.7):
    """A testbench: random increments on every counter, a read of a random counter in a cycle of
    chance ``reads`` (never two cycles running, as the register bank reads) checked against the
    model (``width`` bits, wrapped or saturated; with ``late`` a cycle's events are counted at the
    next tick)."""
    rng = random.Random(seed)
    limit = (1 << dut.width) - 1

    def expected(total):
        return min(total, limit) if dut.saturate else total & limit

    async def bench(ctx, _):
        totals = [0] * dut.count
        given = [0] * dut.count  # late: the events of the cycle before, counted at this tick
        reading = False
        for cycle in range(cycles):
            reading = not reading and rng.random() < reads
            ctx.set(dut.read.reading, reading)
            if reading:
                index = rng.randrange(dut.count)
                ctx.set(dut.read.index, index)
                assert ctx.get(dut.read.value) == expected(totals[index]), f"cycle {cycle}, counter {index}"
            clear = cycle in clear_at
            ctx.set(dut.clear, clear)
            for i in range(dut.count):
                events = rng.randint(1, dut.most) if rng.random() < rate else 0
                ctx.set(dut.increments[i], events)
                counted, given[i] = (given[i], events) if dut.late else (events, 0)
                totals[i] = 0 if clear else totals[i] + counted
            await ctx.tick()
        if dut.late:  # the last cycle's events, counted at one more tick
            for i in range(dut.count):
                ctx.set(dut.increments[i], 0)
                totals[i] += given[i]
            ctx.set(dut.clear, 0)
            await ctx.tick()
        ctx.set(dut.increments, [0] * dut.count)
        ctx.set(dut.clear, 0)
        for index in range(dut.count):
            ctx.set(dut.read.reading, 1)
            ctx.set(dut.read.index, index)
            assert ctx.get(dut.read.value) == expected(totals[index])
            ctx.set(dut.read.reading, 0)
            await ctx.tick()

    return bench


@pytest.mark.parametrize("count, most", [(1, 1), (5, 2), (21, 3)])
def test_every_read_is_exact_wherever_the_sweep_is(count, most, in_memory):
    dut = EventCounters(count, most=most, in_memory=in_memory)
    run_testbench(dut, drive(dut, seed=count, cycles=400, rate=0.7))


@pytest.mark.parametrize("reads", [0.0, 1.0], ids=["no-reads", "a-read-every-other-cycle"])
def test_every_counter_at_its_most_every_cycle_never_overflows_its_pending_count(reads, in_memory):
    # A read every other cycle holds the sweep back the most: it moves every other cycle.
    dut = EventCounters(7, most=3, in_memory=in_memory)
    run_testbench(dut, drive(dut, seed=1, cycles=200, rate=1.1, reads=reads))  # rate > 1: every cycle


@pytest.mark.parametrize("saturate", [False, True], ids=["wrap", "saturate"])
def test_a_narrow_counter_wraps_or_stays_at_all_ones(saturate, in_memory):
    dut = EventCounters(4, most=2, width=6, saturate=saturate, in_memory=in_memory)
    run_testbench(dut, drive(dut, seed=2, cycles=300, rate=0.8))


def test_a_clear_zeroes_every_counter_with_the_events_of_its_cycle(in_memory):
    dut = EventCounters(6, most=2, saturate=True, in_memory=in_memory)
    run_testbench(dut, drive(dut, seed=3, cycles=300, rate=0.6, clear_at=(40, 41, 97, 250)))


@pytest.mark.parametrize("saturate", [False, True])
def test_late_counts_every_event_a_cycle_later_and_a_clear_drops_the_cycle_before(saturate, in_memory):
    dut = EventCounters(5, most=2, width=8, saturate=saturate, in_memory=in_memory, late=True)
    run_testbench(dut, drive(dut, seed=9, cycles=400, rate=0.7, clear_at={100, 101, 250}))


def test_at_least_one_counter_and_one_event():
    with pytest.raises(ValueError, match="at least one counter"):
        EventCounters(0)
    with pytest.raises(ValueError, match="at least one counter"):
        EventCounters(3, most=0)
