"""NetPIPE-style sweep over shared memory: node 0's host moves a message of ``size`` bytes to or
from node 1's slice with remote stores and loads (line bursts; a message under a line is one
burst of its words), one request at a time, as a host does over the uncached PCI window.

For each size, on fresh lines: ``load`` (cold: every line comes over the ring), ``load again``
(the same lines: in NCC-NUMA mode their second miss, which caches them), ``load a third time``
(the network cache serves them) and ``store`` (cold lines). The allocation filter caches a line
at its second miss, so the third load is the one that hits. Time
is the card cluster bench's cycle stamps from the first request to the last completion; it is a
one-way transfer time, the shared-memory counterpart of half a VIA round trip. Given a firmware,
the sweep runs on two complete nodes instead (VexRiscv, that firmware, the card: the SoC of
``numavia sim``), once both firmwares are ready, timed by the harness's host-port cycle stamps.
"""

from matplotlib.figure import Figure

from numavia.base import buildcache, trace
from numavia.base.coherence import LINE_BYTES
from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.gateware.card import CardConfig
from numavia.soc import card_bench, sim

from .stream import NODES, time_segments, time_segments_on_nodes

OPS = ("load", "load again", "load a third time", "store")
MODES = ("ncc", "numa")


def sizes(max_size):
    out, s = [], 4
    while s <= max_size:
        out.append(s)
        s *= 2
    return out


def bursts(addr, size):
    """``(address, words)`` of the bursts that move ``size`` bytes from ``addr`` (line aligned)."""
    return [(addr + offset, min(LINE_BYTES, size - offset) // 4) for offset in range(0, size, LINE_BYTES)]


def sweep_trace(points, base):
    """Node 0's records for every size and operation, on fresh lines from ``base``; and the
    ``(size, op, first record, count)`` segments."""
    records, segments, addr = [], [], base
    for size in points:
        span = -(-size // LINE_BYTES) * LINE_BYTES
        load_at, store_at = addr, addr + span
        addr += 2 * span
        for op in OPS:
            first = len(records)
            for a, words in bursts(store_at if op == "store" else load_at, size):
                records.append(
                    trace.write_access(a, size, words=words) if op == "store" else trace.read_access(a, words=words)
                )
            segments.append((size, op, first, len(records) - first))
    records.append(trace.barrier(0))
    return records, segments, addr - base


def measure(max_size=16 * 1024, *, config=None, log=print, run_root=None, firmware=None, spread=None):
    """The sweep on two cards alone (``card_bench``), or, with ``firmware`` (the ``--firmware``
    option's value), on two complete nodes running it."""
    if max_size < 4:
        raise NumaviaError("--max-size must be at least 4 bytes")
    root = run_root or buildcache.build_root() / "run" / "shm"
    if firmware is None:
        config = config or CardConfig(max_nodes=16, via=False)
        binary = card_bench.build_bench(config, log=log)
        timed = lambda mode, records, segments: time_segments(
            binary,
            root / f"{mode}-{max_size}",
            records,
            segments,
            numa=mode == "numa",
            spread=spread,
            what=f"shared-memory sweep ({mode})",
        )
    else:
        build = sim.build_all(sim.SimConfig(nodes=NODES), log=log, firmware=firmware)
        config = build.config.card_config()
        timed = lambda mode, records, segments: time_segments_on_nodes(
            build,
            root / f"nodes-{build.firmware.kind}-{mode}-{max_size}",
            records,
            segments,
            numa=mode == "numa",
            spread=spread,
            what=f"shared-memory sweep on nodes ({mode})",
        )
    amap = config.address_map()
    points = sizes(max_size)
    records, segments, used = sweep_trace(points, amap.slice_bytes)  # node 1's slice
    if used > amap.slice_bytes:
        raise NumaviaError(f"a sweep to {max_size} bytes needs {used} bytes of node 1's {amap.slice_bytes}-byte slice")
    rows = []
    for done, mode in enumerate(MODES, 1):
        results.progress(log, done, len(MODES), f"{mode.upper()}: {len(points)} sizes, {len(records) - 1:,} accesses")
        for (size, op, _, _), cycles in zip(segments, timed(mode, records, segments)):
            us = cycles / config.clk_freq_hz * 1e6
            rows.append(
                {"mode": mode, "op": op, "size": size, "cycles": cycles, "latency_us": us, "bandwidth_MBps": size / us}
            )
    return {
        "clock_mhz": config.clk_freq_hz / 1e6,
        "rows": rows,
        "firmware": firmware,
        "cache_bytes": config.cache_sets * config.cache_ways * LINE_BYTES,
    }


def report(figs, out):
    by = {(r["mode"], r["op"], r["size"]): r for r in figs["rows"]}
    columns = [(m, op) for m in MODES for op in OPS]
    rows = [
        [f"{size:,}"] + [f"{by[m, op, size]['latency_us']:.2f}" for m, op in columns]
        for size in sorted({r["size"] for r in figs["rows"]})
    ]
    largest = max(r["size"] for r in figs["rows"])
    rows.append([f"MB/s at {largest:,}"] + [f"{by[m, op, largest]['bandwidth_MBps']:.1f}" for m, op in columns])
    text = results.write(
        out,
        "shm",
        title="NetPIPE-style sweep over shared memory (node 0 to node 1's slice)",
        headers=["bytes"] + [f"{m.upper()} {op} (us)" for m, op in columns],
        rows=rows,
        figures=figs,
        config={
            "clock_mhz": figs["clock_mhz"],
            "network_cache_bytes": figs["cache_bytes"],
            "ring": f"two nodes running {figs['firmware']}" if figs.get("firmware") else "two cards alone",
        },
        notes=[
            "One-way transfer time: first request to last completion, from the RTL's cycle stamps.",
            "'load again' reads the same lines a second time: in NCC-NUMA mode their second miss, "
            "which caches them (the allocation filter caches a line at its second read miss).",
            f"'load a third time': the network cache ({figs['cache_bytes']:,} bytes) serves them in NCC-NUMA mode.",
            "Compare with VIA's half round trip in `numavia bench via` (via_bench.md).",
        ],
        plot=lambda path: plot(figs, path),
    )
    return text


def plot(figs, path):
    fig = Figure(figsize=(12, 4.5))
    (lat, bw) = fig.subplots(1, 2)
    for mode, style in zip(MODES, ("-", "--")):
        for op in OPS:
            pts = sorted((r for r in figs["rows"] if r["mode"] == mode and r["op"] == op), key=lambda r: r["size"])
            label = f"{mode.upper()} {op}"
            lat.plot([r["size"] for r in pts], [r["latency_us"] for r in pts], style, marker=".", label=label)
            bw.plot([r["size"] for r in pts], [r["bandwidth_MBps"] for r in pts], style, marker=".", label=label)
    for ax, title, unit in ((lat, "Transfer time", "us"), (bw, "Bandwidth", "MB/s")):
        ax.set_yscale("log")
        results.size_axes(ax, title, unit)
    fig.suptitle("Shared memory, node 0 to node 1's slice (one request at a time)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
