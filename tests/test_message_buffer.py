"""The sequencer's message buffer: a data block taken in a word per cycle beside the run, words
readable as soon as they are in, a block handed over from a word other than 0, a drained block
writing nothing."""

import random

from amaranth.sim import Simulator
from support.sim import CLOCK_PERIOD, run_simulation

from numavia.gateware.bfm import send
from numavia.gateware.message_buffer import MessageBuffer

LINE_WORDS = 16


def run(testbench):
    dut = MessageBuffer(LINE_WORDS)
    sim = Simulator(dut)
    sim.add_clock(CLOCK_PERIOD)

    async def bench(ctx):
        await testbench(ctx, dut)

    sim.add_testbench(bench)
    run_simulation(sim)


async def start(ctx, dut, keep, first=0):
    ctx.set(dut.start, 1)
    ctx.set(dut.keep, keep)
    ctx.set(dut.first, first)
    await ctx.tick()
    ctx.set(dut.start, 0)


async def read(ctx, dut, index):
    ctx.set(dut.read_addr, index)
    ctx.set(dut.read_en, 1)
    await ctx.tick()
    ctx.set(dut.read_en, 0)
    return ctx.get(dut.read_data)


def test_words_are_readable_as_they_arrive_and_the_block_ends_itself():
    rng = random.Random(1)
    block = [rng.randrange(1 << 32) for _ in range(LINE_WORDS)]

    async def testbench(ctx, dut):
        await start(ctx, dut, keep=1)
        assert ctx.get(dut.receiving) and ctx.get(dut.words) == 0
        for i, word in enumerate(block):
            for _ in range(rng.randrange(3)):  # the ring link's gaps
                await ctx.tick()
            assert not ctx.get(dut.holds(i))
            await send(ctx, dut.data, word)
            assert ctx.get(dut.words) == i + 1 and ctx.get(dut.holds(i))
            assert await read(ctx, dut, i) == word  # readable the cycle after it was written
        assert not ctx.get(dut.receiving)
        assert not ctx.get(dut.data.ready)  # nothing more is taken until the next block
        for i in reversed(range(LINE_WORDS)):
            assert await read(ctx, dut, i) == block[i]
        ctx.set(dut.read_addr, 0)  # read_en low: the word read last holds
        await ctx.tick()
        assert ctx.get(dut.read_data) == block[0]

    run(testbench)


def test_a_drained_block_writes_nothing():
    async def testbench(ctx, dut):
        await start(ctx, dut, keep=1)
        for i in range(LINE_WORDS):
            await send(ctx, dut.data, 100 + i)
        await start(ctx, dut, keep=0)
        for i in range(LINE_WORDS):
            await send(ctx, dut.data, 0xDEAD0000 + i)
        assert not ctx.get(dut.receiving) and ctx.get(dut.words) == LINE_WORDS
        assert [await read(ctx, dut, i) for i in range(LINE_WORDS)] == [100 + i for i in range(LINE_WORDS)]

    run(testbench)


def test_a_block_handed_over_from_its_word_asked_for_wraps_round_the_line():
    """An answer's word asked for (11) comes first: it is readable after one word, word 10 only
    after the whole block."""
    first = 11

    async def testbench(ctx, dut):
        await start(ctx, dut, keep=1, first=first)
        order = [(first + k) % LINE_WORDS for k in range(LINE_WORDS)]
        for k, index in enumerate(order):
            assert not ctx.get(dut.holds(index))
            await send(ctx, dut.data, 0x100 + index)
            assert ctx.get(dut.holds(index))
            assert all(ctx.get(dut.holds(i)) == (i in order[: k + 1]) for i in range(LINE_WORDS))
        assert not ctx.get(dut.receiving)
        assert [await read(ctx, dut, i) for i in range(LINE_WORDS)] == [0x100 + i for i in range(LINE_WORDS)]

    run(testbench)
