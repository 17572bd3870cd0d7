"""Retransmission timers alone: the expiry one RTO after the first frame (seen within the
scanner's latency, never early), the deadline kept by a later frame, restart and stop by
acknowledgements, the retry count and its limit, the read response's keepalive (also when it
meets a visit's write), a connect's clear, the command's priority over a clear, and a deadline
rewritten at every phase of the scanner."""

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.gateware.via_retransmit import RetransmitTimers

VIS = 4
RTO = 20
LIMIT = 3


def run(bench, *, rto=RTO):
    dut = RetransmitTimers(VIS)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        ctx.set(dut.rto, rto)
        ctx.set(dut.retry_limit, LIMIT)
        await bench(ctx, dut)

    sim.add_testbench(tb)
    run_simulation(sim)


async def command(ctx, dut, vi, **pulses):
    """Give VI `vi` the command `pulses` for one cycle and wait for the next, in which it acts."""
    ctx.set(dut.vi, vi)
    for name, value in pulses.items():
        ctx.set(getattr(dut, name), value)
    await ctx.tick()
    for name in pulses:
        ctx.set(getattr(dut, name), 0)
    await ctx.tick()


async def cycles_until_due(ctx, dut, vi, limit=10 * RTO):
    for n in range(limit):
        if ctx.get(dut.due) >> vi & 1:
            return n
        await ctx.tick()
    raise AssertionError(f"VI {vi}'s timer never expired")


async def assert_expires(ctx, dut, vi, after):
    """VI `vi` expires `after` ticks from now, as an exact timer would, or up to the scanner's
    latency later; never earlier."""
    n = await cycles_until_due(ctx, dut, vi)
    assert after <= n <= after + dut.detection_latency, (n, after)


async def start_after_retries(ctx, dut, vi, retries=LIMIT - 1):
    """Arm VI `vi`'s timer and count `retries` expiries on it (the last allowed comes next)."""
    await command(ctx, dut, vi, start=1)
    for _ in range(retries):
        await command(ctx, dut, vi, retry=1)


async def look_at(ctx, dut, vi):
    """Be at VI `vi` for two cycles, as a visit is before it reads the timer."""
    ctx.set(dut.vi, vi)
    await ctx.tick().repeat(2)


def test_a_started_timer_expires_one_rto_later_and_only_for_its_vi():
    async def bench(ctx, dut):
        await command(ctx, dut, 2, start=1)
        await assert_expires(ctx, dut, 2, RTO - 1)
        assert ctx.get(dut.due) == 1 << 2
        await look_at(ctx, dut, 2)
        assert ctx.get(dut.expired)
        await look_at(ctx, dut, 1)
        assert not ctx.get(dut.expired)

    run(bench)


def test_a_second_start_keeps_the_oldest_frames_deadline():
    async def bench(ctx, dut):
        await command(ctx, dut, 0, start=1)
        await ctx.tick().repeat(RTO // 2)
        await command(ctx, dut, 0, start=1)
        await assert_expires(ctx, dut, 0, RTO - RTO // 2 - 2)

    run(bench)


def test_an_acknowledgement_restarts_the_timer_and_stops_it_once_all_is_acknowledged():
    async def bench(ctx, dut):
        await command(ctx, dut, 1, start=1)
        await ctx.tick().repeat(RTO - 5)
        await command(ctx, dut, 1, acked=1)  # part acknowledged: a full RTO from here
        await assert_expires(ctx, dut, 1, RTO - 1)
        await command(ctx, dut, 1, acked=1, acked_all=1)
        await ctx.tick().repeat(2 * RTO)
        assert ctx.get(dut.due) == 0

    run(bench)


def test_a_deadline_counts_the_transmit_buffers_backlog_too():
    """A frame queued behind others waits for them before the wire: its deadline is the RTO after
    the backlog of that moment, also when an acknowledgement restarts the timer."""
    backlog = 3 * RTO

    async def bench(ctx, dut):
        ctx.set(dut.backlog, backlog)
        await command(ctx, dut, 3, start=1)
        await assert_expires(ctx, dut, 3, RTO + backlog - 1)
        ctx.set(dut.backlog, RTO // 2)
        await command(ctx, dut, 3, acked=1)
        ctx.set(dut.backlog, 0)  # the backlog when the deadline was set counts, not a later one
        await assert_expires(ctx, dut, 3, RTO + RTO // 2 - 1)

    run(bench)


def test_retries_count_to_the_limit_and_an_acknowledgement_forgives_them():
    async def bench(ctx, dut):
        await look_at(ctx, dut, 3)
        for _ in range(LIMIT - 1):
            assert not ctx.get(dut.out_of_retries)
            await command(ctx, dut, 3, retry=1)
            await ctx.tick()  # the count is read a cycle after the retry writes it
        assert ctx.get(dut.out_of_retries)
        await look_at(ctx, dut, 0)  # the count is per VI
        assert not ctx.get(dut.out_of_retries)
        await command(ctx, dut, 3, acked=1, acked_all=1)
        await look_at(ctx, dut, 3)
        assert not ctx.get(dut.out_of_retries)

    run(bench)


def test_stop_disarms_and_a_later_start_takes_a_new_deadline():
    async def bench(ctx, dut):
        await command(ctx, dut, 0, start=1)
        await cycles_until_due(ctx, dut, 0)
        await command(ctx, dut, 0, stop=1)
        assert ctx.get(dut.due) == 0
        await command(ctx, dut, 0, start=1)
        await assert_expires(ctx, dut, 0, RTO - 1)

    run(bench)


def test_a_read_response_keeps_its_timer_alive_and_forgives_its_retries():
    async def bench(ctx, dut):
        await start_after_retries(ctx, dut, 2)
        for _ in range(3 * RTO // 4):  # response frames arrive well within the RTO
            await ctx.tick().repeat(RTO // 2)
            assert ctx.get(dut.due) == 0
            await command(ctx, dut, 0, keepalive=1, keepalive_vi=2)  # the visit is elsewhere
        await look_at(ctx, dut, 2)
        assert not ctx.get(dut.out_of_retries)
        await assert_expires(ctx, dut, 2, RTO - 1)

    run(bench)


def test_connecting_a_vi_clears_its_timer_and_retries_but_no_other():
    async def bench(ctx, dut):
        for vi in (1, 2):
            await start_after_retries(ctx, dut, vi)
        await command(ctx, dut, 0, clear=1 << 1)
        await ctx.tick().repeat(RTO + dut.detection_latency)
        assert ctx.get(dut.due) == 1 << 2
        for vi, last in ((1, False), (2, True)):
            await look_at(ctx, dut, vi)
            assert ctx.get(dut.out_of_retries) == last

    run(bench)


def test_the_visits_command_wins_over_a_clear_in_the_same_cycle():
    async def bench(ctx, dut):
        await command(ctx, dut, 1, start=1, clear=1 << 1)
        await assert_expires(ctx, dut, 1, RTO - 1)

    run(bench)


def test_a_keepalive_meeting_a_visits_write_is_applied_a_cycle_later():
    async def bench(ctx, dut):
        await start_after_retries(ctx, dut, 2)
        await ctx.tick().repeat(RTO // 2)
        # VI 1's first frame and VI 2's read response in the same cycle: both deadlines move.
        await command(ctx, dut, 1, start=1, keepalive=1, keepalive_vi=2)
        await assert_expires(ctx, dut, 2, RTO)
        assert ctx.get(dut.due) >> 1 & 1
        await look_at(ctx, dut, 2)
        assert not ctx.get(dut.out_of_retries)

    run(bench)


@pytest.mark.parametrize("visit", ["retry", "stop"])
def test_a_keepalive_beside_a_visits_command_that_writes_no_deadline_still_lands(visit):
    """VI 1's retry or stop and VI 2's read response in the same cycle: VI 2's deadline moves and
    its retries are forgiven; VI 1's command acts (a retry leaves it expired, a stop disarms it)."""

    async def bench(ctx, dut):
        await command(ctx, dut, 1, start=1)
        await start_after_retries(ctx, dut, 2)
        await ctx.tick().repeat(RTO // 2)
        await command(ctx, dut, 1, keepalive=1, keepalive_vi=2, **{visit: 1})
        await assert_expires(ctx, dut, 2, RTO)
        await look_at(ctx, dut, 2)
        assert not ctx.get(dut.out_of_retries)
        await look_at(ctx, dut, 1)
        assert ctx.get(dut.expired) == (visit == "retry")

    run(bench)


def test_a_deadline_rewritten_at_any_phase_of_the_scanner_is_never_judged_on_its_old_value():
    async def bench(ctx, dut):
        await command(ctx, dut, 1, start=1)
        for phase in range(dut.detection_latency + 1):
            await cycles_until_due(ctx, dut, 1)  # the old deadline has passed
            for _ in range(phase):
                await ctx.tick()
            await command(ctx, dut, 1, acked=1)
            await assert_expires(ctx, dut, 1, RTO - 1)

    run(bench)
