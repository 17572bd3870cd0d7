# amaranth: UnusedElaboratable=no
"""The work queues' heads and tails alone: doorbells are taken into their VI's next slot until the
queue is full and refused after, each VI's queue apart; the engine's VI reads its head and tail
(named a cycle ahead, doorbells and moves of that cycle read through) and moves the head on; the bus
reads any VI's count in the cycle after it names the VI, as it stands after that cycle; `posted`
follows which queues hold descriptors, a doorbell winning over the last descriptor's removal in the
same cycle; the depth is a power of two."""

import pytest
from support.sim import run_testbench

from numavia.gateware.via_queue_pointers import QueuePointers

VIS, DEPTH = 4, 4


async def ring(ctx, dut, vi, addr=0x1000):
    """One doorbell; returns (taken, refused, slot) as seen in its cycle."""
    ctx.set(dut.doorbell.valid, 1)
    ctx.set(dut.doorbell.payload.vi, vi)
    ctx.set(dut.doorbell.payload.addr, addr)
    seen = (ctx.get(dut.taken), ctx.get(dut.refused), ctx.get(dut.slot))
    await ctx.tick()
    ctx.set(dut.doorbell.valid, 0)
    return seen


async def visit(ctx, dut, vi):
    """The engine moves to VI ``vi``: named a cycle ahead (``next_vi``), there after the edge."""
    ctx.set(dut.next_vi, vi)
    await ctx.tick()
    ctx.set(dut.vi, vi)


async def queued(ctx, dut, vi):
    """The bus's count of VI ``vi``'s queue: named in one cycle, answered in the next."""
    ctx.set(dut.status_vi, vi)
    await ctx.tick()
    return ctx.get(dut.queued)


def test_doorbells_fill_their_vis_queue_slot_by_slot_and_a_full_queue_refuses():
    async def bench(ctx, dut):
        for i in range(DEPTH):
            assert await ring(ctx, dut, 2) == (1, 0, 2 * DEPTH + i)
        assert await ring(ctx, dut, 2) == (0, 1, 2 * DEPTH)  # full: refused, nothing moves
        assert await queued(ctx, dut, 2) == DEPTH and await queued(ctx, dut, 1) == 0
        assert await ring(ctx, dut, 1) == (1, 0, DEPTH)  # another VI's queue is its own
        assert ctx.get(dut.posted) == 0b0110

    run_testbench(QueuePointers(VIS, DEPTH), bench)


def test_the_engine_reads_its_vis_head_and_tail_and_moves_the_head_on():
    async def bench(ctx, dut):
        for _ in range(3):
            await ring(ctx, dut, 3)
        await visit(ctx, dut, 3)
        assert (ctx.get(dut.head), ctx.get(dut.tail)) == (0, 3)
        await ring(ctx, dut, 3)  # a doorbell for the engine's VI: in its tail from the next cycle
        assert (ctx.get(dut.head), ctx.get(dut.tail)) == (0, 4)
        ctx.set(dut.advance, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.advance, 0)
        assert (ctx.get(dut.head), ctx.get(dut.tail)) == (2, 4) and await queued(ctx, dut, 3) == 2
        ctx.set(dut.advance, 1)
        await ctx.tick()
        ctx.set(dut.advance, 0)
        await visit(ctx, dut, 0)
        assert (ctx.get(dut.head), ctx.get(dut.tail)) == (0, 0)  # VI 0's untouched
        await visit(ctx, dut, 3)
        assert (ctx.get(dut.head), ctx.get(dut.tail)) == (3, 4)  # VI 3's as it was left
        # Past the end of the slots: positions count twice round, slots wrap.
        for i in range(3):
            assert await ring(ctx, dut, 3) == (1, 0, 3 * DEPTH + (4 + i) % DEPTH), i
        assert await queued(ctx, dut, 3) == DEPTH
        assert await ring(ctx, dut, 3) == (0, 1, 3 * DEPTH + 3)

    run_testbench(QueuePointers(VIS, DEPTH), bench)


def test_posted_clears_with_the_last_descriptor_unless_a_doorbell_comes_in_the_same_cycle():
    async def bench(ctx, dut):
        await ring(ctx, dut, 1)
        await ring(ctx, dut, 2)
        await visit(ctx, dut, 1)
        ctx.set(dut.advance, 1)
        await ctx.tick()
        ctx.set(dut.advance, 0)
        assert ctx.get(dut.posted) == 0b0100 and await queued(ctx, dut, 1) == 0
        # VI 2's last descriptor done in the cycle a doorbell for VI 2 comes: still posted.
        await visit(ctx, dut, 2)
        ctx.set(dut.advance, 1)
        await ring(ctx, dut, 2)
        ctx.set(dut.advance, 0)
        assert ctx.get(dut.posted) == 0b0100 and await queued(ctx, dut, 2) == 1

    run_testbench(QueuePointers(VIS, DEPTH), bench)


def test_the_bus_reads_the_count_as_it_stands_after_the_cycle_it_names_the_vi():
    """A doorbell and a head's move in the cycle the bus names the VI are in the count it reads
    (the copies it reads are written as the records are, and read through), and the count stays
    that VI's while the engine and the doorbells move on to others."""

    async def bench(ctx, dut):
        await ring(ctx, dut, 1)
        ctx.set(dut.status_vi, 1)
        assert await ring(ctx, dut, 1) == (1, 0, DEPTH + 1)  # named in the doorbell's cycle
        assert ctx.get(dut.queued) == 2
        await visit(ctx, dut, 1)
        ctx.set(dut.advance, 1)
        await ctx.tick()
        ctx.set(dut.advance, 0)
        assert ctx.get(dut.queued) == 1
        await visit(ctx, dut, 0)
        await ring(ctx, dut, 0)
        assert ctx.get(dut.queued) == 1 and await queued(ctx, dut, 0) == 1

    run_testbench(QueuePointers(VIS, DEPTH), bench)


def test_the_depth_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        QueuePointers(VIS, 6)
