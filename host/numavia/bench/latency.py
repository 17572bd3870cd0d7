"""Shared-memory access latencies, the paper's Table 1 and more: each access runs alone on a
ring of cards (the card cluster bench, cycle-accurate RTL), and its latency is the card's own
measurement (LAC.LAST_LATENCY: host-port request accepted to last response beat), in cycles
and in ns at the card clock. NCC-NUMA and NUMA mode side by side."""

from dataclasses import dataclass

from matplotlib.figure import Figure

from numavia.base import buildcache, trace
from numavia.base.coherence import LINE_BYTES
from numavia.bench import results
from numavia.gateware.card import CardConfig
from numavia.soc import card_bench

#: Table 1 of the NCC-NUMA paper (2 nodes, 32-bit/33 MHz PCI), in microseconds.
PAPER = {"local shared read": (0.9, 0.01), "remote read": (5.38, 4.02)}

REQUESTER = 0
MODES = {"ncc": False, "numa": True}
#: Host-port idle cycles after each step of a ring simulation's script, so that the card work a
#: step leaves behind (a fill, a purged copy's bookkeeping) ends before the next step starts, as
#: the card bench's own settling does.
SETTLE_CYCLES = 2000


@dataclass
class Measurement:
    name: str
    steps: list  # (node, op, (home, line), value); the last step is the one measured
    numa: bool = True  # also measured in NUMA mode
    paper: tuple = None  # (NCC-NUMA us, NUMA us) where the paper has the row


class Script:
    """Builds a bench script from measurements; every measurement uses lines of its own."""

    def __init__(self, config):
        self.amap = config.address_map()
        self.steps, self.measured = [], []
        self.next_line = {}

    def line(self, home):
        index = self.next_line.get(home, 1)
        self.next_line[home] = index + 1
        return home, index

    def address(self, home, index, word=0):
        if home == "private":
            return self.amap.private_base + index * LINE_BYTES + 4 * word
        return home * self.amap.slice_bytes + index * LINE_BYTES + 4 * word

    def add(self, measurement):
        lines = {}
        for node, op, (home, key), value in measurement.steps:
            if (home, key) not in lines:
                lines[(home, key)] = self.line(home) if home != "private" else ("private", 0)
            h, index = lines[(home, key)]
            self.steps.append((node, op, self.address(h, index), value))
        self.measured.append((measurement.name, len(self.steps) - 1))

    def traces(self, nodes):
        """The script as host-port traces for the ring simulation: every step alone, between two
        barriers, so the access log's i-th entry is step i; every node idles ``SETTLE_CYCLES``
        before each barrier, so a step meets no work of the one before."""
        records = {n: [] for n in range(nodes)}
        for number, (node, op, addr, value) in enumerate(self.steps):
            records[node].append(trace.write_access(addr, value) if op == "w" else trace.read_access(addr))
            for n in range(nodes):
                records[n].append(trace.barrier(number, gap=SETTLE_CYCLES))
        return records


def scripts(nodes, config):
    """``{mode: Script}``: every row in NCC-NUMA mode, the rows that apply in NUMA mode."""
    out = {}
    for mode, numa in MODES.items():
        script = Script(config)
        for m in measurements(nodes):
            if not numa or m.numa:
                script.add(m)
        out[mode] = script
    return out


def measurements(nodes):
    """The rows: on a ring of ``nodes``; node 0 is the requester, node 1 is one hop downstream and
    node ``nodes - 1`` is ``nodes - 1`` hops downstream (the ring is one-way: a request and its
    answer always travel the whole ring between them)."""
    far = nodes - 1
    rows = [
        Measurement("private memory read", [(0, "r", ("private", "p"), 0)]),
        Measurement("local shared read", [(0, "r", (0, "a"), 0)], paper=PAPER["local shared read"]),
        Measurement("local shared write", [(0, "w", (0, "a"), 1)]),
        Measurement(  # a line read once is not cached (the allocation filter): nothing to recall
            "local shared write after a remote read",
            [(1, "r", (0, "a"), 0), (0, "w", (0, "a"), 2)],
            numa=False,
        ),
        Measurement(  # what a home pays for a copy cached at its second read (FFT, Ocean)
            "local shared write, recalling a remote copy",
            [(1, "r", (0, "a"), 0), (1, "r", (0, "a"), 0), (0, "w", (0, "a"), 2)],
            numa=False,
        ),
        Measurement("remote read, miss, 1 hop", [(0, "r", (1, "a"), 0)], paper=PAPER["remote read"]),
        Measurement(  # the line's first miss is read without caching it; its second caches it
            "remote read, second miss (caches the line), 1 hop",
            [(0, "r", (1, "a"), 0), (0, "r", (1, "a"), 0)],
            numa=False,
        ),
        Measurement(  # the home wrote the line between the two misses: a copy would be recalled
            "remote read, second miss after its home wrote the line (not cached), 1 hop",
            [(0, "r", (1, "a"), 0), (1, "w", (1, "a"), 5), (0, "r", (1, "a"), 0)],
            numa=False,
        ),
        Measurement("remote read, hit in the network cache", [(0, "r", (1, "a"), 0)] * 3),
    ]
    if nodes > 2:
        rows.append(Measurement(f"remote read, miss, {far} hops", [(0, "r", (far, "a"), 0)]))
        rows.append(
            Measurement(
                "remote read, miss on a dirty line (3 parties)",
                [(2, "w", (1, "a"), 7), (0, "r", (1, "a"), 0)],
                numa=False,
            )
        )
    rows.append(Measurement("remote write, miss, no sharers", [(0, "w", (1, "a"), 3)]))
    rows.append(
        Measurement("remote write, hit (ONLY_DIRTY)", [(0, "w", (1, "a"), 3), (0, "w", (1, "a"), 4)], numa=False)
    )
    for k in range(1, nodes - 1):
        sharers = [n for n in range(2, nodes)][:k]
        if len(sharers) < k:
            break
        rows.append(
            Measurement(
                f"remote write, purging {k} sharer{'s' if k > 1 else ''}",
                [(s, "r", (1, "a"), 0) for s in sharers for _ in range(2)] + [(0, "w", (1, "a"), 9)],
                numa=False,
            )
        )
    return rows


def run(nodes=4, *, config=None, log=print, out=None, spread=None, microcode_only=False):
    """Measure every row on a ring of ``nodes`` cards, NCC-NUMA and NUMA (with the sequencers'
    hard-wired fast path off if ``microcode_only``). Returns the figures."""
    config = config or CardConfig(max_nodes=16, via=False)  # the coherence side alone
    binary = card_bench.build_bench(config, log=log)
    measured = {}
    by_mode = scripts(nodes, config)
    for done, (mode, script) in enumerate(by_mode.items(), 1):
        results.progress(
            log, done, len(by_mode), f"{nodes}-node ring, {mode.upper()} mode: {len(script.steps)} accesses"
        )
        run_dir = (out or buildcache.build_root() / "run" / "latency") / f"{nodes}-{mode}"
        bench = card_bench.run_bench(
            binary,
            run_dir,
            nodes=nodes,
            script=script.steps,
            numa=MODES[mode],
            microcode_only=microcode_only,
            spread=spread,
        )
        if bench.returncode or len(bench.latencies) != len(script.steps):
            raise card_bench.SimError(f"latency bench ({mode}) failed: {bench.stderr.strip().splitlines()[-1:]}")
        for name, index in script.measured:
            measured.setdefault(name, {})[mode] = bench.latencies[index]
    return dict(figures(nodes, config, measured), microcode_only=microcode_only)


CARD_COUNTER = "the card's LAC.LAST_LATENCY counter (host-port request accepted to last response beat)"


def figures(nodes, config, measured, measured_by=CARD_COUNTER):
    """The figures ``report`` takes, from ``{row name: {mode: cycles}}``."""
    ns_per_cycle = 1e9 / config.clk_freq_hz
    rows = []
    for m in measurements(nodes):
        r = measured[m.name]
        rows.append(
            {
                "name": m.name,
                "ncc_cycles": r.get("ncc"),
                "numa_cycles": r.get("numa"),
                "ncc_ns": r.get("ncc") and r["ncc"] * ns_per_cycle,
                "numa_ns": r.get("numa") and r["numa"] * ns_per_cycle,
                "paper_us": m.paper,
            }
        )
    return {
        "nodes": nodes,
        "clock_mhz": config.clk_freq_hz / 1e6,
        "rows": rows,
        "config": config.as_dict(),
        "measured_by": measured_by,
    }


def report(figures, out):
    """Write the table (Markdown, CSV, JSON) and a PNG plot into ``out``; returns the Markdown."""
    headers = ["access", "NCC-NUMA cycles", "NCC-NUMA ns", "NUMA cycles", "NUMA ns", "paper NCC-NUMA", "paper NUMA"]
    rows = []
    for r in figures["rows"]:
        paper = r["paper_us"]
        rows.append(
            [
                r["name"],
                _fmt(r["ncc_cycles"]),
                _fmt(r["ncc_ns"], "{:.0f}"),
                _fmt(r["numa_cycles"]),
                _fmt(r["numa_ns"], "{:.0f}"),
                f"{paper[0] * 1000:.0f} ns" if paper else "",
                f"{paper[1] * 1000:.0f} ns" if paper else "",
            ]
        )
    text = results.write(
        out,
        "latency",
        title=f"Shared-memory access latency, {figures['nodes']}-node ring",
        headers=headers,
        rows=rows,
        figures=figures,
        config=figures["config"],
        notes=[
            f"Card clock {figures['clock_mhz']:.0f} MHz; latency = {figures['measured_by']}.",
            "Sequencers: microcode only (RAC.CTRL.MICROCODE_ONLY)."
            if figures.get("microcode_only")
            else "Sequencers: plain misses and home reads/writes on the hard-wired fast path.",
            "The paper measured from the host CPU over 32-bit/33 MHz PCI; its NUMA system kept "
            "local shared memory in host DRAM (10 ns).",
            "The ring is one-way: a request and its answer always travel the whole ring between "
            "them, so 1-hop and far misses differ only by queueing.",
        ],
        plot=lambda path: plot(figures, path),
    )
    return text


def _fmt(value, pattern="{}"):
    return "" if value is None else pattern.format(value)


def plot(figures, path):
    rows = figures["rows"]
    names = [r["name"] for r in rows]
    y = range(len(rows))
    fig = Figure(figsize=(9, 0.45 * len(rows) + 1.5))
    ax = fig.subplots()
    ax.barh([i + 0.2 for i in y], [r["ncc_ns"] or 0 for r in rows], height=0.4, label="Numavia NCC-NUMA")
    ax.barh([i - 0.2 for i in y], [r["numa_ns"] or 0 for r in rows], height=0.4, label="Numavia NUMA")
    for i, r in enumerate(rows):
        if r["paper_us"]:
            ax.plot(r["paper_us"][0] * 1000, i + 0.2, "k|", markersize=14)
            ax.annotate(
                f"paper {r['paper_us'][0]} us",
                (r["paper_us"][0] * 1000, i + 0.2),
                fontsize=7,
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
            )
    ax.set_yticks(list(y), names, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ns, log scale)")
    ax.set_title(f"Access latency, {figures['nodes']}-node ring, card at {figures['clock_mhz']:.0f} MHz")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
