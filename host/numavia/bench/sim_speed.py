"""How fast the ring simulation runs: simulated cycles per second of full nodes (VexRiscv,
firmware, card) and of the card bench, against ring size and how the ring is spread (processes on
this machine, MPI ranks), and what the one model build costs.

Each run boots the ring from reset for a fixed number of cycles. The figure that matters is
node-cycles per second (every node advancing one cycle counts as one per node) per core used: it
stays flat when the simulation scales with the ring. Wall times come from the hub's own clock, from
the first edge to the stop, so start-up is not counted.
"""

import os

from matplotlib.figure import Figure

from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.soc import card_bench, ring_launch, sim

DEFAULT_NODES = (2, 4, 8, 16)
DEFAULT_PROCS = (1, 2)
DEFAULT_CYCLES = 200_000
CARD_ACCESSES = 500  # per card: a 64-card ring of them is a few minutes


def _spreads(nodes, procs, mpi_ranks):
    for p in procs:
        if p <= nodes:
            yield ring_launch.Spread(procs=p)
    for r in mpi_ranks:
        if r <= nodes:
            yield ring_launch.Spread(procs=r, mpi=True)


def _row(kind, nodes, spread, cycles, wall, cpu):
    cores = min(spread.procs, os.cpu_count() or 1)
    node_rate = cycles * nodes / max(wall, 1e-9)
    return {
        "model": kind,
        "nodes": nodes,
        "spread": str(spread),
        "mpi": spread.mpi,
        "procs": spread.procs,
        "cycles": cycles,
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "cycles_per_second": round(cycles / max(wall, 1e-9)),
        "node_cycles_per_second": round(node_rate),
        "node_cycles_per_second_per_core": round(node_rate / cores),
        "node_cycles_per_cpu_second": round(cycles * nodes / max(cpu, 1e-9)),
    }


def measure(
    nodes=DEFAULT_NODES,
    procs=DEFAULT_PROCS,
    mpi_ranks=(),
    *,
    cycles=DEFAULT_CYCLES,
    card_accesses=CARD_ACCESSES,
    log=print,
    run_root=None,
):
    """Time full-node rings (and card-bench rings of ``card_accesses`` per card, unless 0) of each
    size, spread each way."""
    run_root = run_root or sim.buildcache.build_root() / "run" / "sim-speed"
    config = sim.SimConfig(nodes=max(nodes))
    build = sim.build_all(config, log=log, spread=ring_launch.Spread(mpi=bool(mpi_ranks)))
    rows = []
    runs = [(n, spread) for n in nodes for spread in _spreads(n, procs, mpi_ranks)]
    total = len(runs) * (2 if card_accesses else 1)
    for done, (n, spread) in enumerate(runs, 1):
        results.progress(log, done, total, f"{n} nodes, {spread}: {cycles:,} cycles")
        node_build = sim.Build(sim.SimConfig(nodes=n), build.soc_dir, build.model, build.firmware, build.mpi_model)
        code, summary = sim.run(
            node_build,
            run_root / f"node-{n}-{spread.procs}{'-mpi' if spread.mpi else ''}",
            spread,
            quiet=True,
            max_cycles=cycles,
            stop_marker=None,
        )
        if summary is None or summary["cycles"] != cycles:
            raise NumaviaError(f"the {n}-node run stopped early: {summary and summary['reason']}")
        rows.append(_row("node", n, spread, cycles, summary["sim_wall_seconds"], summary["cpu_seconds"]))
    bench_config = card_bench.bench_card_config()
    binary = card_bench.build_bench(bench_config, log=log) if card_accesses else None
    for done, (n, spread) in enumerate(runs if card_accesses else (), len(runs) + 1):
        results.progress(log, done, total, f"{n} cards, {spread}: {card_accesses:,} accesses each")
        run = card_bench.run_bench(
            binary,
            run_root / f"card-{n}-{spread.procs}{'-mpi' if spread.mpi else ''}",
            nodes=n,
            ops=card_accesses,
            spread=spread,
            log_accesses=False,
        )
        if run.returncode or not run.state:
            raise NumaviaError(f"the {n}-card run failed: {run.stderr.strip().splitlines()[-1:]}")
        rows.append(
            _row("card", n, spread, run.state["cycles"], run.state["sim_wall_seconds"], run.state["cpu_seconds"])
        )
    return {
        "rows": rows,
        "cores": os.cpu_count(),
        "model_build_seconds": sim.build_seconds(build.model),
        "card_build_seconds": sim.build_seconds(binary) if binary else None,
        "model": build.model.parent.parent.name,
        "sys_clk_hz": config.sys_clk_freq,
        "card_accesses": card_accesses,
    }


def report(figures, out):
    headers = [
        "model",
        "nodes",
        "spread",
        "cycles",
        "wall s",
        "CPU s",
        "cycles/s",
        "node-cycles/s",
        "node-cycles/s/core",
        "node-cycles/CPU s",
    ]
    rows = [
        [
            r["model"],
            r["nodes"],
            r["spread"],
            f"{r['cycles']:,}",
            r["wall_seconds"],
            r["cpu_seconds"],
            f"{r['cycles_per_second']:,}",
            f"{r['node_cycles_per_second']:,}",
            f"{r['node_cycles_per_second_per_core']:,}",
            f"{r['node_cycles_per_cpu_second']:,}",
        ]
        for r in figures["rows"]
    ]
    build = figures["model_build_seconds"]
    notes = [
        f"{figures['cores']} cores; a run of P processes uses min(P, cores) of them.",
        "Node: VexRiscv SoC + card + firmware, booting from reset; card: the card alone under random "
        f"coherent traffic ({figures['card_accesses']:,} accesses per card).",
        "Wall time from the hub's first edge to its stop (start-up not counted); CPU time: every "
        "process's processor time over the same span, waiting included. Per core = node-cycles/s over "
        "min(processes, cores); per CPU second does not depend on what else the machine runs.",
        "Node model build: "
        + (
            f"{build:.0f} s, once for every ring size" if build is not None else "reused from the cache (built earlier)"
        ),
    ]
    return results.write(
        out,
        "sim_speed",
        title="Ring simulation speed",
        headers=headers,
        rows=rows,
        figures=figures,
        config={"model": figures["model"]},
        notes=notes,
        plot=lambda path: plot(figures, path),
    )


def plot(figures, path):
    fig = Figure(figsize=(11, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, kind in zip(axes, ("node", "card")):
        series = {}
        for r in figures["rows"]:
            if r["model"] == kind:
                series.setdefault(r["spread"], []).append((r["nodes"], r["node_cycles_per_cpu_second"] / 1e3))
        for label, points in sorted(series.items()):
            xs, ys = zip(*sorted(points))
            ax.plot(xs, ys, marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("nodes in the ring")
        ax.set_title("full nodes (SoC + card)" if kind == "node" else "card bench (card only)")
        ax.grid(alpha=0.3)
        if series:
            ax.legend()
    axes[0].set_ylabel("thousand node-cycles per CPU second")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
