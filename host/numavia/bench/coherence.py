"""Coherence stress as a benchmark: a ring of RTL cards under random sharing (the card cluster
bench), judged by numavia.gateware.microcode.coherence_check, with the traffic's figures: access latencies, hit
rates, protocol events, and simulation speed."""

import time

from matplotlib.figure import Figure

from numavia.base import buildcache
from numavia.base.coherence import LINE_BYTES
from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.gateware.microcode.coherence_check import check_history, check_quiescent
from numavia.soc import card_bench


def run(
    nodes=8,
    ops=10_000,
    *,
    seed=1,
    flip_rate=0.0,
    ring_drop=0.0,
    ring_duplicate=0.0,
    numa=False,
    microcode_only=False,
    log=print,
    run_dir=None,
    line_bytes=LINE_BYTES,
    spread=None,
):
    """Run and judge the stress on cards of ``line_bytes`` lines; ring faults: ``flip_rate`` per
    symbol, ``ring_drop`` and ``ring_duplicate`` per packet (duplicating lengthens each hop to hold
    a packet's copy). ``microcode_only``: the sequencers' hard-wired fast path off."""
    config = card_bench.bench_card_config(line_bytes=line_bytes)
    binary = card_bench.build_bench(config, log=log)
    run_dir = run_dir or buildcache.build_root() / "run" / f"coherence-{nodes}"
    ring_delay = card_bench.duplicating_ring_delay() if ring_duplicate else 4
    faults = [
        name
        for name, rate in (
            ("ring bit errors", flip_rate),
            ("lost ring packets", ring_drop),
            ("duplicated ring packets", ring_duplicate),
        )
        if rate
    ]
    log(
        f"{nodes} cards of {line_bytes}-byte lines, {ops} random accesses each (seed {seed}{''.join(', ' + f for f in faults)}"
        f"{', NUMA mode' if numa else ''}{', microcode only' if microcode_only else ''})"
    )
    started = time.monotonic()
    bench = card_bench.run_bench(
        binary,
        run_dir,
        nodes=nodes,
        ops=ops,
        seed=seed,
        flip_rate=flip_rate,
        ring_drop=ring_drop,
        ring_duplicate=ring_duplicate,
        ring_delay=ring_delay,
        numa=numa,
        microcode_only=microcode_only,
        spread=spread,
    )
    wall = time.monotonic() - started
    if bench.returncode:
        raise NumaviaError(f"the coherence bench stopped: {bench.stderr.strip().splitlines()[-1:]}")
    for a in bench.accesses:
        a.addr = card_bench.global_address(a.addr, config)
    log(f"checking {len(bench.accesses)} accesses")
    violations = check_history(bench.accesses)
    last = {}
    for a in sorted(bench.accesses, key=lambda a: a.completed):
        if a.write:
            last[a.addr] = a.value
    violations += check_quiescent(card_bench.node_views(bench.state, config, 2), last, line_bytes=line_bytes)
    counters = [n["counters"] for n in bench.state["nodes"]]
    total = lambda name: sum(c[name] for c in counters)
    latencies = sorted(a.completed - a.issued for a in bench.accesses)
    cycles = bench.state["traffic_cycles"]
    hits = (
        total("LAC_HOME_READ_HITS")
        + total("LAC_HOME_WRITE_HITS")
        + total("LAC_CACHE_READ_HITS")
        + total("LAC_CACHE_WRITE_HITS")
    )
    return {
        "nodes": nodes,
        "ops_per_node": ops,
        "seed": seed,
        "flip_rate": flip_rate,
        "ring_drop": ring_drop,
        "ring_duplicate": ring_duplicate,
        "ring_delay": ring_delay,
        "numa": numa,
        "accesses": len(bench.accesses),
        "violations": violations[:20],
        "violation_count": len(violations),
        "traffic_cycles": cycles,
        "cycles_per_access_per_node": round(cycles / ops, 1),
        "latency_median": latencies[len(latencies) // 2],
        "latency_p99": latencies[int(len(latencies) * 0.99)],
        "latency_max": latencies[-1],
        "hit_ratio": round(hits / max(1, total("LAC_ACCESSES")), 3),
        "nacks": total("RAC_NACKS_SENT"),
        "rollouts": total("RAC_ROLLOUTS"),
        "purges": total("RAC_PURGES"),
        "protocol_errors": total("RAC_PROTOCOL_ERRORS"),
        "ring_crc_errors": total("RING_CRC_ERRORS"),
        "ring_timeouts": total("RING_TIMEOUTS"),
        "ring_duplicates_refused": total("RING_DUPLICATES"),
        "ring_flips": bench.state["ring_flips"],
        "ring_packets": bench.state["ring_packets"],
        "ring_dropped": bench.state["ring_dropped"],
        "ring_duplicated": bench.state["ring_duplicated"],
        "wall_seconds": round(wall, 1),
        "sim_cycles_per_second": round(bench.state["cycles"] / max(wall, 1e-9)),
        "latencies": latencies,
        "config": config.as_dict(),
    }


def report(figures, out):
    keys = [
        "nodes",
        "accesses",
        "violation_count",
        "protocol_errors",
        "traffic_cycles",
        "cycles_per_access_per_node",
        "latency_median",
        "latency_p99",
        "latency_max",
        "hit_ratio",
        "nacks",
        "rollouts",
        "purges",
        "ring_flips",
        "ring_dropped",
        "ring_duplicated",
        "ring_crc_errors",
        "ring_timeouts",
        "ring_duplicates_refused",
        "wall_seconds",
        "sim_cycles_per_second",
    ]
    rows = [[k.replace("_", " "), figures[k]] for k in keys]
    data = {k: v for k, v in figures.items() if k != "latencies"}
    return results.write(
        out,
        "coherence",
        title=f"Coherence stress, {figures['nodes']} cards",
        headers=["figure", "value"],
        rows=rows,
        figures=data,
        config=figures["config"],
        notes=[
            f"Random single-word loads and stores on 2 hot lines per home (4 sets x 2 "
            f"ways network cache of {figures['config']['line_bytes']}-byte lines), checked for per-location linearisability and "
            "sharing-list consistency at the end.",
            "Latencies in card cycles (100 MHz) from host-port request to answer.",
        ],
        plot=lambda path: plot(figures, path),
    )


def plot(figures, path):
    fig = Figure(figsize=(8, 4))
    ax = fig.subplots()
    ax.hist(figures["latencies"], bins=80, log=True)
    ax.set_xlabel("access latency (cycles at 100 MHz)")
    ax.set_ylabel("accesses (log)")
    ax.set_title(f"{figures['accesses']} accesses on {figures['nodes']} cards: {figures['violation_count']} violations")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
