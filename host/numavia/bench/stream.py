"""STREAM-style bandwidth of the card's memories, seen from the host port: Copy, Scale, Add and
Triad over three arrays placed in node 0's private memory, in its own shared slice (home
memory) and in node 1's slice (remote: NCC-NUMA with the network cache, and NUMA without).

Node 0's host streams the arrays as the host would stream uncached PCI memory: line-sized bursts,
for each line the source lines read and then the destination line written. Every kernel runs
``passes`` times; the time of a pass is the card cluster bench's own cycle stamps (the first
access's request to the last one's completion), so the figures are cycles of the RTL, not of the
machine running it. Bandwidth counts STREAM's bytes (2 arrays moved for Copy and Scale, 3 for Add
and Triad) per pass; the best pass is STREAM's figure, the first shows a cold network cache.
"""

from dataclasses import dataclass

from matplotlib.figure import Figure

from numavia.base import buildcache, trace
from numavia.base.coherence import LINE_BYTES
from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.gateware.card import CardConfig
from numavia.soc import card_bench, sim

#: STREAM's kernels: the arrays each reads, the one it writes (a = b + s*c and so on).
KERNELS = {"copy": (("a",), "c"), "scale": (("c",), "b"), "add": (("a", "b"), "c"), "triad": (("b", "c"), "a")}
ARRAYS = ("a", "b", "c")
#: Where the arrays live, and the mode each placement is measured in.
PLACEMENTS = {"private": ("ncc",), "home": ("ncc",), "remote": ("ncc", "numa")}
NODES = 2
LINE_WORDS = LINE_BYTES // 4
NODE_RUN_MAX_CYCLES = 200_000_000  # a run on complete nodes: a hang is reported, not waited out


@dataclass(frozen=True)
class Case:
    placement: str
    mode: str

    @property
    def label(self):
        return self.placement if self.placement != "remote" else f"remote ({self.mode.upper()})"


def cases():
    return [Case(p, m) for p, modes in PLACEMENTS.items() for m in modes]


def array_bases(placement, array_bytes, amap):
    """Host-port address of each array: packed, line aligned, in the placement's memory."""
    if placement == "private":
        start, room = amap.private_base, amap.private_bytes
    else:
        home = 0 if placement == "home" else 1
        start, room = home * amap.slice_bytes, amap.slice_bytes
    if len(ARRAYS) * array_bytes > room:
        raise NumaviaError(f"three {array_bytes}-byte arrays do not fit in the {room}-byte {placement} memory")
    return {name: start + i * array_bytes for i, name in enumerate(ARRAYS)}


def stream_trace(bases, array_bytes, passes):
    """Node 0's records and the (kernel, pass, first record, record count) of every segment."""
    records, segments = [], []
    for number in range(passes):
        for kernel, (sources, dest) in KERNELS.items():
            first = len(records)
            for offset in range(0, array_bytes, LINE_BYTES):
                for s in sources:
                    records.append(trace.read_access(bases[s] + offset, words=LINE_WORDS))
                records.append(trace.write_access(bases[dest] + offset, number + 1, words=LINE_WORDS))
            segments.append((kernel, number, first, len(records) - first))
    records.append(trace.barrier(0))
    return records, segments


def measure(array_bytes=4096, passes=4, *, config=None, log=print, run_root=None, spread=None):
    """Run every case; returns the figures (per case and kernel: cycles of each pass, bandwidth)."""
    if array_bytes <= 0 or array_bytes % LINE_BYTES:
        raise NumaviaError(f"--array-bytes must be a positive multiple of {LINE_BYTES}")
    if passes < 1:
        raise NumaviaError("--passes must be at least 1")
    config = config or CardConfig(max_nodes=16, via=False)
    amap = config.address_map()
    binary = card_bench.build_bench(config, log=log)
    root = run_root or buildcache.build_root() / "run" / "stream"
    rows = []
    every = cases()
    for done, case in enumerate(every, 1):
        run_dir = root / f"{case.placement}-{case.mode}-{array_bytes}"
        records, segments = stream_trace(array_bases(case.placement, array_bytes, amap), array_bytes, passes)
        results.progress(log, done, len(every), f"{case.label}: {len(records) - 1:,} line accesses")
        timed = time_segments(
            binary, run_dir, records, segments, numa=case.mode == "numa", what=f"STREAM {case.label}", spread=spread
        )
        for (kernel, number, _, _), cycles in zip(segments, timed):
            rows.append(
                {
                    "placement": case.placement,
                    "mode": case.mode,
                    "label": case.label,
                    "kernel": kernel,
                    "pass": number,
                    "cycles": cycles,
                }
            )
    return figures(rows, array_bytes, passes, config)


def time_segments(binary, run_dir, records, segments, *, numa, what, spread=None):
    """Replay ``records`` on node 0 of a two-card ring (node 1 only meets the closing barrier);
    returns the cycles of each ``(name, ..., first record, record count)`` segment: the first
    access's request to the last one's completion, from the bench's cycle stamps."""
    traces = run_dir / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    trace.write_trace(traces / "node0.trace", 0, records)
    trace.write_trace(traces / "node1.trace", 1, [trace.barrier(0)])
    bench = card_bench.run_bench(binary, run_dir, nodes=NODES, trace_dir=traces, numa=numa, spread=spread)
    accesses = sorted((a for a in bench.accesses if a.node == 0), key=lambda a: a.issued)
    expected = sum(r.kind != trace.Kind.BARRIER for r in records)
    if bench.returncode or len(accesses) != expected:
        tail = bench.stderr.strip().splitlines()[-1:] or ["no output"]
        raise NumaviaError(f"{what}: {len(accesses)} of {expected} accesses done: {tail[0]}")
    return [accesses[first + count - 1].completed - accesses[first].issued for *_, first, count in segments]


def time_segments_on_nodes(build, run_dir, records, segments, *, numa, what, spread=None):
    """:func:`time_segments` on two complete nodes (``numavia.soc.sim`` build: VexRiscv, firmware,
    card) instead of two cards alone: the trace starts once both firmwares are ready, and the
    times are the harness's host-port cycle stamps (its access log)."""
    traces = run_dir / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    trace.write_trace(traces / "node0.trace", 0, records)
    trace.write_trace(traces / "node1.trace", 1, [trace.barrier(0)])
    access_log = run_dir / "access.log"
    code, summary = sim.run(
        build,
        run_dir,
        spread,
        quiet=True,
        trace_dir=traces,
        access_log=access_log,
        numa=numa,
        max_cycles=NODE_RUN_MAX_CYCLES,
    )
    entries = access_log.read_text().split("\n") if access_log.exists() else []
    # node addr write value issued done error, one access per line
    accesses = sorted((tuple(int(x) for x in line.split()) for line in entries if line.strip()), key=lambda a: a[4])
    accesses = [a for a in accesses if a[0] == 0]
    expected = sum(r.kind != trace.Kind.BARRIER for r in records)
    if code or len(accesses) != expected:
        reason = summary["reason"] if summary else f"simulator exit status {code}"
        raise NumaviaError(f"{what}: {len(accesses)} of {expected} accesses done: {reason} (logs in {run_dir})")
    return [accesses[first + count - 1][5] - accesses[first][4] for *_, first, count in segments]


def figures(rows, array_bytes, passes, config):
    mhz = config.clk_freq_hz / 1e6
    table = []
    for case in cases():
        for kernel, (sources, _) in KERNELS.items():
            mine = [r for r in rows if (r["placement"], r["mode"], r["kernel"]) == (case.placement, case.mode, kernel)]
            moved = (len(sources) + 1) * array_bytes
            best = min(r["cycles"] for r in mine)
            table.append(
                {
                    "label": case.label,
                    "placement": case.placement,
                    "mode": case.mode,
                    "kernel": kernel,
                    "bytes_per_pass": moved,
                    "first_cycles": mine[0]["cycles"],
                    "best_cycles": best,
                    "first_MBps": moved * mhz / mine[0]["cycles"],
                    "best_MBps": moved * mhz / best,
                }
            )
    return {
        "array_bytes": array_bytes,
        "passes": passes,
        "clock_mhz": mhz,
        "cache_bytes": config.cache_sets * config.cache_ways * LINE_BYTES,
        "rows": table,
        "passes_raw": rows,
    }


def report(figs, out):
    rows = [
        [
            r["label"],
            r["kernel"],
            f"{r['bytes_per_pass']:,}",
            f"{r['best_cycles']:,}",
            f"{r['best_MBps']:.1f}",
            f"{r['first_MBps']:.1f}",
        ]
        for r in figs["rows"]
    ]
    text = results.write(
        out,
        "stream",
        title="STREAM-style bandwidth at the host port",
        rows=rows,
        figures=figs,
        headers=["memory", "kernel", "bytes/pass", "best pass (cycles)", "best MB/s", "first pass MB/s"],
        config={
            "array_bytes": figs["array_bytes"],
            "passes": figs["passes"],
            "clock_mhz": figs["clock_mhz"],
            "network_cache_bytes": figs["cache_bytes"],
        },
        notes=[
            f"Three arrays of {figs['array_bytes']:,} bytes; {figs['passes']} passes of each kernel; the "
            f"network cache holds {figs['cache_bytes']:,} bytes.",
            "Times from the card cluster bench's cycle stamps (request of the first access to completion "
            f"of the last), at {figs['clock_mhz']:.0f} MHz; one host request at a time, line bursts.",
            "private: node 0's private memory; home: node 0's own shared slice; remote: node 1's slice "
            "over the ring, NCC-NUMA (network cache) and NUMA (none).",
        ],
        plot=lambda path: plot(figs, path),
    )
    return text


def plot(figs, path):
    labels = list(dict.fromkeys(r["label"] for r in figs["rows"]))
    kernels = list(KERNELS)
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    width = 0.8 / len(kernels)
    for k, kernel in enumerate(kernels):
        values = [
            next(r["best_MBps"] for r in figs["rows"] if r["label"] == label and r["kernel"] == kernel)
            for label in labels
        ]
        ax.bar([i + (k - (len(kernels) - 1) / 2) * width for i in range(len(labels))], values, width, label=kernel)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("MB/s (best pass)")
    ax.set_yscale("log")
    ax.set_title(f"STREAM at the host port, arrays of {figs['array_bytes']:,} bytes")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
