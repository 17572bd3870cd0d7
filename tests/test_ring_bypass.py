"""Bypass of the ring link (RingBypass) alone: packets fed on ``passing`` as the receive side gives
them, the FIFO read on ``out`` as the output would."""

from amaranth.sim import Simulator
from support.ring_bench import wait_cycles
from support.sim import run_simulation

from numavia.gateware.ring_bypass import BYPASS_EVENTS, RingBypass

WINDOW = 100


def run(testbench, *, depth=128, read=True):
    """Simulate a RingBypass; ``testbench(ctx, dut, seen)`` where ``seen`` fills with the entries
    popped from ``out`` (when ``read``) and the count of each event."""
    dut = RingBypass(depth=depth)
    seen = {"out": [], "events": dict.fromkeys(BYPASS_EVENTS, 0)}
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def reader(ctx):
        ctx.set(dut.out.ready, read)
        async for _, _, valid, entry, events in ctx.tick().sample(dut.out.valid, dut.out.payload, dut.events):
            if valid and read:
                seen["out"].append((entry.data, entry.end))
            for name in BYPASS_EVENTS:
                seen["events"][name] += getattr(events, name)

    async def main(ctx):
        ctx.set(dut.enable, 1)
        ctx.set(dut.scrub_window, WINDOW)
        await testbench(ctx, dut, seen)

    sim.add_testbench(reader, background=True)
    sim.add_testbench(main)
    run_simulation(sim)


async def pass_packet(ctx, dut, symbols, *, corrupt=False, gap=1):
    """One packet on ``passing``: its symbols, then its end (with the receive side's verdict)."""
    for i, symbol in enumerate(symbols):
        ctx.set(dut.passing.valid, 1)
        ctx.set(dut.passing.payload, {"data": symbol, "first": i == 0, "end": 0, "corrupt": 0})
        await ctx.tick()
    ctx.set(dut.passing.payload, {"data": 0, "first": 0, "end": 1, "corrupt": corrupt})
    await ctx.tick()
    ctx.set(dut.passing.valid, 0)
    await wait_cycles(ctx, gap)


def entries(*packets):
    return [entry for symbols in packets for entry in [(s, 0) for s in symbols] + [(0, 1)]]


def counted(seen):
    return {name: n for name, n in seen["events"].items() if n}


def test_packets_come_out_unchanged_each_with_an_end_marker():
    packets = [[0x1234, 0x5678, 0x9ABC], [0x0001] * 11, [0xFFFF, 0]]

    async def tb(ctx, dut, seen):
        for symbols in packets:
            await pass_packet(ctx, dut, symbols)
        await wait_cycles(ctx, 3)
        assert seen["out"] == entries(*packets)
        assert counted(seen) == {"BYPASSED": 3}

    run(tb)


def test_a_corrupt_packet_seen_again_within_the_window_is_removed():
    """The second pass of a corrupt packet (same first symbol) is scrubbed once; a packet with that
    symbol after the window, an aborted packet's resend and an intact packet's next copy pass."""
    debris = [0xBEEF, 1, 2, 3]
    aborted = [0x4242, 7, 8]
    intact = [0x1111, 5]

    async def tb(ctx, dut, seen):
        await pass_packet(ctx, dut, debris, corrupt=True)
        await pass_packet(ctx, dut, aborted)  # aborted by its sender: not corrupt, resent at once
        await pass_packet(ctx, dut, aborted)
        await pass_packet(ctx, dut, intact)
        await pass_packet(ctx, dut, intact)
        await pass_packet(ctx, dut, debris)  # round again: removed
        await pass_packet(ctx, dut, debris, corrupt=True)  # remembered afresh...
        await wait_cycles(ctx, WINDOW + 5)
        await pass_packet(ctx, dut, debris)  # ... but forgotten after the window
        await wait_cycles(ctx, 3)
        assert seen["out"] == entries(debris, aborted, aborted, intact, intact, debris, debris)
        assert counted(seen) == {"BYPASSED": 7, "SCRUBBED": 1}

    run(tb)


def test_a_disabled_node_scrubs_nothing():
    debris = [0xBEEF, 1]

    async def tb(ctx, dut, seen):
        ctx.set(dut.enable, 0)
        for _ in range(3):
            await pass_packet(ctx, dut, debris, corrupt=True)
        await wait_cycles(ctx, 3)
        assert seen["out"] == entries(debris, debris, debris)

    run(tb)


def test_level_counts_entries_and_a_write_into_a_full_fifo_is_flagged():
    async def tb(ctx, dut, seen):
        await pass_packet(ctx, dut, [1, 2, 3], gap=0)
        assert ctx.get(dut.level) == 4
        await pass_packet(ctx, dut, [4, 5, 6], gap=0)
        assert ctx.get(dut.level) == 8
        assert counted(seen) == {"BYPASSED": 2}
        await pass_packet(ctx, dut, [7])  # two more entries: one does not fit
        assert counted(seen) == {"BYPASSED": 3, "BYPASS_OVERFLOW": 1}

    run(tb, depth=9, read=False)
