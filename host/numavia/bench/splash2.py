"""SPLASH-2 on the card ring, the paper's Tables 3-6 and Fig. 6: each kernel's traces (generated
and cached by numavia.splash2.traces) replayed on rings of 1, 2, 4, 8 RTL cards (the card cluster
bench, Verilator) in NCC-NUMA and NUMA mode. Every time is the simulated cards' cycle count at
100 MHz; a kernel's time on P nodes is when its last process passes the closing barrier.

Table 4 (associativity) and Table 3 (line size) replay the same traces on cards built with other
network caches of the same capacity: the host's accesses stay what the kernel made them, the card
cuts them at its own line boundaries.
"""

import json
import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

from matplotlib.figure import Figure

from numavia.base import buildcache, codegen
from numavia.base.coherence import CACHE_AT
from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.gateware.card import CardConfig
from numavia.instrument import CostModel
from numavia.soc import card_bench
from numavia.splash2 import KERNELS, NAMES, traces

MODES = ("ncc", "numa")
MODE_NAMES = {"ncc": "NCC-NUMA", "numa": "NUMA"}
WAYS_NAMES = {1: "direct-mapped", 2: "2-way", 4: "4-way", 8: "8-way"}
ACCESS_NOTES = {"line": "line (bursts of up to 16 words)", "double": "double (2 words, as a CPU on uncached PCI)"}
#: Bump when what a replay records changes: cached replays of another version are not reused.
REPLAY_VERSION = 3  # 2: records the line size; 3: barriers through the hub (ring_run)
RING_DELAY = 4  # cycles per link hop, the bench default
TABLE4_NODES = (2, 4)  # the paper's Table 3 and 4 columns
TABLE3_WAYS = 1  # the paper's Table 3 is direct-mapped (its 64-byte row is Table 4's)

#: Network cache capacity in lines (256 KiB): a quarter of the 1 MiB slice, the paper's ratio
#: (12 MB of network cache for 48 MB of shared memory per card).
CACHE_LINES = 4096
SLICE_BYTES = 1 << 20

# The paper's figures (4 Pentium III 800 MHz nodes; Tables 3-6), by kernel: {nodes: value}.
PAPER_SPEEDUP = {  # Table 5
    "ncc": {
        "lu": {2: 1.37, 4: 2.42},
        "barnes": {2: 1.33, 4: 2.62},
        "ocean": {2: 1.35, 4: 2.58},
        "fft": {2: 1.57, 4: 2.63},
    },
    "numa": {
        "lu": {2: 0.83, 4: 1.06},
        "barnes": {2: 1.10, 4: 1.81},
        "ocean": {2: 1.30, 4: 2.35},
        "fft": {2: 1.53, 4: 2.51},
    },
}
PAPER_WAYS = {  # Table 4 (NCC-NUMA, 64-byte lines)
    1: {"lu": {2: 1.33, 4: 2.31}, "barnes": {2: 1.29, 4: 2.50}, "ocean": {2: 1.38, 4: 2.56}, "fft": {2: 1.57, 4: 2.62}},
    2: {"lu": {2: 1.36, 4: 2.38}, "barnes": {2: 1.31, 4: 2.59}, "ocean": {2: 1.39, 4: 2.57}, "fft": {2: 1.58, 4: 2.63}},
    4: {"lu": {2: 1.37, 4: 2.42}, "barnes": {2: 1.33, 4: 2.62}, "ocean": {2: 1.39, 4: 2.58}, "fft": {2: 1.58, 4: 2.63}},
}
PAPER_LINE_BYTES = {  # Table 3 (NCC-NUMA, direct-mapped)
    32: {
        "lu": {2: 1.15, 4: 1.98},
        "barnes": {2: 1.11, 4: 2.13},
        "ocean": {2: 1.29, 4: 2.39},
        "fft": {2: 1.39, 4: 2.33},
    },
    64: {
        "lu": {2: 1.33, 4: 2.31},
        "barnes": {2: 1.29, 4: 2.50},
        "ocean": {2: 1.38, 4: 2.56},
        "fft": {2: 1.57, 4: 2.62},
    },
}
PAPER_REMOTE_PER_LOCAL = {
    "lu": {2: 0.96, 4: 3.0},
    "barnes": {2: 0.96, 4: 2.84},
    "ocean": {2: 0.25, 4: 0.33},
    "fft": {2: 0.22, 4: 0.35},
}  # Table 6


def splash_card_config(ways=4, capacity_lines=CACHE_LINES):
    """The card the kernels run on: a 1 MiB slice (the largest problem, LU's or Barnes's, fits
    one node), ``capacity_lines`` network-cache lines in ``ways`` ways."""
    if capacity_lines % ways:
        raise ValueError(f"{ways} ways do not divide {capacity_lines} lines")
    return CardConfig(
        slice_bytes=SLICE_BYTES, max_nodes=16, private_bytes=4096, cache_sets=capacity_lines // ways, cache_ways=ways
    )


def with_ways(config, ways):
    """``config`` with ``ways`` ways at the same capacity."""
    lines = config.cache_sets * config.cache_ways
    if lines % ways:
        raise ValueError(f"{ways} ways do not divide {lines} lines")
    return replace(config, cache_ways=ways, cache_sets=lines // ways)


def with_line_bytes(config, line_bytes):
    """``config`` with lines of ``line_bytes`` at the same capacity and associativity (more or
    fewer sets)."""
    capacity = config.cache_sets * config.line_bytes
    if capacity % line_bytes or capacity // line_bytes < 1:
        raise ValueError(f"{line_bytes}-byte lines do not divide a {capacity}-byte way")
    return replace(config, line_bytes=line_bytes, cache_sets=capacity // line_bytes)


# --- replay ----------------------------------------------------------------------------------------


def replay_key(binary, trace_dir, numa, cache_first_miss=False):
    """The replay cache's key: everything a replay's result depends on."""
    params = {
        "binary": Path(binary).parent.name,  # the build cache's key of the bench (card, harness)
        "microcode": buildcache.digest(params=codegen.microcode_program().words),
        "traces": Path(trace_dir).name,
        "numa": numa,
        "ring_delay": RING_DELAY,
        "version": REPLAY_VERSION,
    }
    if cache_first_miss:  # only when set: the default policy's replays keep their keys
        params["cache_first_miss"] = True
    return buildcache.digest(params=params)


def replay(trace_dir, nodes, config, numa, *, cache_first_miss=False, cache=True, log=print, spread=None):
    """Replay the traces in ``trace_dir`` on ``nodes`` cards of ``config``; ``cache_first_miss``:
    the network caches take a remote line at its first read miss. With ``cache``, the result is
    kept under build/splash2-replay, keyed by the bench binary (card, harness, tools), the
    microcode the cards load at run time, the traces (kernel sources, parameters) and the mode."""
    binary = card_bench.build_bench(config, log=log)
    trace_dir = Path(trace_dir)
    summary = traces.summary(trace_dir)
    if summary["processes"] != nodes:
        raise NumaviaError(f"{trace_dir.name}: traces of {summary['processes']} processes on {nodes} nodes")
    key = replay_key(binary, trace_dir, numa, cache_first_miss)

    def produce(folder):
        records = sum(summary["records"])
        log(
            f"replaying {trace_dir.name} on {nodes} card(s), {MODE_NAMES['numa' if numa else 'ncc']} "
            f"({records:,} records)"
        )
        started = time.monotonic()
        bench = card_bench.run_bench(
            binary,
            folder,
            nodes=nodes,
            trace_dir=trace_dir,
            numa=numa,
            cache_first_miss=cache_first_miss,
            ring_delay=RING_DELAY,
            spread=spread,
            log_accesses=False,
        )
        wall = time.monotonic() - started
        if bench.returncode or not bench.state:
            tail = bench.stderr.strip().splitlines()[-1:] or ["no output"]
            raise NumaviaError(f"replay of {trace_dir.name} on {nodes} card(s) failed: {tail[0]}")
        per_node = bench.state["trace"]
        for t in per_node:
            expected = summary["records"][t["node"]] - summary["barriers"]
            if t["errors"] or t["accesses"] != expected:
                raise NumaviaError(
                    f"replay of {trace_dir.name}: node {t['node']} completed {t['accesses']} "
                    f"accesses ({t['errors']} errors), its trace has {expected}"
                )
        result = {
            "traces": trace_dir.name,
            "nodes": nodes,
            "numa": numa,
            "cache_first_miss": cache_first_miss,
            "ways": config.cache_ways,
            "sets": config.cache_sets,
            "line_bytes": config.line_bytes,
            "cycles": max(t["finished"] for t in per_node),
            "per_node": per_node,
            "counters": [n["counters"] for n in bench.state["nodes"]],
            "sim_cycles": bench.state["cycles"],
            "wall_seconds": round(wall, 2),
        }
        (folder / "replay.json").write_text(json.dumps(result, indent=1) + "\n")
        for bulky in ("state.json", "ucode.hex"):
            (folder / bulky).unlink(missing_ok=True)
        log(
            f"  {result['cycles']:,} cycles ({result['cycles'] / 1e5:.2f} ms at 100 MHz); simulated "
            f"{result['sim_cycles']:,} cycles in {wall:.1f} s ({result['sim_cycles'] / max(wall, 1e-9):,.0f} cycles/s)"
        )

    if not cache:
        folder = buildcache.build_root() / "run" / "splash2" / f"{trace_dir.name}-{'numa' if numa else 'ncc'}-{key}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        produce(folder)
    else:
        folder = buildcache.cached("splash2-replay", key, produce)
    return json.loads((folder / "replay.json").read_text())


# --- the benchmark -----------------------------------------------------------------------------------


def run(
    kernels=tuple(KERNELS),
    nodes=(1, 2, 4, 8),
    modes=MODES,
    *,
    size="paper",
    ways=(1, 2, 4),
    line_sizes=None,
    placement="paper",
    access="line",
    cache_at="second",
    config=None,
    cost=None,
    cache_replays=True,
    log=print,
    spread=None,
):
    """Generate (cached) and replay everything the tables need. Returns the figures.

    ``nodes`` always gets 1 (the speedups' base). ``cache_at``: the read miss (``first`` or
    ``second``, :data:`numavia.base.coherence.CACHE_AT`) at which NCC-NUMA caches a remote line. ``ways``: the associativities of Table 4, and
    ``line_sizes`` (default: ``config``'s alone) the line sizes of Table 3 (direct-mapped, as the
    paper's), each run in NCC-NUMA mode on 2 and 4 nodes (the paper's columns, where in ``nodes``)
    at the capacity of ``config``. Their speedups share ``config``'s 1-node time as base, so that
    a row's speedups compare its P-node times with the other rows' directly."""
    config = config or splash_card_config()
    line_sizes = sorted(set(line_sizes or [config.line_bytes]))
    cost = cost or CostModel()
    nodes = sorted(set(nodes) | {1})
    for k in kernels:
        if k not in KERNELS:
            raise NumaviaError(f"unknown kernel {k!r} (known: {', '.join(KERNELS)})")
    for m in modes:
        if m not in MODES:
            raise NumaviaError(f"unknown mode {m!r} (known: {', '.join(MODES)})")
    if cache_at not in CACHE_AT:
        raise NumaviaError(f"unknown cache policy {cache_at!r} (known: {', '.join(CACHE_AT)})")
    figures = {
        "size": size,
        "placement": placement,
        "access": access,
        "cache_at": cache_at,
        "cost": asdict(cost),
        "config": config.as_dict(),
        "kernels": list(kernels),
        "nodes": nodes,
        "modes": list(modes),
        "ways": sorted(ways),
        "line_sizes": line_sizes,
        "traces": {},
        "runs": [],
    }
    try:
        variants = [with_ways(config, w) for w in sorted(ways)]
        if len(line_sizes) > 1:
            variants += [with_line_bytes(with_ways(config, TABLE3_WAYS), b) for b in line_sizes]
    except ValueError as e:
        raise NumaviaError(str(e)) from None
    variants = [v for v in dict.fromkeys(variants) if v != config]  # each card once
    started = time.monotonic()
    folders = {}
    for kernel in kernels:  # every trace first: a bad size fails early
        figures["traces"][kernel] = {}
        for p in nodes:
            try:
                folders[kernel, p] = traces.traces(
                    kernel,
                    size,
                    p,
                    placement=placement,
                    slice_bytes=config.slice_bytes,
                    cost=cost,
                    access=access,
                    log=log,
                )
            except ValueError as e:
                raise NumaviaError(str(e)) from None
            s = traces.summary(folders[kernel, p])
            figures["traces"][kernel][p] = {
                k: s[k]
                for k in (
                    "describe",
                    "records",
                    "barriers",
                    "home_accesses",
                    "remote_accesses",
                    "remote_per_home",
                    "compute_cycles",
                    "shared_bytes_per_node",
                    "check_error",
                    "info",
                )
            }
    # Every replay, in order: the base card in each mode, then (NCC-NUMA, at the Table 4 sizes)
    # each variant of the network cache.
    replays = [(kernel, p, config, mode) for kernel in kernels for p in nodes for mode in modes]
    if "ncc" in modes:
        replays += [
            (kernel, p, variant, "ncc")
            for kernel in kernels
            for p in nodes
            if p in TABLE4_NODES
            for variant in variants
        ]
    replays.sort(key=lambda r: (kernels.index(r[0]), nodes.index(r[1])))  # a kernel and size at a time
    for done, (kernel, p, card, mode) in enumerate(replays, 1):
        results.progress(
            log,
            done,
            len(replays),
            f"{NAMES[kernel]} on {p} card(s), {MODE_NAMES[mode]}, {card.cache_ways}-way {card.line_bytes}-byte lines",
        )
        r = replay(
            folders[kernel, p],
            p,
            card,
            mode == "numa",
            cache_first_miss=mode == "ncc" and CACHE_AT[cache_at],
            cache=cache_replays,
            log=log,
            spread=spread,
        )
        figures["runs"].append({"kernel": kernel, "mode": mode, **r})
    figures["wall_seconds"] = round(time.monotonic() - started, 1)
    return figures


def find(figures, kernel, mode, nodes, ways=None, line_bytes=None):
    """The run of ``kernel`` on ``nodes`` cards; ``ways``/``line_bytes`` default to the base
    configuration's (1-node runs exist for it alone)."""
    ways = ways or figures["config"]["cache_ways"]
    line_bytes = line_bytes or figures["config"]["line_bytes"]
    for r in figures["runs"]:
        if (
            r["kernel"] == kernel
            and r["mode"] == mode
            and r["nodes"] == nodes
            and (nodes == 1 or (r["ways"], r["line_bytes"]) == (ways, line_bytes))
        ):
            return r
    return None


def speedup(figures, kernel, mode, nodes, ways=None, line_bytes=None):
    base, run_ = find(figures, kernel, mode, 1), find(figures, kernel, mode, nodes, ways, line_bytes)
    return base["cycles"] / run_["cycles"] if base and run_ else None


def counter_ratio(run_):
    """Remote per local shared accesses from the cards' counters of a NUMA run: there every
    remote access is a miss (uncached) and every home access a hit."""
    remote = sum(c["LAC_READ_MISSES"] + c["LAC_WRITE_MISSES"] for c in run_["counters"])
    home = sum(c["LAC_HOME_READ_HITS"] + c["LAC_HOME_WRITE_HITS"] for c in run_["counters"])
    return remote / home if home else None


def cache_hit_ratio(run_):
    """Share of an NCC-NUMA run's remote accesses served by the network cache."""
    hits = sum(c["LAC_CACHE_READ_HITS"] + c["LAC_CACHE_WRITE_HITS"] for c in run_["counters"])
    remote = hits + sum(c["LAC_READ_MISSES"] + c["LAC_WRITE_MISSES"] for c in run_["counters"])
    return hits / remote if remote else None


# --- report ------------------------------------------------------------------------------------------


def _f(value, pattern="{:.2f}"):
    return "" if value is None else pattern.format(value)


def report(figures, out):
    """Write Tables 5, 4, 3, 6 and the time split (Markdown, CSV, JSON, PNG) into ``out``;
    returns the Markdown of all of them."""
    out = Path(out)
    kernels, modes, nodes = figures["kernels"], figures["modes"], figures["nodes"]
    multi = [p for p in nodes if p > 1]
    config = figures["config"]
    common = [
        f"Problem size '{figures['size']}': "
        + "; ".join(f"{NAMES[k]} {figures['traces'][k][1]['describe']}" for k in kernels)
        + ".",
        f"Placement '{figures['placement']}'; host accesses per {ACCESS_NOTES[figures['access']]}; "
        f"compute {figures['cost']['ns_per_op']} ns per operation; "
        f"cards: {config['slice_bytes'] // 1024} KiB slice, network cache {config['cache_sets']} sets x "
        f"{config['cache_ways']} ways x {config['line_bytes']} B, caching a remote line at its {figures.get('cache_at', 'second')} read miss; ring delay {RING_DELAY} cycles per hop; 100 MHz.",
    ]
    texts = []

    # Table 5: speedups per kernel and mode.
    headers = ["kernel", "mode", "T(1 node) ms"] + [f"speedup {p}" for p in multi] + ["paper 2", "paper 4"]
    rows = []
    for k in kernels:
        for m in modes:
            base = find(figures, k, m, 1)
            paper = PAPER_SPEEDUP[m][k]
            rows.append(
                [NAMES[k], MODE_NAMES[m], _f(base["cycles"] / 1e5, "{:.3f}")]
                + [_f(speedup(figures, k, m, p)) for p in multi]
                + [paper[2], paper[4]]
            )
        if set(modes) == set(MODES):
            gains = []
            for p in multi:
                ncc, numa = find(figures, k, "ncc", p), find(figures, k, "numa", p)
                gains.append(_f(100 * (numa["cycles"] / ncc["cycles"] - 1), "{:+.0f} %"))
            paper_gain = [
                f"{100 * (PAPER_SPEEDUP['ncc'][k][p] / PAPER_SPEEDUP['numa'][k][p] - 1):+.0f} %" for p in (2, 4)
            ]
            rows.append([NAMES[k], "NCC-NUMA over NUMA", ""] + gains + paper_gain)
    texts.append(
        results.write(
            out,
            "splash2_table5",
            title="SPLASH-2 speedups, NCC-NUMA vs NUMA (Table 5)",
            headers=headers,
            rows=rows,
            figures=_runs_json(figures),
            config=config,
            notes=common
            + [
                "Speedup = T(1 node) / T(P nodes), each mode against its own 1-node time; "
                "T = simulated card cycles until the last process passes the closing barrier.",
                "'NCC-NUMA over NUMA' = T(NUMA) / T(NCC-NUMA) - 1 on the same nodes.",
                "The paper's NUMA system (Dolphin PCI-SCI) kept local shared data in host "
                "DRAM (10 ns, cached by the CPU); Numavia's NUMA mode is the same card with "
                "its network cache off, so local shared accesses cost the same in both modes.",
                *_cut_notes(figures),
            ],
        )
    )

    # Table 4: associativity at equal capacity.
    table4 = [p for p in multi if p in TABLE4_NODES]
    if "ncc" in modes and len(figures["ways"]) > 1 and table4:
        headers = (
            ["network cache"]
            + [f"{NAMES[k]} {p}" for k in kernels for p in table4]
            + [f"paper {NAMES[k]} {p}" for k in kernels for p in (2, 4)]
        )
        rows = []
        lines = config["cache_sets"] * config["cache_ways"]
        for w in figures["ways"]:
            rows.append(
                [f"{WAYS_NAMES.get(w, f'{w}-way')} ({lines // w} sets)"]
                + [_f(speedup(figures, k, "ncc", p, w)) for k in kernels for p in table4]
                + [PAPER_WAYS.get(w, {}).get(k, {}).get(p, "") for k in kernels for p in (2, 4)]
            )
        texts.append(
            results.write(
                out,
                "splash2_table4",
                title="NCC-NUMA speedup by network cache associativity (Table 4)",
                headers=headers,
                rows=rows,
                figures=_runs_json(figures),
                config=config,
                notes=common
                + [
                    f"Equal capacity: {lines} lines of {config['line_bytes']} B "
                    f"({lines * config['line_bytes'] // 1024} KiB) per card.",
                    "Speedups against the 1-node time (one node never uses its network cache).",
                ],
            )
        )

    # Table 3: line size at equal capacity.
    sizes = figures["line_sizes"]
    if "ncc" in modes and len(sizes) > 1 and table4:
        headers = (
            ["line size"]
            + [f"{NAMES[k]} {p}" for k in kernels for p in table4]
            + [f"paper {NAMES[k]} {p}" for k in kernels for p in (2, 4)]
        )
        capacity = config["cache_sets"] * config["cache_ways"] * config["line_bytes"]
        rows = [
            [f"{b} B ({capacity // b // TABLE3_WAYS} sets)"]
            + [_f(speedup(figures, k, "ncc", p, TABLE3_WAYS, b)) for k in kernels for p in table4]
            + [PAPER_LINE_BYTES.get(b, {}).get(k, {}).get(p, "") for k in kernels for p in (2, 4)]
            for b in sizes
        ]
        texts.append(
            results.write(
                out,
                "splash2_table3",
                title="NCC-NUMA speedup by network cache line size (Table 3)",
                headers=headers,
                rows=rows,
                figures=_runs_json(figures),
                config=config,
                notes=common
                + [
                    f"Equal capacity: {capacity // 1024} KiB per card, direct-mapped as in the "
                    "paper; each card built with the row's line size (tags, directory, "
                    "memories, SCI data blocks). The traces are the same: a host access of "
                    "up to 16 words is cut at the card's line boundaries.",
                    f"Speedups against the {config['line_bytes']}-byte card's 1-node time, so "
                    "that the rows compare the P-node times directly.",
                ],
            )
        )

    # Table 6: remote per local shared access.
    headers = (
        ["kernel"]
        + [f"{p} nodes: trace" for p in multi]
        + ([f"{p} nodes: NUMA counters" for p in multi] if "numa" in modes else [])
        + ([f"{p} nodes: NCC cache hits" for p in multi] if "ncc" in modes else [])
        + ["paper 2", "paper 4"]
    )
    rows = []
    for k in kernels:
        row = [NAMES[k]] + [_f(figures["traces"][k][p]["remote_per_home"]) for p in multi]
        if "numa" in modes:
            row += [_f(counter_ratio(find(figures, k, "numa", p))) for p in multi]
        if "ncc" in modes:
            row += [_f(cache_hit_ratio(find(figures, k, "ncc", p)), "{:.1%}") for p in multi]
        rows.append(row + [PAPER_REMOTE_PER_LOCAL[k][2], PAPER_REMOTE_PER_LOCAL[k][4]])
    texts.append(
        results.write(
            out,
            "splash2_table6",
            title="Remote per local shared memory access (Table 6)",
            headers=headers,
            rows=rows,
            figures={k: {str(p): v for p, v in figures["traces"][k].items()} for k in kernels},
            config=config,
            notes=common
            + [
                "Card accesses (bursts of up to 16 words in one line) to other nodes' slices "
                "per access to the node's own slice, summed over the nodes. 'trace': counted "
                "while recording; 'NUMA counters': the cards' LAC counters of the NUMA run "
                "(remote = misses, local = home hits; the two must agree).",
                "'NCC cache hits': share of the remote accesses the network cache served "
                "(LAC cache hits / (cache hits + misses)); misses include the few home lines "
                "recalled from a remote writer.",
                "Local-memory (host DRAM) accesses are not shared accesses and are not counted.",
            ],
        )
    )

    # Fig. 6: where the time goes.
    headers = [
        "kernel",
        "nodes",
        "mode",
        "T ms",
        "compute %",
        "memory %",
        "barrier %",
        "accesses/node",
        "mean access cycles",
    ]
    rows = []
    for k in kernels:
        for p in nodes:
            for m in modes:
                r = find(figures, k, m, p)
                split = time_split(r)
                accesses = sum(t["accesses"] for t in r["per_node"]) / p
                rows.append(
                    [
                        NAMES[k],
                        p,
                        MODE_NAMES[m],
                        _f(r["cycles"] / 1e5, "{:.3f}"),
                        _f(100 * split["compute"], "{:.0f}"),
                        _f(100 * split["memory"], "{:.0f}"),
                        _f(100 * split["barrier"], "{:.0f}"),
                        f"{accesses:,.0f}",
                        _f(sum(t["memory"] for t in r["per_node"]) / max(1, accesses * p), "{:.0f}"),
                    ]
                )
    texts.append(
        results.write(
            out,
            "splash2_time",
            title="Where the time goes: compute, memory, barriers (Fig. 6)",
            headers=headers,
            rows=rows,
            figures=_runs_json(figures),
            config=config,
            notes=common
            + [
                "Per node, averaged over the nodes: compute = the traces' gaps (computation "
                "and local-memory accesses), memory = card access latencies, barrier = "
                "waiting at barriers; shares of the sum.",
                "The paper's Fig. 6 reports remote shared memory at 58 % / 71 % of LU's and "
                "43 % / 54 % of Barnes's NUMA time on 2 / 4 nodes.",
                f"Whole benchmark: {figures['wall_seconds']} s of wall time.",
            ],
        )
    )
    plot_time_split(figures, out)
    plot_speedups(figures, out)
    return "\n".join(texts)


def time_split(run_):
    totals = {part: sum(t[part] for t in run_["per_node"]) for part in ("compute", "memory", "barrier")}
    whole = sum(totals.values()) or 1
    return {part: v / whole for part, v in totals.items()}


def _cut_notes(figures):
    notes = []
    for k in figures["kernels"]:
        info = figures["traces"][k][1]
        if k == "barnes":
            notes.append(f"Barnes: {info['describe']} (SPLASH-2's default input runs 4; cut for replay time).")
        if k == "ocean":
            notes.append(
                f"Ocean: {info['describe']}, {sum(info['info']['iterations'])} SOR iterations "
                "(time steps cut for replay time; the grid is the paper's)."
            )
    return notes


def _runs_json(figures):
    return {"runs": figures["runs"], "traces": figures["traces"]}


def plot_time_split(figures, out):
    """Stacked bars per kernel: compute, memory, barrier per node, normalised to T(1 node)."""
    kernels, modes, nodes = figures["kernels"], figures["modes"], figures["nodes"]
    fig = Figure(figsize=(3.2 * len(kernels) + 1, 4))
    axes = fig.subplots(1, len(kernels), squeeze=False)
    colours = {"compute": "#4c72b0", "memory": "#dd8452", "barrier": "#8c8c8c"}
    for ax, k in zip(axes[0], kernels):
        labels, bottoms = [], []
        x = 0
        for p in nodes:
            for m in modes if p > 1 else modes[:1]:
                r = find(figures, k, m, p)
                base = find(figures, k, m, 1)["cycles"]
                bottom = 0.0
                for part, colour in colours.items():
                    v = sum(t[part] for t in r["per_node"]) / p / base
                    ax.bar(x, v, bottom=bottom, color=colour, label=part if x == 0 else None)
                    bottom += v
                labels.append(f"{p}" if p == 1 else f"{p} {'NCC' if m == 'ncc' else 'NUMA'}")
                bottoms.append(bottom)
                x += 1
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=60, fontsize=8)
        ax.set_title(NAMES[k])
        ax.set_ylabel("time per node / T(1 node)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"SPLASH-2 ({figures['size']}): compute, memory and barrier time per node")
    fig.tight_layout()
    fig.savefig(out / "splash2_time.png", dpi=110)


def plot_speedups(figures, out):
    kernels, modes, nodes = figures["kernels"], figures["modes"], figures["nodes"]
    fig = Figure(figsize=(3.2 * len(kernels) + 1, 3.6))
    axes = fig.subplots(1, len(kernels), squeeze=False)
    for ax, k in zip(axes[0], kernels):
        for m, style in zip(modes, ("o-", "s--")):
            ax.plot(nodes, [speedup(figures, k, m, p) for p in nodes], style, label=f"Numavia {MODE_NAMES[m]}")
            paper = PAPER_SPEEDUP[m][k]
            ax.plot([1, 2, 4], [1, paper[2], paper[4]], style, alpha=0.35, label=f"paper {MODE_NAMES[m]}")
        ax.plot(nodes, nodes, ":", color="grey", linewidth=0.8)
        ax.set_title(NAMES[k])
        ax.set_xlabel("nodes")
        ax.set_xticks(nodes)
    axes[0][0].set_ylabel("speedup")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "splash2_speedup.png", dpi=110)
