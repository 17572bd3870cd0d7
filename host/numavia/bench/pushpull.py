"""``numavia bench pushpull``: push-pull messaging on two simulated nodes.

The push-pull library runs in each node's firmware (``firmware/core/src/pushpull.c``), driven by
the benchmark agent, so every figure comes from the card's cycle counter. For each scheme
(original, advanced), bytes_to_push threshold and message size, the two agents run a ping-pong
over a connected VI pair; the host sets everything up through VIPL and collects:

* ping-pong latency: half the round trip (the initiator's cycles / iterations / 2), after
  ``--warmup`` untimed round trips of the same point (its first round trip runs from a cold
  instruction cache);
* the last half round trip step by step, from both cards' latency stamps and the cycle each side's
  last message was in its user buffer (``bench.via.breakdown``; for messages nothing is pulled of);
* one-way latency: from the sender's call to the data being in the receiver's user buffer, of
  each side's last (warm) message, which alone is stamped: the receiver measures it from the send
  cycle its header carries (the nodes' card counters run from the same clock and reset, as on a
  cluster with a common clock; checked by the tests). Stamping costs each side a counter read, so
  the ping-pong's other messages carry none.

Plain send/receive and RDMA write ping-pongs (``numavia bench via``'s agent, on a second VI pair
of the same session) are measured at the same sizes for comparison.
"""

import threading
import time
from pathlib import Path

from matplotlib.figure import Figure

from numavia import vipl
from numavia.base import pushpull_format as ppf
from numavia.base.errors import NumaviaError
from numavia.bench import results
from numavia.bench import via as bench_via
from numavia.bench.results import rows_where
from numavia.cluster_session import ClusterSession
from numavia.soc import sim

SCHEMES = {"original": ppf.BENCH_OP.ORIGINAL, "advanced": ppf.BENCH_OP.ADVANCED}
BASELINES = ("send", "write")
BASELINE_TITLES = {"send": "send/receive", "write": "RDMA write"}
#: The push-pull paper's figure: the advanced scheme's latency is 7-18 % lower, bytes_to_push 512.
PAPER = {"gain_min_pct": 7, "gain_max_pct": 18, "threshold": 512}


class PushPullError(NumaviaError):
    pass


class PushPullPair:
    """Two nodes with a VI pair for push-pull: each has a registered region of the library's area
    (pushed-buffer slots, bounce slot, page lists) followed by a ``max_size`` user buffer, and a
    descriptor page. The first run opens the endpoints (posts their slots)."""

    def __init__(self, session, *, max_size, timeout=60.0, discriminator=0x9977, log=None):
        self.log = log or (lambda message: None)
        self.nics = [session.nic(0, timeout=timeout), session.nic(1, timeout=timeout)]
        self.freq = self.nics[0].card_reg("ctrl", "CLK_FREQ_HZ")
        self.ptags = [n.create_ptag() for n in self.nics]
        self.buffers, self.descs = [], []
        for nic, ptag in zip(self.nics, self.ptags):
            buf = nic.alloc(ppf.AREA_BYTES + max(max_size, 4), contiguous=True)
            nic.register(buf, ptag, rdma_read=True, rdma_write=True)
            self.buffers.append(buf)
            self.descs.append(nic.memory.pages(1)[0])
        self.vis = [nic.create_vi(ptag) for nic, ptag in zip(self.nics, self.ptags)]
        vipl.connect_pair(self.vis[0], self.vis[1], discriminator)
        self.max_size = max_size
        self.opened = False

    def user_buffer(self, node):
        """(buffer, offset) of a node's user buffer: the agent's messages live there."""
        return self.buffers[node], ppf.AREA_BYTES

    def _args(self, node, scheme, size, iterations):
        buf = self.buffers[node]
        return dict(
            role=1 if node == 0 else 0,
            op=SCHEMES[scheme],
            vi=self.vis[node].number,
            size=size,
            iterations=iterations,
            buf_va_lo=buf.va,
            buf_va_hi=buf.va >> 32,
            buf_handle=buf.handle,
            buf_pa=buf.pa(0),
            desc=self.descs[node],
            timeout_us=20_000_000,
        )

    def _wait_slots(self, errors):
        """The initiator may send only once the responder's slots are posted."""
        deadline = time.monotonic() + 60
        while not errors and self.nics[1].vi_reg(self.vis[1].number, "QUEUE_STATUS") >> 16 < ppf.SLOTS:
            if time.monotonic() > deadline:
                raise PushPullError("the responder's agent did not post its pushed-buffer slots")
            time.sleep(0.005)

    def run(self, scheme, size, threshold, iterations, *, verify=False, burst=False, late_us=0):
        """One run of both agents; returns the figures of both nodes (node 0 initiates)."""
        if scheme not in SCHEMES:
            raise PushPullError(f"unknown scheme {scheme!r} (known: {', '.join(SCHEMES)})")
        if not 0 <= threshold <= ppf.MAX_PUSH:
            raise PushPullError(f"bytes_to_push must be 0..{ppf.MAX_PUSH}, not {threshold}")
        if not 0 <= size <= self.max_size:
            raise PushPullError(f"message size must be 0..{self.max_size}, not {size}")
        if not 0 <= late_us < 1 << 16:
            raise PushPullError("late_us must be below 65536")
        flags = (
            (ppf.FLAGS.VERIFY if verify else 0)
            | (ppf.FLAGS.BURST if burst else 0)
            | (0 if self.opened else ppf.FLAGS.OPEN)
            | late_us << ppf.FLAGS_LATE_US_SHIFT
        )
        results, errors = {}, []

        def agent(node):
            try:
                results[node] = self.nics[node].command(
                    "BENCH",
                    extra_words={ppf.ARG_THRESHOLD: threshold, ppf.ARG_FLAGS: flags},
                    **self._args(node, scheme, size, iterations),
                )[1]
            except NumaviaError as e:
                errors.append(f"node {node}: {e}")

        responder = threading.Thread(target=agent, args=(1,))
        responder.start()
        if not self.opened:
            self._wait_slots(errors)
        agent(0)
        responder.join()
        if errors:
            raise PushPullError(f"{scheme} push-pull of {size} bytes (bytes_to_push {threshold}): {errors[0]}")
        self.opened = True
        return [self._figures(results[n], iterations) for n in (0, 1)]

    def _figures(self, r, iterations):
        w = r["words"]
        one_ways = w[ppf.RESULT_BASE + ppf.RESULTS.index("ONE_WAYS")]
        one_way = w[ppf.RESULT_BASE + 0] | w[ppf.RESULT_BASE + 1] << 32
        word = {name: w[ppf.RESULT_BASE + i] for i, name in enumerate(ppf.RESULTS)}
        return {
            "cycles": r["cycles_lo"] | r["cycles_hi"] << 32,
            "seen_cycles": r["seen_cycles"],
            "one_ways": one_ways,
            "one_way_cycles": one_way / one_ways if one_ways else 0.0,
            "bad_bytes": word["BAD_BYTES"],
            "translated_pages": word["TRANSLATED_PAGES"],
            "copied_bytes": word["COPIED_BYTES"],
            "pulls": word["PULLS"],
            "received": word["RECEIVED"],
            "iterations": iterations,
        }

    def point(self, scheme, size, threshold, iterations):
        """A ping-pong point: latencies in us, NetPIPE's bandwidth (size / ping-pong latency) and
        the per-message work."""
        f0, f1 = self.run(scheme, size, threshold, iterations)
        us = 1e6 / self.freq
        steps = dict.fromkeys(bench_via.STEP_FIELDS)
        if size <= min(threshold, ppf.MAX_PUSH):  # one push each way: the stamps are its frames'
            stamps = [nic.stamps() for nic in self.nics]
            steps = bench_via.breakdown("send", f0["seen_cycles"], f1["seen_cycles"], *stamps)
        one_ways = f0["one_ways"] + f1["one_ways"]
        one_way = (f0["one_way_cycles"] * f0["one_ways"] + f1["one_way_cycles"] * f1["one_ways"]) / one_ways
        messages = 2 * iterations
        return {
            "iterations": iterations,
            "cycles": f0["cycles"],
            "pingpong_us": f0["cycles"] / iterations / 2 * us,
            "one_way_us": one_way * us,
            "bandwidth_MBps": size / (f0["cycles"] / iterations / 2 * us) if f0["cycles"] else 0.0,
            "translated_pages_per_msg": (f0["translated_pages"] + f1["translated_pages"]) / messages,
            "copied_bytes_per_msg": (f0["copied_bytes"] + f1["copied_bytes"]) / messages,
            "pulls_per_msg": (f0["pulls"] + f1["pulls"]) / messages,
            **steps,
        }


def sizes(min_size, max_size, thresholds):
    """Powers of two from ``min_size`` to ``max_size`` and, around every threshold, threshold-1,
    threshold and threshold+1 (where the path changes)."""
    out, s = set(), 1
    while s <= max_size:
        if s >= min_size:
            out.add(s)
        s *= 2
    for t in thresholds:
        out.update(x for x in (t - 1, t, t + 1) if min_size <= x <= max_size)
    return sorted(out)


def iterations_for(size, *, most, target_bytes=128 * 1024):
    return max(2, min(most, -(-target_bytes // max(size, 1))))


def sweep(session, args, points, log):
    pair = PushPullPair(session, max_size=max(points), timeout=args.timeout, log=log)
    todo = [
        ("pushpull", scheme, threshold, size)
        for threshold in args.thresholds
        for scheme in args.schemes
        for size in points
    ]
    todo += [
        ("baseline", op, "", size) for op in args.baselines for size in points if not (size == 0 and op == "write")
    ]
    rows, via = [], None
    for done, (kind, scheme, threshold, size) in enumerate(todo, 1):
        n = iterations_for(size, most=args.iterations)
        # The warm-up: a run of its own, untimed, before the point's timed run (either kind).
        if kind == "pushpull":
            if args.warmup:
                pair.run(scheme, size, threshold, args.warmup)
            r = pair.point(scheme, size, threshold, n)
            rows.append(
                {"kind": kind, "scheme": scheme, "threshold": threshold, "size": size, "warmup": args.warmup, **r}
            )
            line = (
                f"{scheme:>8} bytes_to_push {threshold:>4} {size:>7} B: ping-pong {r['pingpong_us']:8.2f} us, "
                f"one-way {r['one_way_us']:8.2f} us ({n} x)"
            )
        else:
            via = via or bench_via.Bench(session, max_size=max(points), log=log, timeout=args.timeout)
            if args.warmup:
                via.point(scheme, size, args.warmup)
            r = via.point(scheme, size, n)
            rows.append(
                {
                    "kind": kind,
                    "scheme": scheme,
                    "threshold": "",
                    "size": size,
                    "warmup": args.warmup,
                    "iterations": n,
                    "cycles": r["cycles"],
                    "pingpong_us": r["latency_us"],
                    "bandwidth_MBps": r["bandwidth_MBps"],
                    "one_way_us": "",
                    "translated_pages_per_msg": "",
                    "copied_bytes_per_msg": "",
                    "pulls_per_msg": "",
                    **{f: r[f] for f in bench_via.STEP_FIELDS},
                }
            )
            line = f"{BASELINE_TITLES[scheme]:>12} {size:>7} B: ping-pong {r['latency_us']:8.2f} us ({n} x)"
        results.progress(log, done, len(todo), line)
    return rows, [n.counters() for n in pair.nics]


def run_sweep(args, log):
    config = sim.SimConfig(nodes=2)
    build = sim.build_all(config, log=log, spread=args.spread, firmware=args.firmware)
    run_dir = Path(args.out) / "run"
    started = time.monotonic()
    points = sizes(args.min_size, args.max_size, args.thresholds)
    with ClusterSession(build, run_dir, spread=args.spread, eth_delay=args.eth_delay) as session:
        for nic in (session.nic(0), session.nic(1)):
            nic.via_reg("MTU", args.mtu)
        rows, counters = sweep(session, args, points, log)
    return rows, {
        "build": build,
        "config": config,
        "counters": counters,
        "run_dir": run_dir,
        "wall_seconds": time.monotonic() - started,
    }


FIELDS = [
    "kind",
    "scheme",
    "threshold",
    "size",
    "warmup",
    "iterations",
    "cycles",
    "pingpong_us",
    "one_way_us",
    "bandwidth_MBps",
    "translated_pages_per_msg",
    "copied_bytes_per_msg",
    "pulls_per_msg",
    *bench_via.STEP_FIELDS,
]


def gains(rows):
    """Advanced vs original at every (threshold, size): latency reduction in percent."""
    out = []
    for o in rows_where(rows, kind="pushpull", scheme="original"):
        a = rows_where(rows, kind="pushpull", scheme="advanced", threshold=o["threshold"], size=o["size"])
        if a:
            out.append(
                {
                    "threshold": o["threshold"],
                    "size": o["size"],
                    "pingpong_gain_pct": 100 * (1 - a[0]["pingpong_us"] / o["pingpong_us"]),
                    "one_way_gain_pct": 100 * (1 - a[0]["one_way_us"] / o["one_way_us"]),
                }
            )
    return out


TITLE = "Push-pull messaging benchmark (two simulated nodes)"


def write_results(rows, info, args):
    out = Path(args.out)
    meta = {
        **bench_via.configuration(info, eth_delay=args.eth_delay, mtu=args.mtu),
        "slots": ppf.SLOTS,
        "max_push": ppf.MAX_PUSH,
        "register_bytes": ppf.REGISTER_BYTES,
    }
    results.write(
        out,
        "pushpull_bench",
        title=TITLE,
        headers=FIELDS,
        rows=[results.csv_row(r, FIELDS) for r in rows],
        figures={"rows": rows, "gains": gains(rows), "counters": info["counters"]},
        config=meta,
        text=summary(rows, meta, args, info),
        plot=lambda path: plot(rows, path, args),
    )
    return [out / f"pushpull_bench.{ext}" for ext in ("md", "csv", "json", "png")]


def breakdown_bars(rows):
    """(label, row) of the last half round trip step by step: for each scheme and bytes_to_push and
    each plain baseline, its smallest message with a breakdown."""
    bars, seen = [], set()
    for r in sorted(rows, key=lambda r: r["size"]):
        key = (r["kind"], r["scheme"], r["threshold"])
        if r["size"] > 0 and r.get(bench_via.STEP_FIELDS[0]) is not None and key not in seen:
            seen.add(key)
            name = f"{r['scheme']} @{r['threshold']}" if r["kind"] == "pushpull" else BASELINE_TITLES[r["scheme"]]
            bars.append((f"{name}, {r['size']} B", r))
    kinds = {"pushpull": 0, "baseline": 1}
    return sorted(bars, key=lambda b: (kinds[b[1]["kind"]], str(b[1]["threshold"]), b[1]["scheme"]))


def breakdown_table(rows):
    bars = breakdown_bars(rows)
    if not bars:
        return []
    lines = [
        f"## Latency breakdown (cycles of {1e3 / bench_via.CYCLES_PER_US:.0f} ns; the last half round trip of the point)",
        "",
        "From both cards' latency stamps (as `numavia bench via`). Push-pull: CPU post is the responder's "
        "library from the last message in its user buffer to its answer's doorbell (the rest of the "
        "receive, the send); completion seen is the initiator's poll and receive, to the answer in its user "
        "buffer. Plain VIA: from and to the poll that saw the receive's DONE (send/receive) or the "
        "marker (RDMA write).",
        "",
        f"| | {' | '.join(bench_via.STEPS)} | sum (us) | ping-pong (us) |",
        "|---|" + "---|" * (len(bench_via.STEPS) + 2),
    ]
    for label, r in bars:
        steps = [r[f] for f in bench_via.STEP_FIELDS]
        lines.append(
            f"| {label} | {' | '.join(str(x) for x in steps)} | {sum(steps) / bench_via.CYCLES_PER_US:.2f} | "
            f"{r['pingpong_us']:.2f} |"
        )
    return [*lines, ""]


def summary(rows, meta, args, info):
    lines = [
        f"Simulation: {meta['simulation']}, Ethernet PHY+cable delay {args.eth_delay} eth cycles "
        f"({args.eth_delay * 8} ns), MTU {args.mtu}, sys clock {meta['clock_hz'] / 1e6:.0f} MHz  ",
        f"Card: {', '.join(f'{k}={v}' for k, v in meta['card'].items())}  ",
        f"Library: {ppf.SLOTS} pushed-buffer slots of {ppf.SLOT_BYTES} B, register path up to {ppf.REGISTER_BYTES} B  ",
        f"Builds: SoC `{meta['builds']['soc']}`, firmware `{meta['builds']['firmware']}`, model "
        f"`{meta['builds']['model']}`; {meta['wall_seconds']:.0f} s wall",
        "",
        "Ping-pong: half the round trip of the initiator's ping-pong (card cycle counter, "
        f"cycles column = whole run), after {args.warmup} untimed warm-up round "
        f"trip{'' if args.warmup == 1 else 's'} at each point "
        "(`--warmup`; the push-pull and plain ones alike). One-way: sender's call to data in the receiver's user buffer, "
        "measured by the receiver from the send cycle in the header of each side's last message (the "
        "only ones stamped). Both in us at 100 MHz.",
        "",
    ]
    g = gains(rows)
    if g:
        lines += [
            "## Advanced vs original",
            "",
            f"Paper (bytes_to_push {PAPER['threshold']}): {PAPER['gain_min_pct']}-"
            f"{PAPER['gain_max_pct']} % lower latency.",
            "",
            "| bytes_to_push | sizes | ping-pong gain: mean (min..max) | one-way gain: mean (min..max) |",
            "|---|---|---|---|",
        ]
        for t in args.thresholds:
            pts = [x for x in g if x["threshold"] == t]
            if not pts:
                continue
            pp_, ow = [x["pingpong_gain_pct"] for x in pts], [x["one_way_gain_pct"] for x in pts]
            lines.append(
                f"| {t} | {pts[0]['size']}..{pts[-1]['size']} B | {sum(pp_) / len(pp_):.1f} % "
                f"({min(pp_):.1f}..{max(pp_):.1f}) | {sum(ow) / len(ow):.1f} % ({min(ow):.1f}..{max(ow):.1f}) |"
            )
        lines.append("")
    base = [r for r in rows if r["kind"] == "baseline"]
    if base:
        lines += ["## Against plain VIA (ping-pong latency, us)", ""]
        sizes_ = sorted({r["size"] for r in base})
        cols = [(s, t) for t in args.thresholds for s in args.schemes]
        lines += [
            "| size (B) | "
            + " | ".join(BASELINE_TITLES[b] for b in args.baselines)
            + " | "
            + " | ".join(f"{s} @{t}" for s, t in cols)
            + " |",
            "|---" * (1 + len(args.baselines) + len(cols)) + "|",
        ]
        for size in sizes_:
            cells = []
            for b in args.baselines:
                x = rows_where(base, scheme=b, size=size)
                cells.append(f"{x[0]['pingpong_us']:.2f}" if x else "")
            for s, t in cols:
                x = rows_where(rows, kind="pushpull", scheme=s, threshold=t, size=size)
                cells.append(f"{x[0]['pingpong_us']:.2f}" if x else "")
            lines.append(f"| {size} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += breakdown_table(rows)
    lines += [
        "## All push-pull points",
        "",
        "| scheme | bytes_to_push | size (B) | iterations | cycles | ping-pong (us) | one-way (us) | MB/s | "
        "ATT pages/msg | bytes copied/msg | pulls/msg |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["kind"] == "pushpull":
            lines.append(
                f"| {r['scheme']} | {r['threshold']} | {r['size']} | {r['iterations']} | {r['cycles']} | "
                f"{r['pingpong_us']:.2f} | {r['one_way_us']:.2f} | {r['bandwidth_MBps']:.2f} | "
                f"{r['translated_pages_per_msg']:.1f} | "
                f"{r['copied_bytes_per_msg']:.0f} | {r['pulls_per_msg']:.2f} |"
            )
    lines += ["", "## Card counters after the run", "", "| counter | node 0 | node 1 |", "|---|---|---|"]
    for name in info["counters"][0]:
        lines.append(f"| {name} | {info['counters'][0][name]} | {info['counters'][1][name]} |")
    return "\n".join(lines) + "\n"


def plot(rows, path, args):
    bars = breakdown_bars(rows)
    fig = Figure(figsize=(24 if bars else 18, 5.2))
    lat, one, gain, *rest = fig.subplots(1, 4 if bars else 3)
    if bars:
        bench_via.plot_breakdown(rest[0], bars)
    styles = {"original": "--", "advanced": "-"}
    for t in args.thresholds:
        for s in args.schemes:
            pts = [r for r in rows_where(rows, kind="pushpull", scheme=s, threshold=t) if r["size"] > 0]
            if not pts:
                continue
            label = f"{s}, bytes_to_push {t}"
            lat.plot([r["size"] for r in pts], [r["pingpong_us"] for r in pts], styles[s], marker=".", label=label)
            one.plot([r["size"] for r in pts], [r["one_way_us"] for r in pts], styles[s], marker=".", label=label)
        g = [x for x in gains(rows) if x["threshold"] == t and x["size"] > 0]
        if g:
            gain.plot(
                [x["size"] for x in g],
                [x["pingpong_gain_pct"] for x in g],
                "-",
                marker=".",
                label=f"ping-pong, bytes_to_push {t}",
            )
            gain.plot(
                [x["size"] for x in g],
                [x["one_way_gain_pct"] for x in g],
                ":",
                marker=".",
                label=f"one-way, bytes_to_push {t}",
            )
    for b in args.baselines:
        pts = [r for r in rows_where(rows, kind="baseline", scheme=b) if r["size"] > 0]
        if pts:
            lat.plot(
                [r["size"] for r in pts],
                [r["pingpong_us"] for r in pts],
                ":",
                color="grey" if b == "send" else "black",
                marker="x",
                label=f"plain VIA {BASELINE_TITLES[b]}",
            )
    gain.axhspan(
        PAPER["gain_min_pct"],
        PAPER["gain_max_pct"],
        color="green",
        alpha=0.12,
        label="paper: 7-18 % (bytes_to_push 512)",
    )
    gain.axhline(0, color="black", linewidth=0.6)
    for ax, title, unit in (
        (lat, "Ping-pong latency (half round trip)", "us"),
        (one, "One-way latency (send call to data in user buffer)", "us"),
        (gain, "Advanced vs original: latency reduction", "%"),
    ):
        results.size_axes(ax, title, unit, title_size=10, legend_size=6)
    lat.set_yscale("log")
    one.set_yscale("log")
    fig.suptitle("Numavia push-pull messaging over VIA, two simulated nodes over GbE (card cycle counters)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
