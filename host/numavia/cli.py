"""The ``numavia`` command line."""

import argparse
import sys
from pathlib import Path

from numavia import __version__, buildcache
from numavia.errors import NumaviaError


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _log(message):
    print(f"numavia: {message}", file=sys.stderr, flush=True)


def _positive(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _list_of(convert, allowed=None, what="value"):
    """A comma-separated list for argparse; each item converted and, if given, among ``allowed``."""
    def parse(text):
        items = []
        for item in text.split(","):
            try:
                value = convert(item.strip())
            except (ValueError, argparse.ArgumentTypeError):
                raise argparse.ArgumentTypeError(f"{item.strip()!r} is not a valid {what}") from None
            if allowed is not None and value not in allowed:
                raise argparse.ArgumentTypeError(
                    f"{item.strip()!r} is not a {what} (choose from {', '.join(map(str, allowed))})")
            items.append(value)
        if not items or len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"{text!r}: give distinct {what}s, separated by commas")
        return items
    return parse


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


# --- numavia sim ----------------------------------------------------------------------------------

def cmd_sim(args):
    from numavia.soc import sim

    config = sim.SimConfig(nodes=args.nodes, cpu_variant=args.cpu_variant)
    build = sim.build_all(config, log=_log)
    run_dir = Path(args.out or buildcache.build_root() / "run" / f"sim-{config.nodes}")
    _log(f"running {config.nodes} node(s); stops when every node prints \"{sim.READY_MARKER}\""
         + (f" or after {args.max_cycles} cycles" if args.max_cycles else "")
         + (f" or {args.wall_limit} s" if args.wall_limit else ""))
    code, summary = sim.run(build, run_dir, max_cycles=args.max_cycles, wall_limit=args.wall_limit,
                            quiet=args.quiet, progress=args.progress)
    if summary is None:
        raise sim.SimError(f"the simulator exited with status {code} and wrote no run.json")
    mhz = config.sys_clk_freq / 1e6
    for node, cycle in enumerate(summary["marker_cycles"]):
        state = f"ready at cycle {cycle} ({cycle / mhz:.1f} us)" if cycle is not None else "not ready"
        print(f"  node {node}: {state}")
    print(f"  {summary['cycles']} cycles in {summary['wall_seconds']:.2f} s wall "
          f"({summary['cycles_per_second']:.0f} cycles/s); logs in {run_dir}")
    if code != 0:
        missing = [str(n) for n, c in enumerate(summary["marker_cycles"]) if c is None]
        raise sim.SimError(f"{sim.EXIT_REASONS.get(code, f'simulator exit status {code}')}"
                           + (f"; node(s) {', '.join(missing)} never printed \"{sim.READY_MARKER}\""
                              if missing else ""))
    return 0


def _add_sim(sub):
    p = sub.add_parser("sim", help="build (cached) and run the cycle-accurate ring simulation",
                       description="Build the SoC, firmware and Verilator model (all cached under "
                                   "build/), boot N nodes and stream their consoles.")
    p.add_argument("--nodes", type=_positive, default=2, help="number of nodes in the ring (default 2)")
    p.add_argument("--max-cycles", type=_positive, default=50_000_000,
                   help="stop after this many cycles if not every node is ready (default 50M)")
    p.add_argument("--wall-limit", type=float, default=None, metavar="SECONDS",
                   help="stop after this much wall time")
    p.add_argument("--cpu-variant", default="standard", choices=["minimal", "lite", "standard"],
                   help="VexRiscv variant of each node (default standard)")
    p.add_argument("--out", help="run folder for console logs and run.json (default build/run/sim-N)")
    p.add_argument("--quiet", action="store_true", help="do not echo the node consoles")
    p.add_argument("--progress", type=_positive, default=None, metavar="CYCLES",
                   help="print a progress line every CYCLES cycles")
    p.set_defaults(func=cmd_sim)


# --- numavia firmware ---------------------------------------------------------------------------

def cmd_firmware(args):
    from numavia.firmware import build_firmware
    from numavia.soc import sim

    config = sim.SimConfig(cpu_variant=args.cpu_variant)
    soc_dir = sim.build_soc(config, log=_log)
    image = build_firmware(soc_dir, log=_log)
    print(f"{image} ({image.stat().st_size} bytes)")
    return 0


def _add_firmware(sub):
    p = sub.add_parser("firmware", help="build the bare-metal firmware for the simulated SoC",
                       description="Generate the SoC headers if needed and build firmware.bin.")
    p.add_argument("--cpu-variant", default="standard", choices=["minimal", "lite", "standard"])
    p.set_defaults(func=cmd_firmware)


# --- numavia bench -----------------------------------------------------------------------------

def cmd_bench_latency(args):
    from numavia.bench import latency
    out = Path(args.out)
    figures = latency.run(args.nodes, log=_log, out=buildcache.build_root() / "run" / "latency")
    print(latency.report(figures, out))
    _log(f"results in {out}/latency.{{md,csv,json,png}}")
    return 0


def cmd_bench_local_side(args):
    from numavia.bench import local_side
    out = Path(args.out)
    _log("simulating the local side")
    figures = local_side.measure()
    synth = None if args.no_synth else local_side.synthesis(device=args.device, log=_log)
    print(local_side.report(figures, synth, out))
    _log(f"results in {out}/local_side.{{md,csv,json}}")
    return 0


def cmd_bench_coherence(args):
    from numavia.bench import coherence
    from numavia.errors import NumaviaError
    out = Path(args.out)
    figures = coherence.run(args.nodes, args.ops, seed=args.seed, flip_rate=args.flip_rate, numa=args.numa,
                            log=_log)
    print(coherence.report(figures, out))
    _log(f"results in {out}/coherence.{{md,csv,json,png}}")
    if figures["violation_count"] or figures["protocol_errors"]:
        raise NumaviaError(f"{figures['violation_count']} coherence violation(s), "
                           f"{figures['protocol_errors']} protocol error(s): see {out}/coherence.json")
    return 0


def cmd_bench_splash2(args):
    from numavia.bench import splash2
    from numavia.splash2.instrument import CostModel
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NumaviaError(f"the results folder {out} is a file")
    figures = splash2.run(args.kernels, args.nodes, args.modes, size=args.size, ways=args.ways,
                          placement=args.placement, access=args.access, cost=CostModel(ns_per_op=args.ns_per_op),
                          log=_log)
    print(splash2.report(figures, out))
    _log(f"results in {out}/splash2_*.{{md,csv,json}}, splash2_time.png, splash2_speedup.png")
    return 0


def _add_bench(sub):
    p = sub.add_parser("bench", help="benchmarks: figures from the simulated hardware, with the paper's beside them",
                       description="Run a benchmark on the cycle-accurate simulation and write its tables "
                                   "(Markdown, CSV, JSON) and plots (PNG) into a results folder.")
    benches = p.add_subparsers(dest="bench", metavar="BENCHMARK", parser_class=_Parser)
    benches.required = True
    lat = benches.add_parser("latency", help="shared-memory access latencies (the paper's Table 1)",
                             description="Each access alone on a ring of cards, timed by the card's own "
                                         "cycle counter, in NCC-NUMA and NUMA mode.")
    lat.add_argument("--nodes", type=_positive, default=4, help="cards in the ring (default 4)")
    lat.add_argument("--out", default="results/latency", help="results folder (default results/latency)")
    lat.set_defaults(func=cmd_bench_latency)
    loc = benches.add_parser("local-side", help="the local side alone: hits, bursts, hand-off, ECP5 synthesis",
                             description="Amaranth simulation of the local side with its counters, and an "
                                         "out-of-context open ECP5 synthesis.")
    loc.add_argument("--device", default="85k", help="ECP5 device for synthesis (default 85k)")
    loc.add_argument("--no-synth", action="store_true", help="skip the synthesis (minutes)")
    loc.add_argument("--out", default="results/local_side", help="results folder")
    loc.set_defaults(func=cmd_bench_local_side)
    coh = benches.add_parser("coherence", help="random sharing on a ring of RTL cards, checked",
                             description="Random loads and stores on a hot set from every card, checked "
                                         "for coherence; latency distribution and protocol events.")
    coh.add_argument("--nodes", type=_positive, default=8, help="cards in the ring (default 8)")
    coh.add_argument("--ops", type=_positive, default=10_000, help="accesses per card (default 10000)")
    coh.add_argument("--seed", type=int, default=1)
    coh.add_argument("--flip-rate", type=float, default=0.0, help="ring bit errors per symbol")
    coh.add_argument("--numa", action="store_true", help="NUMA mode (no network cache)")
    coh.add_argument("--out", default="results/coherence", help="results folder")
    coh.set_defaults(func=cmd_bench_coherence)
    from numavia.splash2 import KERNELS, PLACEMENTS
    spl = benches.add_parser(
        "splash2", help="SPLASH-2 LU, FFT, Ocean, Barnes on 1-8 cards (the paper's Tables 3-6, Fig. 6)",
        description="Run the SPLASH-2 kernels with P processes, record their shared-memory accesses as "
                    "traces (cached under build/splash2), replay them on rings of RTL cards in NCC-NUMA "
                    "and NUMA mode, and write the paper's tables: speedups (Table 5), network cache "
                    "associativity (Table 4), line size (Table 3: not available), remote/local accesses "
                    "(Table 6) and the compute/memory/barrier split (Fig. 6). The full paper-size run "
                    "takes a few hours on 2 cores; --size small takes minutes.")
    spl.add_argument("--kernels", type=_list_of(str, tuple(KERNELS), "kernel"), default=list(KERNELS),
                     help="comma-separated kernels (default lu,fft,ocean,barnes)")
    spl.add_argument("--nodes", type=_list_of(int, (1, 2, 4, 8, 16), "node count"), default=[1, 2, 4, 8],
                     help="ring sizes, comma-separated from 1,2,4,8,16 (default 1,2,4,8; 1 is always run)")
    spl.add_argument("--modes", type=_list_of(str, ("ncc", "numa"), "mode"), default=["ncc", "numa"],
                     help="ncc (network cache on) and/or numa (off) (default ncc,numa)")
    spl.add_argument("--size", choices=["small", "paper"], default="paper",
                     help="problem sizes: the paper's (LU 256x256, FFT 1024, Ocean 66x66, Barnes 4K) or "
                          "small ones (default paper)")
    spl.add_argument("--ways", type=_list_of(int, (1, 2, 4, 8), "way count"), default=[1, 2, 4],
                     help="network cache associativities for Table 4, equal capacity (default 1,2,4; "
                          "give 4 to skip the table)")
    spl.add_argument("--placement", choices=list(PLACEMENTS), default="paper",
                     help="paper: data only its own node touches in host memory (Ocean, FFT), as the "
                          "paper; shared: everything in the cards' shared memory (default paper)")
    spl.add_argument("--access", choices=["line", "double"], default="line",
                     help="host access granularity: line (bursts of up to 16 words within a 64-byte line) "
                          "or double (one 2-word access per double, as the paper's CPU on uncached PCI) "
                          "(default line)")
    spl.add_argument("--ns-per-op", type=_positive_float, default=2.5, metavar="NS",
                     help="host compute per counted operation (default 2.5: an 800 MHz Pentium III)")
    spl.add_argument("--out", default="results/splash2", help="results folder (default results/splash2)")
    spl.set_defaults(func=cmd_bench_splash2)


# --- entry point -----------------------------------------------------------------------------

def make_parser():
    parser = _Parser(prog="numavia",
                     description="Numavia cluster interconnect: simulation, host tools, benchmarks.")
    parser.add_argument("--version", action="version", version=f"numavia {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _add_sim(sub)
    _add_firmware(sub)
    _add_bench(sub)
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    except NumaviaError as e:   # every expected failure ends in one line saying what went wrong
        print(f"numavia: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
