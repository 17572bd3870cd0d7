"""The allocation filter (gateware/allocation_filter.py): the lines that missed lately."""

from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.base.coherence import CacheGeometry, cache_set
from numavia.gateware.allocation_filter import AllocationFilter

GEOMETRY = CacheGeometry(sets=4, ways=2, filter_lines=8)


def line(home, index):
    return home << 26 | index * GEOMETRY.line_bytes


def same_entry(addr):
    """Another line of another home that the filter keeps in the same entry as ``addr``."""
    home, index = addr >> 26, (addr & 0x3FFFFFF) // GEOMETRY.line_bytes
    entry = cache_set(index, home, GEOMETRY.filter_lines)
    other = next(i for i in range(64) if cache_set(i, home + 1, GEOMETRY.filter_lines) == entry and i != index)
    return line(home + 1, other)


def run(testbench):
    dut = AllocationFilter(GEOMETRY)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await testbench(ctx, dut)

    sim.add_testbench(bench)
    run_simulation(sim)


async def seen(ctx, dut, addr):
    ctx.set(dut.line, addr)
    await ctx.tick()  # the entry is read a cycle after the line is presented
    return ctx.get(dut.seen)


async def dead(ctx, dut, addr):
    assert await seen(ctx, dut, addr)
    return ctx.get(dut.dead)


async def strobe(ctx, dut, name, addr):
    ctx.set(dut.line, addr)
    ctx.set(getattr(dut, name), 1)
    await ctx.tick()
    ctx.set(getattr(dut, name), 0)


async def purge(ctx, dut, addr):
    ctx.set(dut.line, 0)  # the access controller looks elsewhere meanwhile
    ctx.set(dut.purged.payload, addr)
    ctx.set(dut.purged.valid, 1)
    await ctx.tick()
    ctx.set(dut.purged.valid, 0)
    await ctx.tick()  # read, then written


async def remember(ctx, dut, addr):
    await strobe(ctx, dut, "remember", addr)


def test_a_line_is_seen_once_remembered_and_not_before():
    async def testbench(ctx, dut):
        a, b = line(2, 5), line(2, 6)
        assert not await seen(ctx, dut, a)  # an empty filter knows no line, not even line 0
        assert not await seen(ctx, dut, line(0, 0))
        await remember(ctx, dut, a)
        assert await seen(ctx, dut, a)
        assert not await seen(ctx, dut, b)
        assert not await seen(ctx, dut, a + GEOMETRY.line_bytes * GEOMETRY.filter_lines)  # same index, same home
        await remember(ctx, dut, b)
        assert await seen(ctx, dut, a) and await seen(ctx, dut, b)

    run(testbench)


def test_a_line_taking_the_entry_makes_the_filter_forget_the_old_one():
    async def testbench(ctx, dut):
        a = line(1, 3)
        b = same_entry(a)
        await remember(ctx, dut, a)
        await remember(ctx, dut, b)
        assert await seen(ctx, dut, b)
        assert not await seen(ctx, dut, a)  # forgotten: its next miss is a first one again

    run(testbench)


def test_a_copy_purged_before_any_hit_makes_its_line_dead():
    async def testbench(ctx, dut):
        a, b, c = line(2, 5), line(2, 6), line(3, 9)
        for addr in (a, b):
            await remember(ctx, dut, addr)
        assert not await dead(ctx, dut, a)
        await strobe(ctx, dut, "referenced", b)  # the host hit b's copy
        await purge(ctx, dut, a)
        await purge(ctx, dut, b)
        await purge(ctx, dut, c)  # a line the filter does not know: nothing to learn
        assert await dead(ctx, dut, a)
        assert not await dead(ctx, dut, b)  # b's hit is used up by its purge:
        await purge(ctx, dut, b)
        assert await dead(ctx, dut, b)  # its next copy has to be hit again
        assert not await seen(ctx, dut, c)
        await strobe(ctx, dut, "referenced", a)  # a write miss cached a, and the host hit it
        assert not await dead(ctx, dut, a)

    run(testbench)
