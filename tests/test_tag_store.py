# amaranth: UnusedElaboratable=no
# (test_bad_geometry_is_rejected builds TagStores that refuse their parameters: never elaborated)
"""Tag SRAM: lookup hit/miss in every way, replacement order, directory updates, latency."""

import pytest
from support.amaranth_helpers import rejected
from support.sim import run_testbench

from numavia.base.coherence import CacheGeometry, cache_set
from numavia.base.coherence import CacheState as C
from numavia.base.coherence import MemoryState as M
from numavia.base.sci_packet import line_address
from numavia.gateware.tag_store import LOOKUP_LATENCY, TagOp, TagStore

SETS, SLICE_LINES = 8, 64


async def command(ctx, dut, op, *, addr=0, **fields):
    ctx.set(dut.cmd, {"op": op, "addr": addr, **fields})
    ctx.set(dut.cmd_valid, 1)
    while True:
        _, _, ready = await ctx.tick().sample(dut.cmd_ready)
        if ready:
            break
    ctx.set(dut.cmd_valid, 0)
    if op in (TagOp.WRITE_TAG, TagOp.WRITE_DIR):
        return None
    cycles = 0
    while True:
        cycles += 1
        _, _, valid, resp = await ctx.tick().sample(dut.resp_valid, dut.resp)
        if valid:
            return resp, cycles


def run(ways, testbench, sets=SETS, line_bytes=64):
    dut = TagStore(geometry=CacheGeometry(sets=sets, ways=ways, line_bytes=line_bytes), slice_lines=SLICE_LINES)
    run_testbench(dut, testbench)


def lines_in_set(target_set, count, home=2, line_bytes=64):
    """``count`` distinct line addresses of ``home`` that map to ``target_set``."""
    out, index = [], 0
    while len(out) < count:
        if cache_set(index, home, SETS) == target_set:
            out.append(line_address(home, index * line_bytes, line_bytes))
        index += 1
    return out


@pytest.mark.parametrize("ways", [1, 2, 4])
def test_fill_every_way_then_hit_each(ways):
    async def tb(ctx, dut):
        lines = lines_in_set(3, ways)
        for way, line in enumerate(lines):
            resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=line)
            assert not resp.victim and not resp.no_way and resp.way == way  # invalid ways first
            await command(
                ctx, dut, TagOp.WRITE_TAG, addr=line, way=resp.way, state=C.MID_VALID, fwd=way + 1, bwd=way + 9
            )
        for way, line in enumerate(lines):
            resp, latency = await command(ctx, dut, TagOp.LOOKUP, addr=line)
            assert latency == LOOKUP_LATENCY and resp.hit and resp.way == way
            assert (resp.tag.state, resp.tag.fwd, resp.tag.bwd) == (C.MID_VALID, way + 1, way + 9)
        other = lines_in_set(3, ways + 1)[-1]
        resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=other)
        assert not resp.hit

    run(ways, tb)


@pytest.mark.parametrize("ways", [1, 2, 4])
def test_every_lookup_tells_the_lowest_invalid_way_of_the_set(ways):
    async def tb(ctx, dut):
        lines = lines_in_set(6, ways + 1)
        missing = lines[ways]
        for way in range(ways):
            resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=missing)
            assert not resp.hit and resp.free and resp.free_way == way
            # Way by way the set fills: the lowest invalid way is always the next one.
            await command(ctx, dut, TagOp.WRITE_TAG, addr=lines[way], way=way, state=C.PENDING)
        resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=missing)
        assert not resp.free  # a full set, however transient its ways
        await command(ctx, dut, TagOp.WRITE_TAG, addr=lines[ways - 1], way=ways - 1, state=C.INVALID)
        resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=lines[0])
        assert resp.hit == (ways > 1)  # (with one way, lines[0] was the line just invalidated)
        assert resp.free and resp.free_way == ways - 1  # told on a hit too

    run(ways, tb)


@pytest.mark.parametrize("ways, line_bytes", [(2, 64), (4, 64), (4, 32)])
def test_replacement_follows_lru_and_skips_transient_ways(ways, line_bytes):
    async def tb(ctx, dut):
        lines = lines_in_set(5, ways + 1, line_bytes=line_bytes)
        for way, line in enumerate(lines[:ways]):
            await command(ctx, dut, TagOp.WRITE_TAG, addr=line, way=way, state=C.ONLY_FRESH)
            await command(ctx, dut, TagOp.TOUCH, addr=line, way=way)
        # Touch order 0..ways-1: way 0 is least recently used.
        resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=lines[ways])
        assert resp.victim and resp.way == 0 and resp.victim_line == lines[0] // line_bytes
        await command(ctx, dut, TagOp.TOUCH, addr=lines[0], way=0)
        resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=lines[ways])
        assert resp.victim and resp.way == 1
        # A transient way is never a victim; with every way transient there is no way at all.
        await command(ctx, dut, TagOp.WRITE_TAG, addr=lines[1], way=1, state=C.LEAVE_MID)
        resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=lines[ways])
        assert resp.way == (2 if ways > 2 else 0)
        for way, line in enumerate(lines[:ways]):
            await command(ctx, dut, TagOp.WRITE_TAG, addr=line, way=way, state=C.PENDING)
        resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=lines[ways])
        assert resp.no_way
        # An invalid way beats every LRU candidate.
        await command(ctx, dut, TagOp.WRITE_TAG, addr=lines[ways - 1], way=ways - 1, state=C.INVALID)
        resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=lines[ways])
        assert resp.way == ways - 1 and not resp.victim and not resp.no_way

    run(ways, tb, line_bytes=line_bytes)


@pytest.mark.parametrize("line_bytes", [64, 32])
def test_directory_updates_and_lookup_returns_them(line_bytes):
    """Neighbouring lines have their own directory entries (with 32-byte lines, the two halves
    of a 64-byte block too)."""

    async def tb(ctx, dut):
        a, b = line_address(0, 2 * line_bytes, line_bytes), line_address(0, 3 * line_bytes, line_bytes)
        resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=a)
        assert (resp.dir.mstate, resp.dir.lock, resp.dir.head) == (M.HOME, 0, 0)
        await command(ctx, dut, TagOp.WRITE_DIR, addr=a, mstate=M.GONE, lock=1, head=17)
        await command(ctx, dut, TagOp.WRITE_DIR, addr=b, mstate=M.FRESH, lock=0, head=3)
        resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=a)
        assert (resp.dir.mstate, resp.dir.lock, resp.dir.head) == (M.GONE, 1, 17)
        resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=b)
        assert (resp.dir.mstate, resp.dir.lock, resp.dir.head) == (M.FRESH, 0, 3)

    run(4, tb, line_bytes=line_bytes)


@pytest.mark.parametrize("line_bytes", [64, 32])
def test_read_way_scans_tags(line_bytes):
    async def tb(ctx, dut):
        line = lines_in_set(6, 1, line_bytes=line_bytes)[0]
        await command(ctx, dut, TagOp.WRITE_TAG, addr=line, way=2, state=C.HEAD_DIRTY, fwd=4)
        resp, _ = await command(ctx, dut, TagOp.READ_WAY, set=6, way=2)
        assert resp.tag.state == C.HEAD_DIRTY and resp.tag.line == line // line_bytes
        resp, _ = await command(ctx, dut, TagOp.READ_WAY, set=6, way=1)
        assert resp.tag.state == C.INVALID

    run(4, tb, line_bytes=line_bytes)


def test_lookups_are_pipelined_one_per_cycle():
    async def tb(ctx, dut):
        lines = lines_in_set(1, 4)
        for way, line in enumerate(lines):
            await command(ctx, dut, TagOp.WRITE_TAG, addr=line, way=way, state=C.TAIL_VALID)
        seen = []
        for line in lines:  # one command per cycle, no waiting
            ctx.set(dut.cmd, {"op": TagOp.LOOKUP, "addr": line})
            ctx.set(dut.cmd_valid, 1)
            _, _, ready, valid, resp = await ctx.tick().sample(dut.cmd_ready, dut.resp_valid, dut.resp)
            assert ready
            if valid:
                seen.append(resp.way)
        ctx.set(dut.cmd_valid, 0)
        for _ in range(LOOKUP_LATENCY):
            _, _, valid, resp = await ctx.tick().sample(dut.resp_valid, dut.resp)
            if valid:
                seen.append(resp.way)
        assert seen == [0, 1, 2, 3]

    run(4, tb)


def test_homes_laying_out_their_slices_alike_share_a_direct_mapped_cache():
    """Every node puts the same arrays at the same offsets of its slice, so the hot lines of
    different homes have the same offsets. Four homes' first sets/4 lines must all fit a
    direct-mapped cache at once: none evicts another (the home's bits spread over the top of the
    set index; XORing small multiples of the home into the low bits left them colliding)."""
    sets, homes = 256, 4
    lines = [line_address(home, index * 64) for home in range(homes) for index in range(sets // homes)]

    async def tb(ctx, dut):
        for line in lines:
            resp, _ = await command(ctx, dut, TagOp.ALLOC, addr=line)
            assert not resp.victim and not resp.no_way, f"line {line:#x} evicts another"
            await command(ctx, dut, TagOp.WRITE_TAG, addr=line, way=resp.way, state=C.ONLY_FRESH)
        for line in lines:
            resp, _ = await command(ctx, dut, TagOp.LOOKUP, addr=line)
            assert resp.hit

    run(1, tb, sets=sets)


def test_bad_geometry_is_rejected():
    with rejected(ValueError, "power of two"):
        TagStore(geometry=CacheGeometry(sets=6, ways=4), slice_lines=64)
    with rejected(ValueError, "power of two"):
        TagStore(geometry=CacheGeometry(sets=8, ways=4), slice_lines=48)
    with rejected(ValueError, "at most 8"):
        TagStore(geometry=CacheGeometry(sets=8, ways=16), slice_lines=64)
    with rejected(ValueError, "line_bytes must be 16..64"):
        CacheGeometry(line_bytes=128)
