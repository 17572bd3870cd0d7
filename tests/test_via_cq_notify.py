"""Completion-queue notification alone: arming, firing on an entry not consumed (before or after
the arming), one shot, acknowledgement, reset, and a firing in the acknowledgement's cycle."""

from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.gateware.via_cq_notify import CqNotifier

CQS = 3


def run(bench):
    dut = CqNotifier(CQS)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def tb(ctx):
        await bench(ctx, dut)

    sim.add_testbench(tb)
    run_simulation(sim)


async def pulse(ctx, port, cq):
    ctx.set(port, 1 << cq)
    await ctx.tick()
    ctx.set(port, 0)


async def settle(ctx):
    await ctx.tick().repeat(2)


def test_an_armed_queue_fires_once_when_an_entry_arrives_and_waits_for_its_ack():
    async def bench(ctx, dut):
        await pulse(ctx, dut.arm, 1)
        await settle(ctx)
        assert ctx.get(dut.armed) == 0b010 and ctx.get(dut.notified) == 0 and not ctx.get(dut.pending)
        ctx.set(dut.tail[0], 1)  # another queue's entry wakes nobody
        await settle(ctx)
        assert ctx.get(dut.notified) == 0
        ctx.set(dut.tail[1], 1)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0b010 and ctx.get(dut.armed) == 0 and ctx.get(dut.pending)
        ctx.set(dut.tail[1], 2)  # a second entry does not fire again: one notification per arming
        ctx.set(dut.head[1], 2)
        await pulse(ctx, dut.ack, 1)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0 and not ctx.get(dut.pending)
        ctx.set(dut.tail[1], 3)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0

    run(bench)


def test_an_entry_not_consumed_before_the_arming_fires_at_once():
    async def bench(ctx, dut):
        ctx.set(dut.tail[2], 5)
        ctx.set(dut.head[2], 4)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0  # not armed: nothing
        await pulse(ctx, dut.arm, 2)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0b100

    run(bench)


def test_a_consumed_queue_stays_quiet_until_its_next_entry():
    async def bench(ctx, dut):
        ctx.set(dut.tail[0], 7)
        ctx.set(dut.head[0], 7)  # the consumer took everything, then arms
        await pulse(ctx, dut.arm, 0)
        for _ in range(5):
            await ctx.tick()
            assert ctx.get(dut.notified) == 0 and ctx.get(dut.armed) == 1
        ctx.set(dut.tail[0], 8)
        await settle(ctx)
        assert ctx.get(dut.notified) == 1

    run(bench)


def test_reset_disarms_and_clears_the_notification():
    async def bench(ctx, dut):
        await pulse(ctx, dut.arm, 0)
        await pulse(ctx, dut.arm, 1)
        ctx.set(dut.tail[1], 1)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0b010 and ctx.get(dut.armed) == 0b001
        ctx.set(dut.reset, 0b011)
        await ctx.tick()
        ctx.set(dut.reset, 0)
        await settle(ctx)
        assert ctx.get(dut.notified) == 0 and ctx.get(dut.armed) == 0

    run(bench)


def test_a_notification_firing_in_the_cycle_of_an_ack_is_kept():
    async def bench(ctx, dut):
        await pulse(ctx, dut.arm, 0)
        ctx.set(dut.tail[0], 1)
        await settle(ctx)
        ctx.set(dut.head[0], 1)
        await pulse(ctx, dut.arm, 0)  # re-armed after taking the entry
        ctx.set(dut.tail[0], 2)  # the next entry fires in the cycle the old notification is acked
        await pulse(ctx, dut.ack, 0)
        await settle(ctx)
        assert ctx.get(dut.notified) == 1

    run(bench)
