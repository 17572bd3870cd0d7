"""The sequencer's context store alone: saved contexts and byte enables read back a cycle later,
each index its own, byte enables written apart from the context."""

import random

from support.sim import run_testbench

from numavia.base.microcode import isa
from numavia.gateware.context_store import ContextLayout, ContextStore

LINE_BYTES = 64


def run(testbench):
    run_testbench(ContextStore(LINE_BYTES), testbench)


def random_context(rng):
    return rng.randrange(1 << ContextLayout.size)


async def save(ctx, dut, index, value):
    ctx.set(dut.save.en, 1)
    ctx.set(dut.save.index, index)
    ctx.set(dut.save.context.as_value(), value)
    await ctx.tick()
    ctx.set(dut.save.en, 0)


async def save_byte_enables(ctx, dut, entry, value):
    ctx.set(dut.save_byte_enables.en, 1)
    ctx.set(dut.save_byte_enables.entry, entry)
    ctx.set(dut.save_byte_enables.byte_enables, value)
    await ctx.tick()
    ctx.set(dut.save_byte_enables.en, 0)


async def read(ctx, dut, index):
    ctx.set(dut.read, index)
    await ctx.tick()
    return ctx.get(dut.context.as_value()), ctx.get(dut.byte_enables)


def test_every_context_reads_back_what_was_saved():
    rng = random.Random(3)
    contexts = {i: random_context(rng) for i in range(isa.NUM_TRANSACTIONS + 1)}  # the handler's too
    enables = {i: rng.randrange(1 << LINE_BYTES) for i in range(isa.NUM_TRANSACTIONS)}

    async def testbench(ctx, dut):
        for i, value in contexts.items():
            await save(ctx, dut, i, value)
        for i, value in enables.items():
            await save_byte_enables(ctx, dut, i, value)
        for i in rng.sample(sorted(contexts), len(contexts)):
            context, byte_enables = await read(ctx, dut, i)
            assert context == contexts[i], i
            if i < isa.NUM_TRANSACTIONS:
                assert byte_enables == enables[i], i

    run(testbench)


def test_reads_take_one_cycle_and_saves_touch_only_their_own_memory():
    rng = random.Random(4)
    first, second = random_context(rng), random_context(rng)

    async def testbench(ctx, dut):
        await save(ctx, dut, 2, first)
        await save(ctx, dut, 3, second)
        await save_byte_enables(ctx, dut, 2, 0xF0F0)
        ctx.set(dut.read, 2)
        assert ctx.get(dut.context.as_value()) != first  # not yet: the index was just given
        await ctx.tick()
        assert ctx.get(dut.context.as_value()) == first and ctx.get(dut.byte_enables) == 0xF0F0
        await save_byte_enables(ctx, dut, 2, 0x1)  # the bytes change, the context stays
        await save(ctx, dut, 3, first)  # another context changes
        assert await read(ctx, dut, 2) == (first, 0x1)
        assert await read(ctx, dut, 3) == (first, 0)

    run(testbench)
