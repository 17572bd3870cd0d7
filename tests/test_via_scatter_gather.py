"""Scatter/gather walker over the real ATT: validation results, chunks split at segments and pages,
and the first page's translation taken from VALIDATE (one lookup for a small message)."""

import random

from amaranth import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator
from support.sim import run_simulation

from numavia.base import via_att
from numavia.gateware.bfm import send
from numavia.gateware.via_scatter_gather import OP_VALIDATE, OP_WALK, ScatterGather
from numavia.gateware.via_translate import AddressTranslator

REGIONS, PAGES = 4, 32
REWRITE = "rewrite"
PTAG = 3


class Top(wiring.Component):
    def __init__(self):
        self.sg = ScatterGather(max_segments=4)
        self.att = AddressTranslator(regions=REGIONS, pages=PAGES, ports=1)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.sg = self.sg
        m.submodules.att = self.att
        wiring.connect(m, self.sg.att, self.att.lookups[0])
        return m


# Region 0: 5 pages at an unaligned virtual address, scattered physical pages.
VA0 = 0x10_0000_0A00
PAGES0 = [0x6000_0A00, 0x6003_0000, 0x6001_0000, 0x6007_0000, 0x6002_0000]
LEN0 = 4 * 4096 + 0x100


def l1_words(**fields):
    data = via_att.L1_ENTRY.encode(**fields)
    return [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4)]


def reference_chunks(segments, offset, length):
    """What the walker must emit: split at segment and page ends."""
    chunks = []
    for va, _handle, seg_len in segments:
        if offset >= seg_len:
            offset -= seg_len
            continue
        pos = va + offset
        end = va + min(seg_len, offset + length)
        while pos < end:
            page = (pos >> 12) - (VA0 >> 12)
            pa = (PAGES0[page] & ~0xFFF) | (pos & 0xFFF)
            n = min(end, (pos | 0xFFF) + 1) - pos
            chunks.append((pa, n))
            pos += n
        length -= end - (va + offset)
        offset = 0
        if length == 0:
            break
    return chunks


def run(segments, commands, *, ptag=PTAG, lookups=None):
    """Run ``commands`` on ``segments``; ``lookups``, if given, gets the number of ATT lookups each
    command made. A command ``(REWRITE, segment)`` writes segment 0 again instead."""
    top = Top()
    sim = Simulator(top)
    sim.add_clock(1e-8)
    out = []
    count = [0]

    async def monitor(ctx):
        async for _, _, valid, ready in ctx.tick().sample(top.sg.att.req.valid, top.sg.att.req.ready):
            count[0] += valid and ready

    async def bench(ctx):
        att = top.att
        base = via_att.l2_word_base(REGIONS)
        for i, pa in enumerate(PAGES0):
            ctx.set(att.write_addr, base + i)
            ctx.set(att.write_data, pa)
            ctx.set(att.write_en, 1)
            await ctx.tick()
        pages, first = via_att.region_pages(VA0, LEN0)
        attrs = via_att.L1_ENTRY.encode_bits("ATTRIBUTES", VALID=1)
        for i, word in enumerate(
            l1_words(
                START_VA=VA0,
                LENGTH=LEN0,
                L2_INDEX=0,
                PAGE_COUNT=pages,
                FIRST_PAGE_SIZE=first,
                PTAG=PTAG,
                ATTRIBUTES=attrs,
            )
        ):
            ctx.set(att.write_addr, i)
            ctx.set(att.write_data, word)
            await ctx.tick()
        ctx.set(att.write_en, 0)
        sg = top.sg
        for i, (va, handle, length) in enumerate(segments):
            ctx.set(sg.seg_index, i)
            ctx.set(sg.seg_data, {"va": va, "handle": handle, "length": length})
            ctx.set(sg.seg_write, 1)
            await ctx.tick()
        ctx.set(sg.seg_write, 0)
        ctx.set(sg.count, len(segments))
        ctx.set(sg.ptag, ptag)
        for command in commands:
            if command[0] == REWRITE:
                ctx.set(sg.seg_index, 0)
                ctx.set(sg.seg_data, dict(zip(("va", "handle", "length"), command[1])))
                ctx.set(sg.seg_write, 1)
                await ctx.tick()
                ctx.set(sg.seg_write, 0)
                continue
            op, offset, length = command
            count[0] = 0
            await send(ctx, sg.cmd, {"op": op, "offset": offset, "length": length})
            chunks = []
            ctx.set(sg.result.ready, 1)
            ctx.set(sg.chunks.ready, 1)
            for _ in range(5000):
                if ctx.get(sg.chunks.valid):
                    c = ctx.get(sg.chunks.payload)
                    chunks.append((c.pa, c.length))
                if ctx.get(sg.result.valid):
                    r = ctx.get(sg.result.payload)
                    await ctx.tick()
                    out.append((r.fail, r.total, chunks))
                    if lookups is not None:
                        lookups.append(count[0])
                    break
                await ctx.tick()
            ctx.set(sg.result.ready, 0)
            ctx.set(sg.chunks.ready, 0)

    sim.add_testbench(bench)
    sim.add_process(monitor)
    run_simulation(sim)
    return out


SEGMENTS = [(VA0 + 0x10, 0, 0x5F3), (VA0 + 0x1000, 0, 0), (VA0 + 0x1FFD, 0, 0x1010), (VA0 + 7, 0, 1)]


def test_validate_sums_lengths():
    ((fail, total, chunks),) = run(SEGMENTS, [(OP_VALIDATE, 0, 0)])
    assert (fail, total, chunks) == (0, 0x5F3 + 0x1010 + 1, [])


def test_validate_reports_the_failing_segment():
    bad_range = SEGMENTS[:2] + [(VA0 + LEN0 - 4, 0, 8)]
    bad_handle = [(VA0, 2, 4)]
    results = (
        run(bad_range, [(OP_VALIDATE, 0, 0)])
        + run(bad_handle, [(OP_VALIDATE, 0, 0)])
        + run(SEGMENTS, [(OP_VALIDATE, 0, 0)], ptag=PTAG + 1)
    )
    assert [r[0] for r in results] == [via_att.FAIL_RANGE, via_att.FAIL_HANDLE, via_att.FAIL_PTAG]


def test_walk_whole_message_splits_at_segments_and_pages():
    total = 0x5F3 + 0x1010 + 1
    ((fail, _, chunks),) = run(SEGMENTS, [(OP_WALK, 0, total)])
    assert fail == 0
    assert chunks == reference_chunks(SEGMENTS, 0, total)
    assert sum(n for _, n in chunks) == total


def test_walk_windows_like_frames():
    total = 0x5F3 + 0x1010 + 1
    rng = random.Random(4)
    windows, pos = [], 0
    while pos < total:
        n = min(total - pos, rng.choice([1, 7, 1458, 300]))
        windows.append((pos, n))
        pos += n
    results = run(SEGMENTS, [(OP_WALK, o, n) for o, n in windows])
    for (offset, length), (fail, _, chunks) in zip(windows, results):
        assert fail == 0 and chunks == reference_chunks(SEGMENTS, offset, length)


def test_walk_past_the_segments_fails():
    ((fail, _, chunks),) = run(SEGMENTS[:1], [(OP_WALK, 0x5F0, 8)])
    assert fail == via_att.FAIL_RANGE and chunks == [(reference_chunks(SEGMENTS, 0x5F0, 3)[0])]


def test_a_walk_in_the_validated_first_page_needs_no_second_lookup():
    """VALIDATE of one segment, then a 4-byte walk and a walk to the end of its first page: one
    lookup in all. A walk into the next page, or into another segment, looks up again."""
    seg = [(VA0 + 0x10, 0, 0x2000)]
    first_page = 0x1000 - 0xA10  # bytes of the segment in its first page
    commands = [(OP_VALIDATE, 0, 0), (OP_WALK, 0, 4), (OP_WALK, 4, first_page - 4), (OP_WALK, first_page - 2, 8)]
    lookups = []
    results = run(seg, commands, lookups=lookups)
    assert lookups == [1, 0, 0, 1]
    for (_, offset, length), (fail, _, chunks) in zip(commands[1:], results[1:]):
        assert fail == 0 and chunks == reference_chunks(seg, offset, length)
    lookups = []
    results = run(SEGMENTS, [(OP_VALIDATE, 0, 0), (OP_WALK, 0, 0x5F4)], lookups=lookups)
    assert lookups == [4, 2] and results[1][2] == reference_chunks(SEGMENTS, 0, 0x5F4)


def test_a_walk_without_validate_or_after_the_segment_changed_looks_up():
    """The first page's translation is only VALIDATE's, for the segment it validated: a walk on
    its own (a read response's) looks the chunk up, and so does one after segment 0 was written
    again (here with a handle that is not valid: the walk fails instead of using the old page)."""
    lookups = []
    run([(VA0 + 0x10, 0, 0x100)], [(OP_WALK, 0, 4)], lookups=lookups)
    assert lookups == [1]
    lookups = []
    results = run(
        [(VA0 + 0x10, 0, 0x100)],
        [(OP_VALIDATE, 0, 0), (REWRITE, (VA0 + 0x10, 1, 0x100)), (OP_WALK, 0, 4)],
        lookups=lookups,
    )
    assert lookups == [1, 1] and [r[0] for r in results] == [0, via_att.FAIL_HANDLE]
