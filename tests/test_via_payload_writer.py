"""VIA payload writer: a frame's payload into the walker's chunks at any alignment, the frame's
padding left alone, a job without payload, a walk that fails part way, a bus error."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.wishbone_sram import OnSram, dump, load_words

from numavia.base import via_att
from numavia.gateware.via_payload_writer import PayloadWriter
from numavia.gateware.via_scatter_gather import OP_WALK

BASE = 0x6000_0000
SIZE = 4096


class Job:
    """A frame's payload: `data` into `chunks` [(pa, length)] (the walker's answer, then `fail`),
    its words followed by `padding` words of the frame that are not payload."""

    def __init__(self, data, chunks, *, offset=0, fail=via_att.FAIL_NONE, padding=0):
        self.data, self.chunks, self.offset, self.fail = data, list(chunks), offset, fail
        words = [data[i : i + 4].ljust(4, b"\xee") for i in range(0, len(data), 4)] + [b"\xee" * 4] * padding
        self.words = [int.from_bytes(w, "little") for w in words]
        self.walks, self.ended, self.written, self.taken = [], None, 0, 0


def run(jobs, *, valid_pattern=None, seed=5):
    """Write `jobs` one after another; returns (memory before, memory after, DMA errors)."""
    top = OnSram(PayloadWriter(), base=BASE, size=SIZE)
    dut = top.dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    before = bytes(random.Random(seed).randrange(256) for _ in range(SIZE))
    result = {}

    async def bench(ctx):
        load_words(ctx, top.sram, BASE, before)
        rng = random.Random(seed + 1)
        pending, walker, words, dma_errors, cycle = list(jobs), [], [], 0, 0
        while pending and cycle < 20000:
            job = pending[0]
            if not words and job.taken == 0:
                words = list(job.words)
            ctx.set(dut.job.valid, 1)
            ctx.set(dut.job.payload, {"offset": job.offset, "length": len(job.data)})
            ctx.set(dut.walk.ready, not walker)
            head = walker[0] if walker else None
            ctx.set(dut.chunks.valid, head is not None and head[0] == "chunk")
            if head and head[0] == "chunk":
                ctx.set(dut.chunks.payload, {"pa": head[1], "length": head[2]})
            ctx.set(dut.walk_result.valid, head is not None and head[0] == "result")
            if head and head[0] == "result":
                ctx.set(dut.walk_result.payload, {"fail": head[1], "total": len(job.data)})
            offer = bool(words) and (valid_pattern is None or rng.random() < valid_pattern)
            ctx.set(dut.words.valid, offer)
            if words:
                ctx.set(dut.words.payload, {"data": words[0], "nbytes": 4, "last": len(words) == 1})

            if ctx.get(dut.walk.valid) and not walker:
                walk = ctx.get(dut.walk.payload)
                assert walk.op == OP_WALK
                job.walks.append((walk.offset, walk.length))
                walker = [("chunk", pa, n) for pa, n in job.chunks] + [("result", job.fail)]
            elif head and head[0] == "chunk" and ctx.get(dut.chunks.ready):
                walker.pop(0)
            elif head and head[0] == "result" and ctx.get(dut.walk_result.ready):
                walker.pop(0)
            if offer and ctx.get(dut.words.ready):
                words.pop(0)
                job.taken += 1
            job.written += ctx.get(dut.written)
            dma_errors += ctx.get(dut.dma_error)
            if ctx.get(dut.job.ready):
                job.ended = ctx.get(dut.error)
                pending.pop(0)
                walker, words = [], []  # what is left of the frame is the engine's to skip
            await ctx.tick()
            cycle += 1
        ctx.set(dut.job.valid, 0)
        await ctx.tick().repeat(4)
        assert not pending, "the writer hung"
        result.update(after=dump(ctx, top.sram, BASE, SIZE), dma_errors=dma_errors)

    sim.add_testbench(bench)
    run_simulation(sim)
    return before, result["after"], result["dma_errors"]


def expected(before, writes):
    """Memory after `writes` [(pa, bytes)]."""
    memory = bytearray(before)
    for pa, data in writes:
        memory[pa - BASE : pa - BASE + len(data)] = data
    return bytes(memory)


def split(data, chunks):
    """`data` cut to the lengths of `chunks`: [(pa, its bytes)]."""
    out, at = [], 0
    for pa, n in chunks:
        out.append((pa, data[at : at + n]))
        at += n
    return out


@pytest.mark.parametrize(
    "chunks",
    [
        [(BASE + 0x100, 4)],
        [(BASE + 0x203, 1)],
        [(BASE + 0x101, 7), (BASE + 0x802, 301), (BASE + 0x400, 2)],
        [(BASE + 0xFF3, 13), (BASE + 0x10, 1000)],
    ],
)
@pytest.mark.parametrize("valid_pattern", [None, 0.5])
def test_the_payload_lands_in_the_walkers_chunks_and_nothing_else_changes(chunks, valid_pattern):
    data = bytes(random.Random(len(chunks)).randrange(256) for _ in range(sum(n for _, n in chunks)))
    job = Job(data, chunks, offset=0x777, padding=3)
    before, after, dma_errors = run([job], valid_pattern=valid_pattern)
    assert after == expected(before, split(data, chunks))
    assert job.walks == [(0x777, len(data))] and job.ended == 0 and job.written == 1 and dma_errors == 0
    assert job.taken == (len(data) + 3) // 4  # the payload's words, not the frame's padding


def test_a_job_without_payload_ends_at_once_and_writes_nothing():
    empty = Job(b"", [])
    before, after, _ = run([empty])
    assert after == before and empty.walks == [] and empty.ended == 0 and empty.taken == 0


def test_a_walk_that_fails_ends_the_job_in_error_and_the_next_payload_lands_whole():
    first_page = bytes(range(64))
    bad = Job(first_page + bytes(100), [(BASE + 0x100, 64)], fail=via_att.FAIL_HANDLE)
    good = Job(bytes(range(40)), [(BASE + 0x600, 40)])
    before, after, _ = run([bad, good], valid_pattern=0.6)
    assert bad.ended == 1 and bad.written == 0
    assert good.ended == 0 and good.written == 1
    assert after[0x600:0x628] == bytes(range(40))
    # Nothing of the failed payload lands outside its first chunk (what did land there may be any part of it).
    assert after[:0x100] == before[:0x100] and after[0x140:0x600] == before[0x140:0x600]


def test_a_bus_error_is_reported_and_the_job_still_ends():
    outside = BASE + SIZE  # no memory answers there
    job = Job(bytes(range(16)), [(BASE + 0x20, 8), (outside, 8)])
    before, after, dma_errors = run([job])
    assert dma_errors >= 1 and job.ended == 0
    assert after == expected(before, [(BASE + 0x20, bytes(range(8)))])
