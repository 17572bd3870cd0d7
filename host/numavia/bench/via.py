"""``numavia bench via``: NetPIPE-style sweep of the VIA engine on two simulated nodes.

For each MTU, operation and message size the two nodes' benchmark agents (firmware) run a
ping-pong over a connected VI pair, timed by the card's cycle counter; the host sets everything
up through VIPL and collects the cycle counts. Results: a CSV of every point, a Markdown summary
against the paper's figures and the wire limits, and a PNG of latency and bandwidth.

Latency is the half round trip for send/receive and RDMA write (what the paper reports), and the
whole operation for an RDMA read (a read is itself a round trip); bandwidth is size / latency.
The streaming tests keep up to eight messages in flight on each VI they use (``--stream-depth``;
``--stream-vis``: the messages go on the VIs in turn) and report the time per message, the message
rate against the wire's frame rate, and the resulting bandwidth (no latency: messages overlap).

Each send/receive and RDMA-write point also splits its last half round trip into steps, from the
cards' latency stamps (``regmap.VIA_STAMPS``) and the cycle at which each agent saw its last
message arrive (both nodes' counters run from one clock and one reset): see :func:`breakdown`.
With ``--baseline`` (an earlier run's ``via_bench.json``) the plot puts that run's breakdown beside
this one's.
"""

import json
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from matplotlib.figure import Figure

from numavia import errorlog, vipl
from numavia.base import via_frame, via_mailbox
from numavia.base.errors import NumaviaError
from numavia.bench import ETH_DELAY_CYCLES, results
from numavia.bench.results import rows_where
from numavia.cluster_session import ClusterSession
from numavia.gateware.card import CardConfig
from numavia.soc import sim

OPS = {
    "send": via_mailbox.BENCH_OP.SEND_RECV,
    "write": via_mailbox.BENCH_OP.RDMA_WRITE,
    "read": via_mailbox.BENCH_OP.RDMA_READ,
    "send-stream": via_mailbox.BENCH_OP.SEND_STREAM,
    "write-stream": via_mailbox.BENCH_OP.WRITE_STREAM,
}
OP_TITLES = {
    "send": "send/receive",
    "write": "RDMA write",
    "read": "RDMA read",
    "send-stream": "send stream",
    "write-stream": "RDMA write stream",
}
STREAMS = ("send-stream", "write-stream")
#: Card time the responder's agent may spend without posting a receive before the bench gives up:
#: a post takes a few hundred cycles; before its first, a 256-VI stream's agent writes the
#: descriptors of all 4,352 slots (less than this, but more than a minute of wall time on two
#: 256-VI models).
RECEIVE_STALL_SECONDS = 0.05
#: How the send/receive ping-pong's agents wait for their receives (``--wake``): poll the receive
#: descriptor, or sleep on the completion queue the receive queue is bound to.
WAKES = ("poll", "cq")
WAKE_NOTES = {
    "poll": "Send/receive: each agent polls its receive descriptor's DONE.",
    "cq": "Send/receive: each agent sleeps on its receive queue's completion queue until the card "
    "notifies it (`--wake cq`: the card's interrupt under Zephyr; bare metal polls CQ_NOTIFIED).",
}
PING_PONGS = ("send", "write", "read")

#: The figures of the paper on the VIA engine and the spec's wire limits.
PAPER = {"latency_us": 12.5, "bandwidth_MBps": 95.5, "rdma_gain_us": 2.9, "post_recv_us": 6.0}
WIRE_LIMIT_MBPS = {1500: 121.9, 9000: 124.5}


class BenchError(NumaviaError):
    pass


@dataclass(frozen=True)
class SweepOptions:
    """What a sweep measures and where its results go: the defaults of ``numavia bench via``'s
    options, and what the demo's RDMA sweep changes of them."""

    ops: tuple[str, ...] = tuple(OPS)
    mtu: tuple[int, ...] = (1500, 9000)
    iterations: int = 20  # round trips per point for small messages (large ones use fewer)
    eth_delay: int = ETH_DELAY_CYCLES  # Ethernet PHY+cable delay, 125 MHz cycles
    pair: tuple[int, int] = (0, 1)  # initiator, responder
    timeout: float = 900.0  # wall-time limit of one measurement, seconds
    wake: str = "poll"  # one of WAKES
    stream_vis: int = 1
    stream_depth: int = via_mailbox.BENCH_STREAM_DEPTH  # a stream's messages in flight on each VI
    vis: int = CardConfig.via_vis  # VIs each simulated card builds
    baseline: str | None = None  # an earlier run's via_bench.json, for the breakdown plot
    out: Path = Path("results/via")

    @classmethod
    def from_args(cls, args):
        """The options of a parsed ``numavia bench via`` command line (its lists as tuples)."""
        given = {f.name: getattr(args, f.name) for f in fields(cls)}
        given = {name: tuple(v) if isinstance(v, list) else v for name, v in given.items()}
        return cls(**{**given, "out": Path(given["out"])})


#: The steps of a half round trip (:func:`breakdown`), as plotted, and their row fields.
STEPS = ("CPU post", "card TX", "wire", "card RX", "completion seen")
STEP_FIELDS = ("cpu_post_cycles", "card_tx_cycles", "wire_cycles", "card_rx_cycles", "completion_seen_cycles")
BREAKDOWN_OPS = ("send", "write")
#: Card clock cycles per microsecond, for the breakdown's and the receiver's cycle counts.
CYCLES_PER_US = CardConfig().clk_freq_hz / 1e6


def breakdown(op, initiator_seen, responder_seen, initiator_stamps, responder_stamps):
    """The last half round trip of a ping-pong, step by step, in cycles (``STEP_FIELDS``).

    The responder's CPU saw the initiator's last message and posted its answer (CPU post: to the
    doorbell); its card fetched, translated and sent it (card TX: to the first data word handed to
    the MAC); the frame crossed (wire: both MACs, PHY and cable, the switch, to the last data word
    out of the initiator's MAC); the initiator's card wrote it (card RX: to the payload in host
    memory for an RDMA write, to the receive descriptor's DONE for a send); its CPU saw it
    (completion seen). The steps add up to the half round trip."""
    written = initiator_stamps["STAMP_RX_WRITTEN" if op == "write" else "STAMP_RX_COMPLETION"]
    moments = [
        responder_seen,
        responder_stamps["STAMP_SQ_DOORBELL"],
        responder_stamps["STAMP_TX_DATA"],
        initiator_stamps["STAMP_RX_DATA"],
        written,
        initiator_seen,
    ]
    steps = [(b - a) & 0xFFFF_FFFF for a, b in zip(moments, moments[1:])]
    if any(step >= 1 << 31 for step in steps):
        raise BenchError(f"{op}: the cards' latency stamps are out of order: {moments}")
    return dict(zip(STEP_FIELDS, steps))


def load_baseline(path):
    """The breakdown rows of an earlier run's ``via_bench.json``, or BenchError with the reason."""
    try:
        rows = json.loads(Path(path).read_text())["figures"]["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BenchError(f"--baseline {path}: not a via_bench.json ({e})") from None
    rows = [r for r in rows if r.get(STEP_FIELDS[0]) is not None]
    if not rows:
        raise BenchError(f"--baseline {path}: it has no latency breakdown (a run from before the latency stamps)")
    return rows


def sizes(min_size, max_size, perturbation=0):
    """Powers of two from ``min_size`` to ``max_size``, each also +- ``perturbation`` (NetPIPE)."""
    out, s = set(), 1
    while s <= max_size:
        if s >= min_size:
            out.add(s)
            if perturbation:
                out.update(x for x in (s - perturbation, s + perturbation) if min_size <= x <= max_size)
        s *= 2
    return sorted(out)


def iterations_for(size, *, most, target_bytes=256 * 1024):
    return max(2, min(most, -(-target_bytes // max(size, 1))))


def messages_for(op, size, *, most, vis=1, target_bytes=1024 * 1024):
    """Messages of a streaming point over ``vis`` VIs: enough to fill the pipe; a send stream has a
    receive posted for each message first, so at most the agent's receives on each VI. Large
    messages too go on every VI, twice."""
    n = max(4, 2 * vis, min(4 * most * vis, -(-target_bytes // max(size, 1))))
    return min(n, via_mailbox.BENCH_STREAM_RECEIVES * vis) if op == "send-stream" else n


class Bench:
    """Ping-pongs and streams between the nodes ``pair`` (initiator, responder) of a session."""

    def __init__(
        self,
        session,
        *,
        max_size,
        log,
        timeout,
        pair=(0, 1),
        wake="poll",
        stream_vis=1,
        stream_depth=via_mailbox.BENCH_STREAM_DEPTH,
    ):
        self.log = log
        self.pair = pair
        self.wake = wake
        self.stream_vis = stream_vis
        self.stream_depth = stream_depth
        self.nics = [session.nic(node, timeout=timeout) for node in pair]
        self.freq = self.nics[0].card_reg("ctrl", "CLK_FREQ_HZ")
        ptags = [n.create_ptag() for n in self.nics]
        self.buffers = []
        for nic, ptag in zip(self.nics, ptags):
            buf = nic.alloc(max(max_size, 4096), contiguous=True)
            nic.register(buf, ptag, rdma_write=True, rdma_read=True)
            self.buffers.append(buf)
        # A page of descriptors for each VI a stream spreads over (the ping-pongs use the first).
        self.descs = [nic.memory.pages(stream_vis, contiguous=True)[0] for nic in self.nics]
        # With --wake cq each VI's receives complete into a queue of their own, the one its agent sleeps on.
        self.cqs = [nic.create_cq() if wake == "cq" else None for nic in self.nics]
        self.vis = [nic.create_vi(ptag, recv_cq=cq) for nic, ptag, cq in zip(self.nics, ptags, self.cqs)]
        vipl.connect_pair(
            self.vis[0], self.vis[1], 0xBE7C, client_buffer=self.buffers[0], server_buffer=self.buffers[1]
        )
        # The streams' other VIs, connected pair by pair; the agent takes consecutive numbers.
        for k in range(1, stream_vis):
            more = [nic.create_vi(ptag) for nic, ptag in zip(self.nics, ptags)]
            vipl.connect_pair(
                more[0], more[1], 0xBE7C + k, client_buffer=self.buffers[0], server_buffer=self.buffers[1]
            )
            for first, vi in zip(self.vis, more):
                if vi.number != first.number + k:
                    raise BenchError(f"the streams' VIs are not consecutive (VI {vi.number} after {first.number})")
            if (k + 1) % 32 == 0 or k + 1 == stream_vis:  # each pair is a few firmware round trips
                log(f"connected {k + 1} of {stream_vis} VI pairs")

    def set_mtu(self, mtu):
        for nic in self.nics:
            nic.via_reg("MTU", mtu)

    def _extra_words(self, node, op):
        """The agent's WAKE_CQ word (which completion queue it sleeps on: send/receive only) and
        STREAM word (over how many VIs a stream spreads, and how many messages are in flight on each)."""
        cq = self.cqs[node]
        stream = (
            via_mailbox.BENCH_STREAM_ARG.pack_value(VIS=self.stream_vis, DEPTH=self.stream_depth)
            if op in STREAMS
            else via_mailbox.BENCH_STREAM_ARG.pack_value(VIS=1)
        )
        return {
            via_mailbox.BENCH_ARG_WAKE_CQ: cq.id + 1 if cq is not None and op == "send" else 0,
            via_mailbox.BENCH_ARG_STREAM: stream,
        }

    def _args(self, node, op, size, iterations):
        me, peer = self.buffers[node], self.vis[node].remote_buffer
        return dict(
            role=1 if node == 0 else 0,
            op=OPS[op],
            vi=self.vis[node].number,
            size=size,
            iterations=iterations,
            buf_va_lo=me.va,
            buf_va_hi=me.va >> 32,
            buf_handle=me.handle,
            buf_pa=me.pa(0),
            remote_va_lo=peer.va,
            remote_va_hi=peer.va >> 32,
            remote_handle=peer.handle,
            desc=self.descs[node],
            timeout_us=20_000_000,
        )

    def _receives_posted(self, vis):
        """Receives queued on the responder's first ``vis`` VIs of the run."""
        first = self.vis[1].number
        return sum(self.nics[1].vi_reg(vi, "QUEUE_STATUS") >> 16 for vi in range(first, first + vis))

    def _wait_receives(self, count, vis, errors):
        """Start the initiator only once the responder's agent has posted its receives. How long
        that takes in wall time depends on the VIs (a stream over 256 posts 4,096, after writing
        every slot's descriptor) and on how fast the machine simulates, so the wait counts the
        responder's card cycles: it gives up after ``RECEIVE_STALL_SECONDS`` of card time without
        a new receive, and reads the VIs' queues less often the more there are."""
        stall = int(self.freq * RECEIVE_STALL_SECONDS)
        posted, since = 0, self._responder_cycles()
        while not errors and posted < count:
            now, now_posted = self._responder_cycles(), self._receives_posted(vis)
            if now_posted > posted:
                posted, since = now_posted, now
            elif now - since > stall:
                raise BenchError(
                    f"the responder's agent did not post its receives ({posted} of {count}; "
                    f"none for {now - since:,} card cycles)"
                )
            time.sleep(0.005 * vis)

    def _responder_cycles(self):
        return errorlog.read_cycles(self.nics[1].card_reg)

    def point(self, op, size, iterations):
        """One measurement: both agents for a ping-pong, the initiator alone for reads."""
        results, errors = {}, []

        def run(node):
            try:
                results[node] = self.nics[node].command(
                    "BENCH", extra_words=self._extra_words(node, op), **self._args(node, op, size, iterations)
                )[1]
            except (NumaviaError, OSError) as e:  # OSError: the session ended under the responder
                errors.append(e)

        threads = []
        if op not in ("read", "write-stream"):  # the remote CPU takes no part in these
            threads.append(threading.Thread(target=run, args=(1,)))
            threads[0].start()
            if op == "send-stream":
                self._wait_receives(iterations, self.stream_vis, errors)
            else:
                self._wait_receives(1 if op == "send" else 0, 1, errors)
        run(0)
        for t in threads:
            t.join()
        if errors:
            raise BenchError(f"{op} of {size} bytes: {errors[0]}")
        r0, r1 = results[0], results.get(1)
        cycles = r0["cycles_lo"] | r0["cycles_hi"] << 32
        per_op = cycles / iterations / (2 if op in ("send", "write") else 1)
        latency_us = per_op / self.freq * 1e6
        post_recv = r1["post_recv_cycles"] / r1["post_recvs"] if r1 and r1["post_recvs"] else 0.0
        steps = dict.fromkeys(STEP_FIELDS)
        if op in BREAKDOWN_OPS:
            stamps = [nic.stamps() for nic in self.nics]
            steps = breakdown(op, r0["seen_cycles"], r1["seen_cycles"], *stamps)
        return {
            "iterations": iterations,
            "cycles": cycles,
            "latency_us": latency_us,
            "bandwidth_MBps": size / latency_us if latency_us else 0.0,
            "receiver_post_recv_cycles": post_recv,
            # How often the initiator looked for a completion (or arrival) per message: near 1, it
            # seldom waited for the card; far above, the card (or the peer) kept it waiting.
            "initiator_polls_per_message": r0["polls"] / iterations,
            **steps,
        }


def sweep(session, options, points, log):
    """Every (MTU, operation, size) point of ``options`` (a :class:`SweepOptions`) between its two
    nodes of a running session; returns the rows and both cards' counters afterwards."""
    bench = Bench(
        session,
        max_size=max(points),
        log=log,
        timeout=options.timeout,
        pair=options.pair,
        wake=options.wake,
        stream_vis=options.stream_vis,
        stream_depth=options.stream_depth,
    )
    # The RDMA-write ping-pong detects arrival by a byte: no empty write.
    todo = [
        (mtu, op, size)
        for mtu in options.mtu
        for op in options.ops
        for size in points
        if not (size == 0 and op == "write")
    ]
    rows, mtu_set = [], None
    for done, (mtu, op, size) in enumerate(todo, 1):
        if mtu != mtu_set:
            bench.set_mtu(mtu)
            mtu_set = mtu
        n = (
            messages_for(op, size, most=options.iterations, vis=options.stream_vis)
            if op in STREAMS
            else iterations_for(size, most=options.iterations)
        )
        r = bench.point(op, size, n)
        rows.append({"mtu": mtu, "op": op, "size": size, **r})
        results.progress(
            log,
            done,
            len(todo),
            f"MTU {mtu} {OP_TITLES[op]:>13} {size:>8} B: {r['latency_us']:9.2f} us "
            f"{r['bandwidth_MBps']:7.2f} MB/s ({n} x)",
        )
    return rows, [n.counters() for n in bench.nics]


def run_sweep(options, points, *, nodes, spread, firmware, log):
    """Build a ring of ``nodes`` simulated nodes running ``firmware``, boot it and sweep ``points``
    (message sizes) with ``options``; returns the rows and what :func:`write_results` records."""
    config = sim.SimConfig(nodes=nodes, via_vis=options.vis)
    build = sim.build_all(config, log=log, spread=spread, firmware=firmware)
    run_dir = Path(options.out) / "run"
    started = time.monotonic()
    with ClusterSession(build, run_dir, spread=spread, eth_delay=options.eth_delay) as session:
        rows, counters = sweep(session, options, points, log)
    return rows, {
        "build": build,
        "config": config,
        "counters": counters,
        "run_dir": run_dir,
        "wall_seconds": time.monotonic() - started,
    }


FIELDS = [
    "mtu",
    "op",
    "size",
    "iterations",
    "cycles",
    "latency_us",
    "bandwidth_MBps",
    "receiver_post_recv_cycles",
    "initiator_polls_per_message",
    *STEP_FIELDS,
]
TITLE = "VIA engine benchmark (two simulated nodes)"


def configuration(info, *, eth_delay, mtu, vis=CardConfig.via_vis):
    """What a sweep ran on, for its results: the simulation, the card and the builds."""
    card = CardConfig(via_vis=vis)
    build = info["build"]
    return {
        "simulation": str(info["config"]),
        "eth_delay_cycles": eth_delay,
        "mtu": mtu,
        "clock_hz": card.clk_freq_hz,
        "card": {k: v for k, v in asdict(card).items() if k.startswith("via_")},
        "builds": {
            "soc": build.soc_dir.name,
            "firmware": f"{build.firmware.kind} {build.firmware.name}",
            "model": build.model.parent.parent.name,
        },
        "wall_seconds": round(info["wall_seconds"], 1),
    }


def write_results(rows, info, options):
    out = Path(options.out)
    baseline = load_baseline(options.baseline) if options.baseline else None
    results.write(
        out,
        "via_bench",
        title=TITLE,
        headers=FIELDS,
        rows=[["" if c is None else c for c in results.csv_row(r, FIELDS)] for r in rows],
        figures={"rows": rows, "counters": info["counters"]},
        config={
            **configuration(info, eth_delay=options.eth_delay, mtu=options.mtu, vis=options.vis),
            "ops": list(options.ops),
            "wake": options.wake,
            "stream_vis": options.stream_vis,
            "stream_depth": options.stream_depth,
        },
        text=summary(rows, info, options, baseline),
        plot=lambda path: plot(rows, path, options, baseline),
    )
    return [out / f"via_bench.{ext}" for ext in ("md", "csv", "json", "png")]


def latency_table(rows, options, smallest):
    """The ping-pongs' smallest-message latency and peak bandwidth, as Markdown lines (none for a
    sweep of streams only: their table follows)."""
    table = []
    for mtu in options.mtu:
        for op in options.ops:
            pts = rows_where(rows, mtu=mtu, op=op)
            if not pts or op in STREAMS:
                continue
            small = rows_where(pts, size=smallest)
            peak = max(pts, key=lambda r: r["bandwidth_MBps"])
            paper = (
                f"{PAPER['latency_us']} us, {PAPER['bandwidth_MBps']} MB/s (RDMA, MTU 1514)" if op == "write" else ""
            )
            table.append(
                f"| {mtu} | {OP_TITLES[op]} | {small[0]['latency_us']:.2f} | "
                f"{peak['bandwidth_MBps']:.1f} at {peak['size']} B | {paper} |"
            )
    if not table:
        return []
    return [
        "## Smallest message and peak bandwidth",
        "",
        f"| MTU | operation | latency at {smallest} B (us) | peak bandwidth (MB/s) at size | paper |",
        "|---|---|---|---|---|",
        *table,
        "",
    ]


def breakdown_bars(rows, baseline, options):
    """(label, row) of each breakdown the plot and the report show: for each ping-pong with one, at
    the smallest size and first MTU, the baseline's (if given) then this run's."""
    bars = []
    for op in BREAKDOWN_OPS:
        for source, label in ((baseline or [], "baseline"), (rows, "this run")):
            pts = [r for r in source if r["op"] == op and r.get(STEP_FIELDS[0]) is not None]
            pts = [r for r in pts if r["mtu"] == options.mtu[0]] or pts
            if pts:
                smallest = min(pts, key=lambda r: r["size"])
                bars.append((f"{OP_TITLES[op]}, {smallest['size']} B\n{label}", smallest))
    return bars


def breakdown_table(rows, baseline, options):
    bars = breakdown_bars(rows, baseline, options)
    if not bars:
        return []
    lines = [
        f"## Latency breakdown (cycles of {1e3 / CYCLES_PER_US:.0f} ns; the last half round trip of the point)",
        "",
        "CPU post: the responder saw the message, to its doorbell; card TX: to the first data word at the "
        "MAC; wire: to the last data word out of the other MAC; card RX: to the payload in memory (RDMA "
        "write) or the receive's DONE (send); completion seen: to the agent's poll that saw it.",
        "",
        f"| | {' | '.join(STEPS)} | sum (us) | mean half round trip (us) |",
        "|---|" + "---|" * (len(STEPS) + 2),
    ]
    for label, r in bars:
        steps = [r[f] for f in STEP_FIELDS]
        lines.append(
            f"| {label.replace(chr(10), ', ')} (MTU {r['mtu']}) | {' | '.join(str(x) for x in steps)} | "
            f"{sum(steps) / CYCLES_PER_US:.2f} | {r['latency_us']:.2f} |"
        )
    return [*lines, ""]


def summary(rows, info, options, baseline=None):
    card = CardConfig(via_vis=options.vis)
    lines = [
        f"Simulation: {info['config']}, Ethernet PHY+cable delay {options.eth_delay} eth cycles "
        f"({options.eth_delay * 8} ns), sys clock {card.clk_freq_hz / 1e6:.0f} MHz  ",
        f"Card: {', '.join(f'{k}={v}' for k, v in asdict(card).items() if k.startswith('via_'))}  ",
        f"Builds: SoC `{info['build'].soc_dir.name}`, firmware {info['build'].firmware.kind} "
        f"`{info['build'].firmware.name}`, "
        f"model `{info['build'].model.parent.parent.name}`; {info['wall_seconds']:.0f} s wall",
        "",
        "Latency: half round trip (send/receive, RDMA write), whole operation (RDMA read), from the",
        "benchmark agents' cycle counts (card counter, 100 MHz). Bandwidth: size / latency.",
        WAKE_NOTES[options.wake],
        "",
    ]
    smallest = min(r["size"] for r in rows if r["size"] > 0)
    lines += latency_table(rows, options, smallest)
    lines += breakdown_table(rows, baseline, options)
    lines += [
        "Wire limits (payload on back-to-back full frames): "
        + "; ".join(
            f"MTU {m}: {WIRE_LIMIT_MBPS.get(m, 0):.1f} MB/s counting Ethernet headers only, "
            f"{via_frame.wire_limit_bytes_per_s(m) / 1e6:.1f} MB/s with this card's "
            f"{via_frame.VIA_HEADER_SIZE}-byte VIA header"
            for m in options.mtu
        ),
        "",
    ]
    streams = [op for op in options.ops if op in STREAMS]
    if streams:
        on = f"on each of {options.stream_vis} VIs" if options.stream_vis > 1 else "on one VI"
        lines += [
            f"## Streaming ({options.stream_depth} message{'s' if options.stream_depth > 1 else ''} in flight {on})",
            "",
            f"| MTU | operation | time per {smallest}-byte message (us) | messages/s | of the wire's message rate "
            "| peak bandwidth (MB/s) at size | of the wire limit |",
            "|---|---|---|---|---|---|---|",
        ]
        for mtu in options.mtu:
            for op in streams:
                pts = rows_where(rows, mtu=mtu, op=op)
                small = rows_where(pts, size=smallest)
                if not pts or not small:
                    continue
                peak = max(pts, key=lambda r: r["bandwidth_MBps"])
                rate = 1e6 / small[0]["latency_us"]
                limit = via_frame.wire_limit_bytes_per_s(mtu) / 1e6
                lines.append(
                    f"| {mtu} | {OP_TITLES[op]} | {small[0]['latency_us']:.2f} | {rate:.0f} | "
                    f"{100 * rate / via_frame.wire_messages_per_s(smallest, mtu):.1f} % | "
                    f"{peak['bandwidth_MBps']:.1f} at {peak['size']} B | {100 * peak['bandwidth_MBps'] / limit:.1f} % |"
                )
        lines.append("")
    if "send" in options.ops and "write" in options.ops:
        lines += [
            "## RDMA write vs send/receive",
            "",
            f"Paper: RDMA {PAPER['rdma_gain_us']} us faster at every size. Here (mean over sizes up to 16 KiB):",
            "",
        ]
        for mtu in options.mtu:
            gains = [
                s["latency_us"] - w["latency_us"]
                for s in rows_where(rows, mtu=mtu, op="send")
                for w in rows_where(rows, mtu=mtu, op="write", size=s["size"])
                if s["size"] <= 16384
            ]
            if gains:
                lines.append(
                    f"- MTU {mtu}: {sum(gains) / len(gains):.2f} us faster "
                    f"(from {min(gains):.2f} to {max(gains):.2f} us)"
                )
        lines.append("")
    sends = [r for r in rows if r["op"] == "send" and r["receiver_post_recv_cycles"]]
    if sends:
        cycles = sum(r["receiver_post_recv_cycles"] for r in sends) / len(sends)
        lines += [
            "## Receiver CPU per message",
            "",
            f"- send/receive: VipPostRecv takes {cycles:.0f} cycles = {cycles / CYCLES_PER_US:.2f} us of the "
            f"receiving CPU per message (mean over {len(sends)} points; paper: "
            f"{PAPER['post_recv_us']} us)",
            "- RDMA write and read: 0 (the receiving CPU takes no part)",
            "",
        ]
    first, second = options.pair
    lines += ["## Card counters after the run", "", f"| counter | node {first} | node {second} |", "|---|---|---|"]
    for name in info["counters"][0]:
        lines.append(f"| {name} | {info['counters'][0][name]} | {info['counters'][1][name]} |")
    lines += [
        "",
        "## All points",
        "",
        "Streams: `iterations` messages, `latency` the time per message.",
        "",
        "| MTU | operation | size (B) | iterations | latency (us) | MB/s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mtu']} | {OP_TITLES[r['op']]} | {r['size']} | {r['iterations']} | "
            f"{r['latency_us']:.2f} | {r['bandwidth_MBps']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot_breakdown(ax, bars):
    """Stacked bars: each breakdown's steps in microseconds."""
    bottoms = [0.0] * len(bars)
    for step, field in zip(STEPS, STEP_FIELDS):
        heights = [r[field] / CYCLES_PER_US for _, r in bars]
        ax.bar(range(len(bars)), heights, bottom=bottoms, label=step)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for i, total in enumerate(bottoms):
        ax.text(i, total, f"{total:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(bars)), [label for label, _ in bars], fontsize=7)
    ax.set_ylabel("us")
    ax.set_title("Half round trip, step by step (card stamps)")
    ax.legend(fontsize=7)


def plot(rows, path, options, baseline=None):
    bars = breakdown_bars(rows, baseline, options)
    fig = Figure(figsize=(19 if bars else 13, 5))
    axes = fig.subplots(1, 3 if bars else 2)
    lat, bw = axes[0], axes[1]
    if bars:
        plot_breakdown(axes[2], bars)
    styles = {1500: "-", 9000: "--"}
    for mtu in options.mtu:
        for op in options.ops:
            pts = [r for r in rows_where(rows, mtu=mtu, op=op) if r["size"] > 0]
            if not pts:
                continue
            label = f"{OP_TITLES[op]}, MTU {mtu}"
            if op not in STREAMS:  # a stream's time per message is not a latency
                lat.plot(
                    [r["size"] for r in pts],
                    [r["latency_us"] for r in pts],
                    styles.get(mtu, ":"),
                    marker=".",
                    label=label,
                )
            bw.plot(
                [r["size"] for r in pts],
                [r["bandwidth_MBps"] for r in pts],
                styles.get(mtu, ":"),
                marker=".",
                label=label,
            )
    lat.axhline(PAPER["latency_us"], color="grey", linestyle=":", label="paper: 12.5 us (RDMA, 4 B)")
    bw.axhline(PAPER["bandwidth_MBps"], color="grey", linestyle=":", label="paper: 95.5 MB/s")
    for mtu in options.mtu:
        bw.axhline(
            WIRE_LIMIT_MBPS.get(mtu, 0),
            color="red",
            linestyle=styles.get(mtu, ":"),
            linewidth=0.8,
            label=f"GbE limit, MTU {mtu}",
        )
    for ax, title, unit in ((lat, "Latency", "us"), (bw, "Bandwidth", "MB/s")):
        results.size_axes(ax, title, unit)
    lat.set_yscale("log")
    fig.suptitle("Numavia VIA engine, two simulated nodes over GbE (latency: half round trip; read: whole op)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
