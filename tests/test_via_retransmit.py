"""Retransmission timers alone: the expiry one RTO after the first frame, the deadline kept by a
later frame, restart and stop by acknowledgements, the retry count and its limit, the read
response's keepalive, a connect's clear, and the command's priority over a clear."""

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
    ctx.set(dut.vi, vi)
    for name, value in pulses.items():
        ctx.set(getattr(dut, name), value)
    await ctx.tick()
    for name in pulses:
        ctx.set(getattr(dut, name), 0)


async def cycles_until_due(ctx, dut, vi, limit=10 * RTO):
    for n in range(limit):
        if ctx.get(dut.due) >> vi & 1:
            return n
        await ctx.tick()
    raise AssertionError(f"VI {vi}'s timer never expired")


def test_a_started_timer_expires_one_rto_later_and_only_for_its_vi():
    async def bench(ctx, dut):
        await command(ctx, dut, 2, start=1)
        assert await cycles_until_due(ctx, dut, 2) == RTO - 1
        assert ctx.get(dut.due) == 1 << 2
        ctx.set(dut.vi, 2)
        await ctx.delay(1e-9)
        assert ctx.get(dut.expired)
        ctx.set(dut.vi, 1)
        await ctx.delay(1e-9)
        assert not ctx.get(dut.expired)

    run(bench)


def test_a_second_start_keeps_the_oldest_frames_deadline():
    async def bench(ctx, dut):
        await command(ctx, dut, 0, start=1)
        await ctx.tick().repeat(RTO // 2)
        await command(ctx, dut, 0, start=1)
        assert await cycles_until_due(ctx, dut, 0) == RTO - RTO // 2 - 2

    run(bench)


def test_an_acknowledgement_restarts_the_timer_and_stops_it_once_all_is_acknowledged():
    async def bench(ctx, dut):
        await command(ctx, dut, 1, start=1)
        await ctx.tick().repeat(RTO - 5)
        await command(ctx, dut, 1, acked=1)  # part acknowledged: a full RTO from here
        assert await cycles_until_due(ctx, dut, 1) == RTO - 1
        await command(ctx, dut, 1, acked=1, acked_all=1)
        await ctx.tick().repeat(2 * RTO)
        assert ctx.get(dut.due) == 0

    run(bench)


def test_retries_count_to_the_limit_and_an_acknowledgement_forgives_them():
    async def bench(ctx, dut):
        ctx.set(dut.vi, 3)
        await ctx.delay(1e-9)
        for _ in range(LIMIT - 1):
            assert not ctx.get(dut.out_of_retries)
            await command(ctx, dut, 3, retry=1)
        assert ctx.get(dut.out_of_retries)
        ctx.set(dut.vi, 0)  # the count is per VI
        await ctx.delay(1e-9)
        assert not ctx.get(dut.out_of_retries)
        await command(ctx, dut, 3, acked=1, acked_all=1)
        ctx.set(dut.vi, 3)
        await ctx.delay(1e-9)
        assert not ctx.get(dut.out_of_retries)

    run(bench)


def test_stop_disarms_and_a_later_start_takes_a_new_deadline():
    async def bench(ctx, dut):
        await command(ctx, dut, 0, start=1)
        await ctx.tick().repeat(RTO)
        assert ctx.get(dut.due) == 1
        await command(ctx, dut, 0, stop=1)
        assert ctx.get(dut.due) == 0
        await command(ctx, dut, 0, start=1)
        assert await cycles_until_due(ctx, dut, 0) == RTO - 1

    run(bench)


def test_a_read_response_keeps_its_timer_alive_and_forgives_its_retries():
    async def bench(ctx, dut):
        await command(ctx, dut, 2, start=1)
        await command(ctx, dut, 2, retry=1)
        await command(ctx, dut, 2, retry=1)
        for _ in range(3 * RTO // 4):  # response frames arrive well within the RTO
            await ctx.tick().repeat(RTO // 2)
            assert ctx.get(dut.due) == 0
            await command(ctx, dut, 0, keepalive=1, keepalive_vi=2)  # the visit is elsewhere
        ctx.set(dut.vi, 2)
        await ctx.delay(1e-9)
        assert not ctx.get(dut.out_of_retries)
        assert await cycles_until_due(ctx, dut, 2) == RTO - 1

    run(bench)


def test_connecting_a_vi_clears_its_timer_and_retries_but_no_other():
    async def bench(ctx, dut):
        for vi in (1, 2):
            await command(ctx, dut, vi, start=1)
            await command(ctx, dut, vi, retry=1)
            await command(ctx, dut, vi, retry=1)
        await command(ctx, dut, 0, clear=1 << 1)
        await ctx.tick().repeat(RTO)
        assert ctx.get(dut.due) == 1 << 2
        for vi, last in ((1, False), (2, True)):
            ctx.set(dut.vi, vi)
            await ctx.delay(1e-9)
            assert ctx.get(dut.out_of_retries) == last

    run(bench)


def test_the_visits_command_wins_over_a_clear_in_the_same_cycle():
    async def bench(ctx, dut):
        await command(ctx, dut, 1, start=1, clear=1 << 1)
        assert await cycles_until_due(ctx, dut, 1) == RTO - 1

    run(bench)
