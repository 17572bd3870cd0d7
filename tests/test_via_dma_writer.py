"""DMA writer: unaligned ranges fed from one byte stream, untouched neighbours, errors, flush."""

import random

import pytest
from amaranth.sim import Simulator
from support.sim import run_simulation
from support.wishbone_sram import OnSram, dump, load_words

from numavia.gateware.bfm import send
from numavia.gateware.via_dma_writer import DmaWriter

BASE = 0x6000_0000
SIZE = 1024


def run(commands, stream_bytes, *, valid_pattern=None, seed=3, words=None, bursting=True):
    """Write ``stream_bytes`` through ``commands``; returns (memory before, memory after, errors, cycles)."""
    top = OnSram(DmaWriter(), base=BASE, size=SIZE, bursting=bursting)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    rng = random.Random(seed)
    before = bytes(rng.randrange(256) for _ in range(SIZE))
    out = {}

    async def feeder(ctx):
        load_words(ctx, top.sram, BASE, before)
        chunks = words or [stream_bytes[i : i + 4] for i in range(0, len(stream_bytes), 4)]
        for chunk in chunks:
            while valid_pattern is not None and rng.random() > valid_pattern:
                await ctx.tick()
            await send(
                ctx, top.dut.data, {"data": int.from_bytes(chunk.ljust(4, b"\xee"), "little"), "nbytes": len(chunk)}
            )

    errors = [0]

    async def monitor(ctx):
        while True:
            errors[0] += ctx.get(top.dut.error)
            await ctx.tick()

    async def commander(ctx):
        cycles = 0
        for addr, length in commands:
            await send(ctx, top.dut.cmd, {"addr": addr, "length": length})
        for _ in range(20000):
            cycles += 1
            if not ctx.get(top.dut.busy):
                break
            await ctx.tick()
        out["errors"] = errors[0]
        out["cycles"] = cycles
        out["after"] = dump(ctx, top.sram, BASE, SIZE)

    sim.add_testbench(feeder, background=True)
    sim.add_testbench(monitor, background=True)
    sim.add_testbench(commander)
    run_simulation(sim)
    return before, out["after"], out["errors"], out["cycles"]


def expected(before, commands, stream_bytes):
    mem = bytearray(before)
    pos = 0
    for addr, length in commands:
        mem[addr - BASE : addr - BASE + length] = stream_bytes[pos : pos + length]
        pos += length
    return bytes(mem)


@pytest.mark.parametrize("offset,length", [(0, 4), (1, 1), (3, 2), (2, 7), (1, 63), (0, 64), (3, 301)])
def test_single_range_any_alignment(offset, length):
    data = bytes(range(256)) * 2
    cmds = [(BASE + offset, length)]
    before, after, errors, _ = run(cmds, data[:length])
    assert after == expected(before, cmds, data[:length]) and errors == 0


def test_scatter_over_several_ranges_from_one_stream():
    data = bytes(random.Random(9).randrange(256) for _ in range(150))
    cmds = [(BASE + 101, 3), (BASE + 10, 50), (BASE + 403, 1), (BASE + 600, 0), (BASE + 202, 96)]
    before, after, errors, _ = run(cmds, data)
    assert after == expected(before, cmds, data) and errors == 0


def test_partial_beats_and_a_slow_source():
    words = [b"ab", b"cdef", b"g", b"hijk", b"lm"]
    data = b"".join(words)
    cmds = [(BASE + 7, 5), (BASE + 30, 8)]
    before, after, _, _ = run(cmds, data, words=words, valid_pattern=0.3)
    assert after == expected(before, cmds, data)


def test_bus_error_is_reported_and_the_writer_moves_on():
    # Errors come from the SoC's decoder on an access; DMA bursts never leave host memory.
    data = bytes(range(16))
    cmds = [(BASE + SIZE - 4, 8), (BASE + 0, 8)]
    before, after, errors, _ = run(cmds, data, bursting=False)
    assert errors == 1
    assert after[:8] == data[8:16]


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_throughput_is_a_word_a_cycle_in_bursts_at_any_alignment(offset):
    data = bytes(range(256)) * 2
    cmds = [(BASE + offset, 508)]
    before, after, _, cycles = run(cmds, data[:508])
    assert after == expected(before, cmds, data[:508])
    words = (offset + 508 + 3) // 4
    assert cycles <= words + 3 * (words // 16) + 8  # a burst restart after every 16 words


def test_stream_ready_does_not_follow_the_bus_ack_in_the_same_cycle():
    # On the SoC the ack comes through the arbiter and the decoder: if ready followed it, so
    # would the receive FIFO's read address, in one clock cycle.
    writer = DmaWriter()
    sim = Simulator(writer)
    sim.add_clock(1e-8)
    rng = random.Random(5)
    seen = {"stalled_with_bytes_waiting": 0}

    async def feeder(ctx):
        for i in range(200):
            await send(ctx, writer.data, {"data": i, "nbytes": 4})

    async def target(ctx):
        await send(ctx, writer.cmd, {"addr": BASE + 1, "length": 800})
        for _ in range(600):
            ctx.set(writer.bus.ack, 0)
            without_ack = ctx.get(writer.data.ready)
            ctx.set(writer.bus.ack, 1)
            assert ctx.get(writer.data.ready) == without_ack
            acking = rng.random() < 0.5
            stalled = ctx.get(writer.bus.stb) and not acking
            seen["stalled_with_bytes_waiting"] += stalled and not without_ack
            ctx.set(writer.bus.ack, ctx.get(writer.bus.stb) and acking)
            await ctx.tick()

    sim.add_testbench(feeder, background=True)
    sim.add_testbench(target)
    run_simulation(sim)
    assert seen["stalled_with_bytes_waiting"]  # the buffer did fill: ready was really tested


def test_flush_drops_the_buffered_bytes_and_the_beat_taken_with_it():
    """Bytes buffered with no command and a beat offered in the flush's own cycle (ready does not
    follow the flush) are dropped; the next command writes the stream's next bytes, nothing else."""
    top = OnSram(DmaWriter(), base=BASE, size=SIZE)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    before = bytes(range(256)) * (SIZE // 256)
    out = {}

    async def bench(ctx):
        writer = top.dut
        load_words(ctx, top.sram, BASE, before)
        for word in (b"XXXX", b"YYYY"):
            await send(ctx, writer.data, {"data": int.from_bytes(word, "little"), "nbytes": 4})
        ctx.set(writer.flush, 1)
        ctx.set(writer.data.valid, 1)
        ctx.set(writer.data.payload, {"data": int.from_bytes(b"ZZZZ", "little"), "nbytes": 4})
        out["ready_with_flush"] = ctx.get(writer.data.ready)
        await ctx.tick()
        ctx.set(writer.flush, 0)
        ctx.set(writer.data.valid, 0)
        await send(ctx, writer.cmd, {"addr": BASE + 0x21, "length": 4})
        await send(ctx, writer.data, {"data": int.from_bytes(b"GOOD", "little"), "nbytes": 4})
        for _ in range(50):
            await ctx.tick()
        out["busy"] = ctx.get(writer.busy)
        out["after"] = dump(ctx, top.sram, BASE, SIZE)

    sim.add_testbench(bench)
    run_simulation(sim)
    assert out["ready_with_flush"] and not out["busy"]
    assert out["after"] == before[:0x21] + b"GOOD" + before[0x25:]


def test_classic_target_is_one_word_per_two_cycles():
    data = bytes(range(256)) * 2
    cmds = [(BASE + 3, 500)]
    before, after, _, cycles = run(cmds, data, bursting=False)
    assert after == expected(before, cmds, data[:500])
    assert cycles <= 2 * 126 + 126 // 16 + 8
