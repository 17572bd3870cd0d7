"""``numavia bench ...``: every benchmark, run the same way: its results folder made first, its
figures measured with progress lines on stderr, its report printed and written (Markdown, CSV,
JSON with the command and configuration, PNG) by :mod:`numavia.bench.results`."""

from pathlib import Path

from numavia.base import buildcache, pushpull_format, regmap, via_mailbox
from numavia.base.coherence import CACHE_AT, LINE_BYTES, LINE_SIZES
from numavia.base.errors import NumaviaError
from numavia.bench import (
    boot,
    coherence,
    latency,
    local_side,
    miss,
    protocol,
    pushpull,
    shm,
    sim_speed,
    splash2,
    stream,
    via,
)
from numavia.gateware.microcode.protocol_explorer import KINDS, ExploreConfig
from numavia.instrument import CostModel
from numavia.soc.ring_launch import require_mpi
from numavia.splash2 import KERNELS, PLACEMENTS

from .common import (
    MAX_NODES,
    Parser,
    add_cache_at_option,
    add_eth_delay_option,
    add_firmware_option,
    add_nodes_option,
    add_out_option,
    add_spread_options,
    check_eth_delay,
    check_sizes,
    checking,
    command,
    count,
    counts,
    firmware_list,
    integer_in,
    list_of,
    log,
    mtu,
    positive,
    positive_float,
    probability,
    results_folder,
    ring_size,
    size,
    spread,
)


def _run(args, measure, report, files):
    """The one way a benchmark runs: folder first (a long run never loses its results to it),
    then ``measure()``, then ``report(figures, out)`` printed; ``files`` names what was written."""
    out = results_folder(args.out)
    figures = measure()
    print(report(figures, out))
    log(f"results in {out}/{files}")
    return figures


def _paths(paths):
    return "\n".join(str(p) for p in paths)


def cmd_bench_latency(args):
    run_spread = spread(args, args.nodes)
    _run(
        args,
        lambda: latency.run(
            args.nodes,
            log=log,
            out=buildcache.build_root() / "run" / "latency",
            spread=run_spread,
            microcode_only=args.microcode_only,
        ),
        latency.report,
        "latency.{md,csv,json,png}",
    )
    return 0


def add_microcode_only_option(p):
    p.add_argument(
        "--microcode-only",
        action="store_true",
        help="the sequencers' hard-wired fast path off: the microcode runs every transaction",
    )


def cmd_bench_miss(args):
    baseline = miss.load_baseline(args.baseline) if args.baseline else ()  # checked before the runs

    def measure():
        figures = miss.run(args.nodes, log=log, spread=run_spread, microcode_only=args.microcode_only)
        return dict(figures, baseline=baseline)

    run_spread = spread(args, max(args.nodes))
    _run(
        args,
        measure,
        miss.report,
        "miss.{md,csv,json,png}",
    )
    return 0


def cmd_bench_local_side(args):
    def measure():
        log("simulating the local side")
        return local_side.measure(), None if args.no_synth else local_side.synthesis(device=args.device, log=log)

    _run(args, measure, lambda measured, out: local_side.report(*measured, out), "local_side.{md,csv,json}")
    return 0


def cmd_bench_coherence(args):
    run_spread = spread(args, args.nodes)
    figures = _run(
        args,
        lambda: coherence.run(
            args.nodes,
            args.ops,
            seed=args.seed,
            flip_rate=args.flip_rate,
            ring_drop=args.ring_drop,
            ring_duplicate=args.ring_duplicate,
            numa=args.numa,
            microcode_only=args.microcode_only,
            line_bytes=args.line_bytes,
            log=log,
            run_dir=Path(args.out) / "run",  # beside the results: two runs never share their logs
            spread=run_spread,
        ),
        coherence.report,
        "coherence.{md,csv,json,png}",
    )
    if figures["violation_count"] or figures["protocol_errors"]:
        raise NumaviaError(
            f"{figures['violation_count']} coherence violation(s), "
            f"{figures['protocol_errors']} protocol error(s): see {args.out}/coherence.json"
        )
    return 0


def cmd_bench_protocol(args):
    try:
        config = ExploreConfig(
            nodes=args.nodes,
            home=args.home,
            ops=tuple(args.ops if args.ops is not None else [2] * args.nodes),
            kinds=tuple(args.kinds),
            ordered=args.ordered,
            max_states=args.max_states,
            cache_first_miss=CACHE_AT[args.cache_at],
        )
    except ValueError as e:
        args.parser.error(str(e))
    figures = _run(args, lambda: protocol.run(config, log=log), protocol.report, "protocol.{md,csv,json}")
    if figures["violations"] or figures["deadlocks"]:
        raise NumaviaError(
            f"{figures['violations']} violation(s), {figures['deadlocks']} deadlock(s): "
            f"see {args.out}/counterexample.txt"
        )
    if figures["truncated"]:
        raise NumaviaError(f"the search stopped at --max-states {args.max_states}: no verdict")
    return 0


def cmd_bench_boot(args):
    run_spread = spread(args, args.nodes)
    _run(
        args,
        lambda: boot.measure(
            args.firmware,
            nodes=args.nodes,
            log=log,
            spread=run_spread,
            run_root=buildcache.build_root() / "run" / "boot",
        ),
        boot.report,
        "boot.{md,csv,json}",
    )
    return 0


def cmd_bench_stream(args):
    run_spread = spread(args, stream.NODES)
    _run(
        args,
        lambda: stream.measure(args.array_bytes, args.passes, log=log, spread=run_spread),
        stream.report,
        "stream.{md,csv,json,png}",
    )
    return 0


def cmd_bench_shm(args):
    run_spread = spread(args, shm.NODES)
    _run(
        args,
        lambda: shm.measure(args.max_size, log=log, firmware=args.firmware, spread=run_spread),
        shm.report,
        "shm.{md,csv,json,png}",
    )
    return 0


def cmd_bench_via(args):
    check_sizes(args, 2 * 1024 * 1024, "the simulated host memory holds 4 MiB")
    check_eth_delay(args)
    if len(args.pair) != 2 or max(args.pair) >= args.nodes:
        args.parser.error(f"--pair names two nodes of the ring (0..{args.nodes - 1}), not {args.pair}")
    if args.vis > regmap.VI_CAPACITY:
        args.parser.error(f"--vis {args.vis}: the register map holds {regmap.VI_CAPACITY} VIs")
    if args.stream_vis > args.vis:
        args.parser.error(f"--stream-vis {args.stream_vis}: the card has {args.vis} VIs (--vis)")
    args.spread = spread(args, args.nodes)
    if args.baseline:
        try:
            via.load_baseline(args.baseline)
        except via.BenchError as e:
            args.parser.error(str(e))
    options = via.SweepOptions.from_args(args)
    points = via.sizes(args.min_size, args.max_size, args.perturbation)
    _run(
        args,
        lambda: via.run_sweep(options, points, nodes=args.nodes, spread=args.spread, firmware=args.firmware, log=log),
        lambda measured, out: _paths(via.write_results(*measured, options)),
        "via_bench.{md,csv,json,png}",
    )
    return 0


def cmd_bench_pushpull(args):
    check_sizes(args, 1024 * 1024, "the library's translations hold 520 pages")
    bad = [t for t in args.thresholds if t > pushpull_format.MAX_PUSH]
    if bad:
        args.parser.error(
            f"--thresholds: bytes_to_push is at most {pushpull_format.MAX_PUSH} (a pushed-buffer slot), not {bad[0]}"
        )
    check_eth_delay(args)
    args.spread = spread(args, 2)
    _run(
        args,
        lambda: pushpull.run_sweep(args, log),
        lambda measured, out: _paths(pushpull.write_results(*measured, args)),
        "pushpull_bench.{md,csv,json,png}",
    )
    return 0


def cmd_bench_splash2(args):
    run_spread = spread(args, max(args.nodes))
    _run(
        args,
        lambda: splash2.run(
            args.kernels,
            args.nodes,
            args.modes,
            size=args.size,
            ways=args.ways,
            line_sizes=args.line_bytes,
            placement=args.placement,
            access=args.access,
            cache_at=args.cache_at,
            cost=CostModel(ns_per_op=args.ns_per_op),
            log=log,
            spread=run_spread,
        ),
        splash2.report,
        "splash2_*.{md,csv,json}, splash2_time.png, splash2_speedup.png",
    )
    return 0


def cmd_bench_sim_speed(args):
    for option, values in (("--nodes", args.nodes), ("--procs", args.procs), ("--mpi-ranks", args.mpi_ranks)):
        if any(v < 1 for v in values):
            args.parser.error(f"{option}: every value must be at least 1")
    if max(args.nodes) > MAX_NODES:
        args.parser.error(f"--nodes: a ring holds at most {MAX_NODES} nodes")
    if args.mpi_ranks:
        with checking(args):
            require_mpi()
    accesses = sim_speed.CARD_ACCESSES if args.card_accesses is None else args.card_accesses
    _run(
        args,
        lambda: sim_speed.measure(
            args.nodes, args.procs, args.mpi_ranks, cycles=args.cycles, card_accesses=accesses, log=log
        ),
        sim_speed.report,
        "sim_speed.{md,csv,json,png}",
    )
    return 0


def cmd_bench_pcie(args):
    # The PCIe bench needs the host model of cocotbext-pcie, an optional extra (numavia[pcie]): only
    # this benchmark imports it, so that every other command works without it.
    try:
        from numavia.bench import pcie
    except ModuleNotFoundError as e:
        raise NumaviaError(f"numavia bench pcie needs {e.name} (pip install 'numavia[pcie]')") from e

    def measure():
        log("simulating the PCIe endpoint")
        return pcie.measure()

    _run(args, measure, pcie.report, "pcie.{md,csv,json,png}")
    return 0


def register(sub):
    p = sub.add_parser(
        "bench",
        help="benchmarks: figures from the simulated hardware, with the paper's beside them",
        description="Run a benchmark on the cycle-accurate simulation and write its tables "
        "(Markdown, CSV, JSON) and plots (PNG) into a results folder.",
    )
    benches = p.add_subparsers(dest="bench", metavar="BENCHMARK", parser_class=Parser)
    benches.required = True
    lat = command(
        benches,
        "latency",
        cmd_bench_latency,
        help="shared-memory access latencies (the paper's Table 1)",
        description="Each access alone on a ring of cards, timed by the card's own "
        "cycle counter, in NCC-NUMA and NUMA mode.",
    )
    add_nodes_option(lat, 4, "cards in the ring")
    add_microcode_only_option(lat)
    add_out_option(lat, "results/latency")
    add_spread_options(lat)
    mis = command(
        benches,
        "miss",
        cmd_bench_miss,
        help="where the cycles of one remote read miss go",
        description="The phases of a remote read miss inside the card (its coherence engine in "
        "Amaranth's simulator, cycle by cycle) against the whole miss on rings of RTL cards (the "
        "card's own counter); the ring link and the ring are the rest.",
    )
    mis.add_argument(
        "--nodes",
        type=list_of(int, tuple(range(2, MAX_NODES + 1)), "ring size"),
        default=[2, 4],
        help="ring sizes, comma-separated (default 2,4)",
    )
    add_microcode_only_option(mis)
    mis.add_argument(
        "--baseline",
        metavar="JSON",
        help="an earlier run's miss.json, tabulated and plotted beside this one",
    )
    add_out_option(mis, "results/miss")
    add_spread_options(mis)
    loc = command(
        benches,
        "local-side",
        cmd_bench_local_side,
        help="the local side alone: hits, bursts, hand-off, ECP5 synthesis",
        description="Amaranth simulation of the local side with its counters, and an "
        "out-of-context open ECP5 synthesis.",
    )
    loc.add_argument("--device", default="85k", help="ECP5 device for synthesis (default 85k)")
    loc.add_argument("--no-synth", action="store_true", help="skip the synthesis (minutes)")
    add_out_option(loc, "results/local_side")
    coh = command(
        benches,
        "coherence",
        cmd_bench_coherence,
        help="random sharing on a ring of RTL cards, checked",
        description="Random loads and stores on a hot set from every card, checked "
        "for coherence; latency distribution and protocol events.",
    )
    add_nodes_option(coh, 8, "cards in the ring")
    coh.add_argument("--ops", type=positive, default=10_000, help="accesses per card (default 10000)")
    coh.add_argument("--seed", type=int, default=1)
    coh.add_argument("--flip-rate", type=probability, default=0.0, help="ring bit errors per symbol")
    coh.add_argument(
        "--ring-drop",
        type=probability,
        default=0.0,
        metavar="P",
        help="probability that a ring packet (echoes too) is lost",
    )
    coh.add_argument(
        "--ring-duplicate",
        type=probability,
        default=0.0,
        metavar="P",
        help="probability that a ring packet arrives twice (each hop then holds a packet's copy)",
    )
    coh.add_argument("--numa", action="store_true", help="NUMA mode (no network cache)")
    add_microcode_only_option(coh)
    coh.add_argument(
        "--line-bytes",
        type=int,
        choices=LINE_SIZES,
        default=LINE_BYTES,
        help=f"the cards' line size (default {LINE_BYTES}, as in the paper)",
    )
    add_out_option(coh, "results/coherence")
    add_spread_options(coh)
    pro = command(
        benches,
        "protocol",
        cmd_bench_protocol,
        help="exhaustive check of the SCI microcode: every interleaving on one line",
        description="Explore every interleaving of model cards running the SCI microcode on one "
        "shared line: each host's reads, writes and flushes, any delivery order, NACKs and "
        "retries. Every state is checked (coherence, list structure, protocol errors), and "
        "every state must still be able to finish (no deadlock, no livelock). The default, "
        "3 nodes with 2 operations each, takes 5-10 minutes and 1 GB.",
    )
    pro.add_argument("--nodes", type=ring_size(2), default=3, help="cards sharing the line (default 3)")
    pro.add_argument("--home", type=count, default=0, help="the node whose memory holds the line (default 0)")
    pro.add_argument(
        "--ops",
        type=counts,
        default=None,
        metavar="N,N,...",
        help="host operations of each node, comma-separated (0: the node only answers; default 2 each)",
    )
    pro.add_argument(
        "--kinds",
        type=list_of(str, KINDS, "kind of operation"),
        default=list(KINDS),
        help="what an operation may be, every choice explored (default read,write,flush)",
    )
    pro.add_argument("--ordered", action="store_true", help="keep per (source, target) order (default: any order)")
    pro.add_argument("--max-states", type=positive, default=None, help="stop beyond this many states (no verdict then)")
    add_cache_at_option(pro, "explored cards (second: every read miss is explored both ways)")
    add_out_option(pro, "results/protocol")
    spl = command(
        benches,
        "splash2",
        cmd_bench_splash2,
        help="SPLASH-2 LU, FFT, Ocean, Barnes on 1-8 cards (the paper's Tables 3-6, Fig. 6)",
        description="Run the SPLASH-2 kernels with P processes, record their shared-memory accesses as "
        "traces (cached under build/splash2), replay them on rings of RTL cards in NCC-NUMA "
        "and NUMA mode, and write the paper's tables: speedups (Table 5), network cache "
        "associativity (Table 4), line size (Table 3), remote/local accesses "
        "(Table 6) and the compute/memory/barrier split (Fig. 6). On 2 cores --size small "
        "takes about 1.5 hours, most of it verilating 8 ring models of 1-8 cards (cached for the "
        "next run; --ways and --line-bytes add more); the paper sizes replay far longer traces.",
    )
    spl.add_argument(
        "--kernels",
        type=list_of(str, tuple(KERNELS), "kernel"),
        default=list(KERNELS),
        help="comma-separated kernels (default lu,fft,ocean,barnes)",
    )
    spl.add_argument(
        "--nodes",
        type=list_of(int, (1, 2, 4, 8, 16), "node count"),
        default=[1, 2, 4, 8],
        help="ring sizes, comma-separated from 1,2,4,8,16 (default 1,2,4,8; 1 is always run)",
    )
    spl.add_argument(
        "--modes",
        type=list_of(str, ("ncc", "numa"), "mode"),
        default=["ncc", "numa"],
        help="ncc (network cache on) and/or numa (off) (default ncc,numa)",
    )
    spl.add_argument(
        "--size",
        choices=["small", "paper"],
        default="paper",
        help="problem sizes: the paper's (LU 256x256, FFT 1024, Ocean 66x66, Barnes 4K) or small ones (default paper)",
    )
    spl.add_argument(
        "--ways",
        type=list_of(int, (1, 2, 4, 8), "way count"),
        default=[1, 2, 4],
        help="network cache associativities for Table 4, equal capacity (default 1,2,4; give 4 to skip the table)",
    )
    spl.add_argument(
        "--line-bytes",
        type=list_of(int, LINE_SIZES, "line size"),
        default=[32, 64],
        help="line sizes for Table 3, direct-mapped at equal capacity (default 32,64; give 64 to skip the table)",
    )
    spl.add_argument(
        "--placement",
        choices=list(PLACEMENTS),
        default="paper",
        help="paper: data only its own node touches in host memory (Ocean, FFT), as the "
        "paper; shared: everything in the cards' shared memory (default paper)",
    )
    spl.add_argument(
        "--access",
        choices=["line", "double"],
        default="line",
        help="host access granularity: line (bursts of up to 16 words within a 64-byte line) "
        "or double (one 2-word access per double, as the paper's CPU on uncached PCI) "
        "(default line)",
    )
    spl.add_argument(
        "--ns-per-op",
        type=positive_float,
        default=2.5,
        metavar="NS",
        help="host compute per counted operation (default 2.5: an 800 MHz Pentium III)",
    )
    add_cache_at_option(spl)
    add_out_option(spl, "results/splash2")
    add_spread_options(spl)

    st = command(
        benches,
        "stream",
        cmd_bench_stream,
        help="STREAM-style bandwidth of private, home and remote memory",
        description="Copy, Scale, Add and Triad streamed by node 0's host port in line "
        "bursts over arrays in private memory, the node's own shared slice and "
        "a remote slice (NCC-NUMA and NUMA), timed by the RTL's cycle stamps.",
    )
    st.add_argument(
        "--array-bytes",
        type=size,
        default=4096,
        help="bytes per array, a multiple of 64 (default 4096: all three fit the network cache)",
    )
    st.add_argument("--passes", type=positive, default=4, help="passes of each kernel (default 4)")
    add_out_option(st, "results/stream")
    add_spread_options(st)

    sh = command(
        benches,
        "shm",
        cmd_bench_shm,
        help="NetPIPE-style sweep over shared memory: remote loads and stores",
        description="Messages of 4 bytes up to --max-size moved between node 0 and node 1's "
        "slice by remote loads and stores, NCC-NUMA and NUMA, timed by the RTL's "
        "cycle stamps.",
    )
    sh.add_argument("--max-size", type=size, default=16 * 1024, help="largest message (default 16k)")
    add_out_option(sh, "results/shm")
    add_firmware_option(
        sh,
        default=None,
        default_says="given any, the sweep runs on two complete nodes booted with it; by default on two cards alone",
    )
    add_spread_options(sh)

    v = command(
        benches,
        "via",
        cmd_bench_via,
        help="NetPIPE-style sweep of the VIA engine (send/receive, RDMA write, RDMA read)",
        description="Latency and bandwidth of the VIA engine between two simulated nodes, "
        "measured by the firmware's benchmark agents with the card's cycle counter. "
        "Writes via_bench.{md,csv,json,png} to --out.",
    )
    ops = ("send", "write", "read", "send-stream", "write-stream")
    v.add_argument(
        "--ops",
        type=list_of(str, ops, "operation"),
        default=list(via.SweepOptions.ops),
        help="operations, comma separated: ping-pongs send, write, read and streams send-stream, "
        "write-stream (default all)",
    )
    v.add_argument(
        "--mtu",
        type=list_of(mtu, what="MTU"),
        default=list(via.SweepOptions.mtu),
        help=f"MTUs, comma separated (default {','.join(map(str, via.SweepOptions.mtu))})",
    )
    v.add_argument("--min-size", type=size, default=4, help="smallest message (default 4)")
    v.add_argument("--max-size", type=size, default=1024 * 1024, help="largest message (default 1Mi)")
    v.add_argument(
        "--perturbation",
        type=size,
        default=0,
        help="also measure each power of two +- this many bytes (NetPIPE style; default 0)",
    )
    v.add_argument(
        "--iterations",
        type=positive,
        default=via.SweepOptions.iterations,
        help="round trips per point for small messages (large ones use fewer, at least 2; "
        f"default {via.SweepOptions.iterations})",
    )
    add_eth_delay_option(v)
    add_nodes_option(v, 2, "nodes in the ring, all on one Ethernet switch", minimum=2)
    default_pair = ",".join(map(str, via.SweepOptions.pair))
    v.add_argument(
        "--pair",
        type=list_of(int, what="node"),
        default=list(via.SweepOptions.pair),
        metavar="A,B",
        help=f"the two nodes measured: A initiates, B responds (default {default_pair})",
    )
    v.add_argument(
        "--timeout",
        type=float,
        default=via.SweepOptions.timeout,
        metavar="SECONDS",
        help=f"wall-time limit for one measurement (default {via.SweepOptions.timeout:g})",
    )
    v.add_argument(
        "--baseline",
        metavar="FILE",
        help="an earlier run's via_bench.json: its latency breakdown is shown beside this run's",
    )
    v.add_argument(
        "--wake",
        choices=via.WAKES,
        default=via.SweepOptions.wake,
        help="how send/receive waits for its receives: poll their descriptors (default), or sleep "
        "until the receive queue's completion queue notifies (the card's interrupt under Zephyr; "
        "bare metal polls the card's notification register)",
    )
    v.add_argument(
        "--stream-vis",
        type=positive,
        default=via.SweepOptions.stream_vis,
        metavar="N",
        help=f"VIs each stream spreads its messages over, in turn, --stream-depth in flight on each "
        f"(default {via.SweepOptions.stream_vis}; at most --vis)",
    )
    v.add_argument(
        "--stream-depth",
        type=integer_in(1, via_mailbox.BENCH_STREAM_DEPTH),
        default=via.SweepOptions.stream_depth,
        metavar="N",
        help=f"a stream's messages in flight on each of its VIs (default and most "
        f"{via_mailbox.BENCH_STREAM_DEPTH}): the window is N x --stream-vis messages",
    )
    v.add_argument(
        "--vis",
        type=positive,
        default=via.SweepOptions.vis,
        metavar="N",
        help=f"VIs each simulated card builds (default {via.SweepOptions.vis}, at most {regmap.VI_CAPACITY})",
    )
    add_out_option(v, str(via.SweepOptions.out), "output folder")
    add_firmware_option(v)
    add_spread_options(v)
    pp = command(
        benches,
        "pushpull",
        cmd_bench_pushpull,
        help="push-pull messaging: original vs advanced scheme over VIA",
        description="Ping-pong and one-way latency of the push-pull library (firmware, on the "
        "VIA engine) between two simulated nodes, original and advanced scheme, "
        "swept over message size and bytes_to_push, beside plain send/receive and "
        "RDMA write; card cycle counters. Writes pushpull_bench.{csv,md,json,png} "
        "to --out.",
    )
    pp.add_argument(
        "--schemes",
        type=list_of(str, ("original", "advanced"), "scheme"),
        default=["original", "advanced"],
        help="schemes, comma separated (default original,advanced)",
    )
    pp.add_argument(
        "--thresholds",
        type=list_of(size, what="bytes_to_push"),
        default=[64, 512, 2048],
        help="bytes_to_push values, comma separated, 0..2048 (default 64,512,2048)",
    )
    pp.add_argument("--min-size", type=size, default=1, help="smallest message (default 1)")
    pp.add_argument("--max-size", type=size, default=64 * 1024, help="largest message (default 64Ki)")
    pp.add_argument(
        "--iterations",
        type=positive,
        default=10,
        help="round trips per point for small messages (large ones use fewer, at least 2)",
    )
    pp.add_argument(
        "--warmup",
        type=count,
        default=2,
        metavar="N",
        help="untimed round trips before each point, push-pull and baselines alike, so its first "
        "(cold-cache) round trip is not in the figure (default 2; 0: none)",
    )
    pp.add_argument(
        "--baselines",
        type=list_of(str, ("send", "write"), "baseline"),
        default=["send", "write"],
        help="plain VIA ping-pongs to compare with, comma separated (default send,write)",
    )
    pp.add_argument("--no-baselines", dest="baselines", action="store_const", const=[], help="measure push-pull only")
    pp.add_argument("--mtu", type=mtu, default=1500, help="MTU (default 1500)")
    add_eth_delay_option(pp)
    pp.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="wall-time limit for one measurement (default 900)",
    )
    add_out_option(pp, "results/pushpull", "output folder")
    add_firmware_option(pp)
    add_spread_options(pp)
    ss = command(
        benches,
        "sim-speed",
        cmd_bench_sim_speed,
        help="how fast the ring simulation runs, against ring size and spread",
        description="Boot rings of full nodes (and run the card bench) for a fixed number of "
        "cycles, in 1..P processes and MPI ranks, and report simulated cycles per "
        "second, node-cycles per second per core and the model's build time.",
    )
    ss.add_argument(
        "--nodes",
        type=list_of(int, what="ring size"),
        default=[2, 4, 8, 16],
        help="ring sizes, comma separated (default 2,4,8,16; at most 64)",
    )
    ss.add_argument(
        "--procs",
        type=list_of(int, what="process count"),
        default=[1, 2],
        help="process counts, comma separated (default 1,2)",
    )
    ss.add_argument(
        "--mpi-ranks",
        type=list_of(int, what="rank count"),
        default=[],
        help="MPI rank counts, comma separated (default none)",
    )
    ss.add_argument("--cycles", type=positive, default=200_000, help="cycles per run (default 200000)")
    ss.add_argument(
        "--card-accesses",
        type=count,
        default=None,
        metavar="N",
        help="random accesses per card in the card-bench runs (default: as many as keep a 64-card "
        "run to minutes; the results say how many); 0 leaves them out",
    )
    add_out_option(ss, "results/sim_speed")
    bo = command(
        benches,
        "boot",
        cmd_bench_boot,
        help="firmware image size and boot time (cycles to ready)",
        description="For each firmware, its image size (text, data, bss) and the cycles "
        "from reset to every node's ready line on a ring. Writes "
        "boot.{md,csv,json} to --out.",
    )
    bo.add_argument(
        "--firmware",
        type=firmware_list,
        default=["bare-metal"],
        metavar="FIRMWARES",
        help="comma-separated firmwares (bare-metal, zephyr, zephyr-shell, zephyr=PATH; default "
        "bare-metal; the Zephyr ones need $ZEPHYR_BASE, docs/zephyr.md)",
    )
    add_nodes_option(bo, 2, "nodes in the ring")
    add_out_option(bo, "results/boot")
    add_spread_options(bo)
    pci = command(
        benches,
        "pcie",
        cmd_bench_pcie,
        help="the PCIe endpoint: BAR round trips, DMA latency and throughput",
        description="Amaranth simulation of the PCIe endpoint at the transaction layer "
        "against a host that answers at once; x1 Gen1/Gen2 equivalents.",
    )
    add_out_option(pci, "results/pcie")
