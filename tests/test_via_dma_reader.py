"""DMA reader: byte ranges at any alignment, back-pressure, zero length, bus errors."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.wishbone_sram import OnSram, load_words

from numavia.gateware.via_dma_reader import DmaReader

BASE = 0x6000_0000
SIZE = 1024


def run(commands, *, ready_pattern=None, seed=1, bursting=True):
    """Issue ``commands`` [(addr, length)], collect beats; returns [(bytes, [errors])] per command."""
    top = OnSram(DmaReader(), base=BASE, size=SIZE, bursting=bursting)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    rng = random.Random(seed)
    memory = bytes(rng.randrange(256) for _ in range(SIZE))
    results = []
    cycles = []

    async def feeder(ctx):
        load_words(ctx, top.sram, BASE, memory)
        for addr, length in commands:
            ctx.set(top.dut.cmd.payload, {"addr": addr, "length": length})
            ctx.set(top.dut.cmd.valid, 1)
            while not ctx.get(top.dut.cmd.ready):
                await ctx.tick()
            await ctx.tick()
            ctx.set(top.dut.cmd.valid, 0)

    async def collector(ctx):
        rng = random.Random(seed + 1)
        start = None
        for _ in commands:
            got, errors = bytearray(), []
            for _ in range(20000):
                ready = 1 if ready_pattern is None else int(rng.random() < ready_pattern)
                ctx.set(top.dut.beats.ready, ready)
                if start is None and ctx.get(top.dut.busy):
                    start = 0
                if start is not None:
                    start += 1
                done = False
                if ready and ctx.get(top.dut.beats.valid):
                    beat = ctx.get(top.dut.beats.payload)
                    got += beat.data.to_bytes(4, "little")[: beat.nbytes]
                    errors.append(beat.error)
                    done = beat.last
                await ctx.tick()
                if done:
                    break
            else:
                break
            results.append((bytes(got), errors))
        ctx.set(top.dut.beats.ready, 0)
        cycles.append(start)

    sim.add_testbench(feeder)
    sim.add_testbench(collector)
    run_simulation(sim)
    assert len(results) == len(commands), "the reader hung"
    return memory, results, cycles[0]


@pytest.mark.parametrize("offset,length", [(0, 4), (1, 1), (3, 2), (2, 7), (1, 63), (0, 64), (5, 300)])
def test_reads_any_alignment(offset, length):
    memory, results, _ = run([(BASE + offset, length)])
    data, errors = results[0]
    assert data == memory[offset : offset + length]
    assert not any(errors)


def test_back_to_back_commands_keep_their_boundaries():
    cmds = [(BASE + 3, 5), (BASE + 100, 0), (BASE + 8, 12), (BASE + 1, 1)]
    memory, results, _ = run(cmds)
    for (addr, length), (data, _) in zip(cmds, results):
        assert data == memory[addr - BASE : addr - BASE + length]


def test_back_pressure_loses_nothing():
    memory, results, _ = run([(BASE + 2, 257)], ready_pattern=0.3)
    assert results[0][0] == memory[2:259]


def test_bus_error_marks_beats_and_completes():
    # Errors come from the SoC's decoder on an access; DMA bursts never leave host memory.
    _, results, _ = run([(BASE + SIZE - 4, 12), (BASE, 4)], bursting=False)
    data, errors = results[0]
    assert errors == [0, 1, 1]  # the first word is inside, the next two are not
    assert len(data) == 12
    assert results[1][1] == [0]  # and the reader keeps serving


def test_throughput_is_a_word_a_cycle_in_bursts():
    _, _, cycles = run([(BASE, 512)])
    assert cycles <= 128 + 3 * (128 // 16) + 8  # a burst restart after every 16 words


def test_classic_target_is_one_word_per_two_cycles():
    memory, results, cycles = run([(BASE + 1, 510)], bursting=False, ready_pattern=0.7)
    assert results[0][0] == memory[1:511]
    _, _, cycles = run([(BASE, 512)], bursting=False)
    assert cycles <= 2 * 128 + 128 // 16 + 8
