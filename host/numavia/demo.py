"""``numavia demo``: the main job. Builds a ring of complete nodes (VexRiscv, firmware, card), one
cycle-accurate Verilator model per node spread over the machine's cores, boots it, and measures
what the card does:

1. boot: every node reports its node id and its microcode loaded and verified;
2. latency: the Table 1 access set, each access alone on the ring, NCC-NUMA and NUMA mode;
3. rdma: a NetPIPE-style ping-pong sweep of the VIA engine between nodes 0 and 1 over the
   simulated GbE switch (send/receive, RDMA write, RDMA read), run by the firmware's benchmark
   agents and set up from the host through VIPL;
4. kernels: small shared-memory programs (:mod:`numavia.kernels`) on one node and on every node,
   NCC-NUMA and NUMA, with the time split into compute, memory and barrier wait.

Latency and kernel measurements are traces replayed at the nodes' host ports (what the host would do over PCIe)
while the firmware runs; times come from the simulation's cycle counters. The report is Markdown,
CSV and JSON with PNG plots in one folder; ``demo.md`` indexes it.
"""

import contextlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from matplotlib.figure import Figure

from numavia import kernels
from numavia.base import buildcache, trace
from numavia.base.coherence import CACHE_AT
from numavia.base.errors import NumaviaError
from numavia.bench import latency, results
from numavia.bench import via as bench_via
from numavia.cluster_session import ClusterSession
from numavia.soc import sim

DEFAULT_NODES = 4
MAX_CYCLES = 200_000_000  # per run; a hang is reported, not waited out
PROGRESS_CYCLES = 5_000_000
MODES = latency.MODES
ACCESS_LOG_LATENCY = "the host-port driver's cycle stamps (request presented to last response beat)"
#: The RDMA step: ping-pongs from 4 bytes to 64 KiB, at the standard MTU, as the paper measured,
#: with fewer round trips than `numavia bench via` takes by default.
RDMA_SWEEP = bench_via.SweepOptions(ops=("send", "write", "read"), mtu=(1500,), iterations=10)
RDMA_SIZES = [4**k for k in range(1, 9)]


class DemoError(NumaviaError):
    """A demo step failed; the message names the step and, where there is one, the node."""


@dataclass
class Demo:
    nodes: int = DEFAULT_NODES
    out: Path = Path("results/demo")
    log: callable = print
    firmware: str = "bare-metal"  # what every node runs (numavia.soc.firmware.parse_choice)
    cache_at: str = "second"  # the read miss at which the kernels' NCC-NUMA runs cache a remote line (CACHE_AT)
    run_root: Path = None
    spread: object = None  # ring_launch.Spread: processes or MPI ranks
    figures: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)  # (label, run.json) of every simulation run
    steps: list = field(default_factory=list)  # (name, wall seconds)

    def __post_init__(self):
        if self.cache_at not in CACHE_AT:
            raise DemoError(f"unknown cache policy {self.cache_at!r} (known: {', '.join(CACHE_AT)})")
        self.sim = sim
        self.config = sim.SimConfig(nodes=self.nodes)
        self.card = self.config.card_config()
        self.run_root = Path(self.run_root or buildcache.build_root() / "run" / f"demo-{self.nodes}")
        self.out = Path(self.out)

    # --- running ---------------------------------------------------------------------------

    def run(self):
        plan = [
            ("build", self.build),
            ("boot", self.boot),
            ("latency", self.latency),
            ("rdma", self.rdma),
            ("kernels", self.kernels),
            ("report", self.report),
        ]
        for number, (name, action) in enumerate(plan, 1):
            with self.step(f"{number}/{len(plan)} {name}", name):
                action()
        return self.figures

    @contextlib.contextmanager
    def step(self, title, name):
        self.log(f"[{title}]")
        start = time.monotonic()
        try:
            yield
        except DemoError:
            raise
        except NumaviaError as e:
            raise DemoError(f"step {name}: {e}") from e
        self.steps.append((name, time.monotonic() - start))

    def build(self):
        self.built = self.sim.build_all(self.config, log=self.log, spread=self.spread, firmware=self.firmware)

    def simulate(self, label, *, trace_dir=None, numa=False, cache_first_miss=False):
        """One run of the ring; returns ``(run.json, access log entries)``. Raises DemoError
        naming the node that did not boot, did not finish its trace or saw an error."""
        run_dir = self.run_root / label
        access_log = run_dir / "access.log" if trace_dir else None
        start = time.monotonic()
        code, summary = self.sim.run(
            self.built,
            run_dir,
            self.spread,
            quiet=True,
            trace_dir=trace_dir,
            numa=numa,
            cache_first_miss=cache_first_miss,
            access_log=access_log,
            max_cycles=MAX_CYCLES,
            progress=PROGRESS_CYCLES,
        )
        where = f"{label} (logs in {run_dir})"
        if summary is None:
            raise DemoError(f"{where}: the simulator exited with status {code} and wrote no run.json")
        for node, cycle in enumerate(summary["marker_cycles"]):
            if cycle is None:
                raise DemoError(f"{where}: node {node} never became ready: {self._last_line(run_dir, node)}")
        for t in summary.get("trace", []):
            if t["errors"]:
                raise DemoError(f"{where}: node {t['node']}: {t['errors']} host-port access(es) answered with an error")
            if not t["finished"]:
                raise DemoError(
                    f"{where}: node {t['node']} did not finish its trace "
                    f"({t['accesses']} accesses done; {summary['reason']})"
                )
        if code != 0:
            raise DemoError(f"{where}: {self.sim.EXIT_REASONS.get(code, f'simulator exit status {code}')}")
        self.runs.append((label, summary))
        self.log(
            f"  {label}: {summary['cycles']:,} cycles in {time.monotonic() - start:.1f} s "
            f"({summary['cycles_per_second']:,.0f} cycles/s)"
        )
        entries = []
        if access_log:
            for line in access_log.read_text().splitlines():
                node, addr, write, value, issued, done, error = (int(x) for x in line.split())
                entries.append(
                    {
                        "node": node,
                        "addr": addr,
                        "write": bool(write),
                        "value": value,
                        "cycles": done - issued,
                        "done": done,
                    }
                )
        return summary, entries

    @staticmethod
    def _last_line(run_dir, node):
        log = run_dir / f"node{node}.log"
        lines = log.read_text().strip().splitlines() if log.exists() else []
        return f"its console ends with {lines[-1]!r}" if lines else "its console is empty"

    # --- the steps -------------------------------------------------------------------------

    def boot(self):
        summary, _ = self.simulate("boot")
        rows = []
        for node, cycle in enumerate(summary["marker_cycles"]):
            console = (self.run_root / "boot" / f"node{node}.log").read_text()
            if f"node id set to {node} (read back {node})" not in console:
                raise DemoError(f"step boot: node {node} did not report node id {node}")
            if "microcode loaded and verified" not in console:
                raise DemoError(f"step boot: node {node} did not report its microcode loaded")
            rows.append({"node": node, "ready_cycle": cycle, "ready_us": cycle / self.card.clk_freq_hz * 1e6})
            self.log(f"  node {node}: id {node}, microcode loaded, ready at cycle {cycle:,}")
        self.figures["boot"] = rows

    def latency(self):
        measured = {}
        for mode, script in latency.scripts(self.nodes, self.card).items():
            folder = self.run_root / f"latency-{mode}" / "traces"
            folder.mkdir(parents=True, exist_ok=True)
            for node, records in script.traces(self.nodes).items():
                trace.write_trace(folder / f"node{node}.trace", node, records)
            _, entries = self.simulate(f"latency-{mode}", trace_dir=folder, numa=MODES[mode])
            if len(entries) != len(script.steps):
                raise DemoError(f"step latency: {len(entries)} of {len(script.steps)} accesses logged ({mode})")
            for name, index in script.measured:
                measured.setdefault(name, {})[mode] = entries[index]["cycles"]
        self.figures["latency"] = latency.figures(self.nodes, self.card, measured, measured_by=ACCESS_LOG_LATENCY)

    def rdma(self):
        run_dir = self.run_root / "rdma"
        start = time.monotonic()
        session = ClusterSession(self.built, run_dir, spread=self.spread, eth_delay=RDMA_SWEEP.eth_delay)
        with session:
            rows, counters = bench_via.sweep(session, RDMA_SWEEP, RDMA_SIZES, lambda m: self.log(f"  {m}"))
        self.runs.append(("rdma", session.run_summary()))
        self.figures["rdma"] = {"rows": rows, "counters": counters, "eth_delay_cycles": RDMA_SWEEP.eth_delay}
        self.rdma_run = {
            "build": self.built,
            "config": self.config,
            "run_dir": run_dir,
            "wall_seconds": time.monotonic() - start,
        }

    def kernels(self):
        rows = []
        for kernel in (k() for k in kernels.KERNELS.values()):
            self.log(f"  {kernel.title}: {kernel.describe()}")
            single = None
            for workers, modes in ((1, ("ncc",)), (self.nodes, tuple(MODES))):
                folder = self.run_root / f"{kernel.name}-{workers}" / "traces"
                kernels.write_traces(kernel, self.card.address_map(), workers, self.nodes, folder)
                for mode in modes:
                    summary, _ = self.simulate(
                        f"{kernel.name}-{workers}-{mode}",
                        trace_dir=folder,
                        numa=MODES[mode],
                        cache_first_miss=not MODES[mode] and CACHE_AT[self.cache_at],
                    )
                    row = kernel_row(kernel, workers, mode, summary["trace"][:workers])
                    single = single or row["cycles"]
                    row["speedup"] = single / row["cycles"]
                    rows.append(row)
        self.figures["kernels"] = rows

    def report(self):
        self.out.mkdir(parents=True, exist_ok=True)
        latency.report(self.figures["latency"], self.out)
        rdma = self.figures["rdma"]
        bench_via.write_results(
            rdma["rows"],
            {**self.rdma_run, "counters": rdma["counters"]},
            replace(RDMA_SWEEP, out=self.out),
        )
        write_kernels(self.figures["kernels"], self.card, self.out)
        self.figures["simulation"] = {
            "nodes": self.nodes,
            "runs": [
                {
                    "label": label,
                    "cycles": s["cycles"],
                    "wall_seconds": s["wall_seconds"],
                    "cycles_per_second": s["cycles_per_second"],
                }
                for label, s in self.runs
            ],
            "steps": [{"step": name, "wall_seconds": round(seconds, 1)} for name, seconds in self.steps],
        }
        text = index(self)
        (self.out / "demo.md").write_text(text)
        (self.out / "demo.json").write_text(
            json.dumps(
                {
                    "command": results.command_line(),
                    "nodes": self.nodes,
                    "card": self.card.as_dict(),
                    "figures": self.figures,
                },
                indent=2,
                default=str,
            )
            + "\n"
        )
        self.log(f"  report in {self.out}/demo.md")
        print(text)


def kernel_row(kernel, workers, mode, stats):
    """Time (the last worker's finish) and the workers' mean compute/memory/barrier cycles."""

    def mean(key):
        return sum(t[key] for t in stats) / len(stats)

    return {
        "kernel": kernel.name,
        "title": kernel.title,
        "workers": workers,
        "mode": mode,
        "cycles": max(t["finished"] for t in stats),
        "accesses": sum(t["accesses"] for t in stats),
        "compute": mean("compute"),
        "memory": mean("memory"),
        "barrier": mean("barrier"),
    }


def write_kernels(rows, card, out):
    us = 1e6 / card.clk_freq_hz
    table = [
        [
            r["title"],
            r["workers"],
            r["mode"].upper() if r["workers"] > 1 else "(local)",
            f"{r['cycles']:,}",
            f"{r['cycles'] * us:.1f}",
            f"{r['speedup']:.2f}",
            f"{r['compute']:,.0f}",
            f"{r['memory']:,.0f}",
            f"{r['barrier']:,.0f}",
        ]
        for r in rows
    ]
    results.write(
        out,
        "kernels",
        title="Shared-memory kernels on the ring",
        headers=["kernel", "nodes", "mode", "cycles", "us", "speedup", "compute/node", "memory/node", "barrier/node"],
        rows=table,
        figures=rows,
        config=card.as_dict(),
        notes=[
            "Time = cycles until the last node finished; compute, memory and barrier are "
            "each node's cycles, averaged over the nodes that work.",
            "Speedup is against the same kernel on one node with all its data local.",
            "The host does not cache shared memory: each access is a 64-byte burst at the host port.",
        ],
    )
    plot_kernels(rows, out)


def plot_kernels(rows, out):
    labels = [
        f"{r['title']}\n{r['workers']} node{'s' if r['workers'] > 1 else ''}"
        + (f", {r['mode'].upper()}" if r["workers"] > 1 else "")
        for r in rows
    ]
    fig = Figure(figsize=(max(6, 1.4 * len(rows)), 4.5))  # no pyplot: no global figure state
    ax = fig.subplots()
    bottom = [0] * len(rows)
    for key, colour in (("compute", "tab:green"), ("memory", "tab:blue"), ("barrier", "tab:orange")):
        values = [r[key] for r in rows]
        ax.bar(range(len(rows)), values, bottom=bottom, label=key, color=colour)
        bottom = [b + v for b, v in zip(bottom, values)]
    for i, r in enumerate(rows):
        ax.annotate(
            f"x{r['speedup']:.2f}", (i, r["cycles"]), ha="center", xytext=(0, 3), textcoords="offset points", fontsize=8
        )
        ax.plot([i - 0.4, i + 0.4], [r["cycles"]] * 2, "k-", linewidth=1)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("cycles per node (bar); time to finish (line)")
    ax.set_title("Shared-memory kernels: where each node's time goes (speedup vs one node)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(Path(out) / "kernels.png", dpi=110)


def index(demo):
    """demo.md: the headline figures and where the full tables are."""
    f = demo.figures
    lat = {r["name"]: r for r in f["latency"]["rows"]}
    mhz = f["latency"]["clock_mhz"]
    lines = [
        f"# Numavia demo: a {demo.nodes}-node ring, cycle-accurate",
        "",
        f"Every node is a VexRiscv SoC running the Numavia firmware ({demo.built.firmware.kind}, "
        f"`{demo.built.firmware.name}`) with the card at {mhz:.0f} MHz; "
        "the nodes form one Verilator model.",
        "",
        "## Boot",
        "",
        results.markdown_table(
            ["node", "ready at cycle", "us"],
            [[b["node"], f"{b['ready_cycle']:,}", f"{b['ready_us']:.0f}"] for b in f["boot"]],
        ),
        "## Access latency (Table 1)",
        "",
        results.markdown_table(
            ["access", "NCC-NUMA ns", "NUMA ns", "paper NCC-NUMA", "paper NUMA"],
            [
                [
                    r["name"],
                    _ns(r["ncc_ns"]),
                    _ns(r["numa_ns"]),
                    f"{r['paper_us'][0] * 1000:.0f}" if r["paper_us"] else "",
                    f"{r['paper_us'][1] * 1000:.0f}" if r["paper_us"] else "",
                ]
                for r in lat.values()
            ],
        ),
        "Full table: [latency.md](latency.md), plot: latency.png.",
        "",
        "## RDMA ping-pong (VIA over simulated GbE, nodes 0 and 1, MTU 1500)",
        "",
        rdma_table(f["rdma"]["rows"]),
        f"Paper (VIA RDMA): {bench_via.PAPER['latency_us']} us at 4 bytes, {bench_via.PAPER['bandwidth_MBps']} "
        "MB/s peak. Full sweep: [via_bench.md](via_bench.md), plot: via_bench.png.",
        "",
        "## Shared-memory kernels",
        "",
        results.markdown_table(
            ["kernel", "nodes", "mode", "us", "speedup"],
            [
                [
                    r["title"],
                    r["workers"],
                    r["mode"].upper() if r["workers"] > 1 else "(local)",
                    f"{r['cycles'] / mhz:.1f}",
                    f"{r['speedup']:.2f}",
                ]
                for r in f["kernels"]
            ],
        ),
        f"NCC-NUMA caches a remote line at its {demo.cache_at} read miss (`--cache-at`). Full table with "
        "the compute/memory/barrier split: [kernels.md](kernels.md), plot: kernels.png.",
        "",
        "## Simulation",
        "",
        results.markdown_table(
            ["run", "cycles", "wall s", "cycles/s"],
            [
                [r["label"], f"{r['cycles']:,}", f"{r['wall_seconds']:.1f}", f"{r['cycles_per_second']:,.0f}"]
                for r in f["simulation"]["runs"]
            ],
        ),
        "Steps: " + ", ".join(f"{s['step']} {s['wall_seconds']:.0f} s" for s in f["simulation"]["steps"]),
        "",
        f"Command: `{results.command_line()}`",
        "",
    ]
    return "\n".join(lines)


def rdma_table(rows):
    """Latency (us) per size and operation, then the bandwidth at the largest size."""
    ops = list(dict.fromkeys(r["op"] for r in rows))
    by = {(r["op"], r["size"]): r for r in rows}
    sizes = sorted({r["size"] for r in rows})
    table = [
        [f"{size:,}"] + [f"{by[op, size]['latency_us']:.2f}" if (op, size) in by else "" for op in ops]
        for size in sizes
    ]
    table.append(
        ["MB/s at the largest"]
        + [f"{by[op, sizes[-1]]['bandwidth_MBps']:.1f}" if (op, sizes[-1]) in by else "" for op in ops]
    )
    return results.markdown_table(["bytes"] + [f"{bench_via.OP_TITLES[op]} us" for op in ops], table)


def _ns(value):
    return "" if value is None else f"{value:.0f}"
