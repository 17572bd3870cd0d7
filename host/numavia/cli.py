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


# --- numavia bench ------------------------------------------------------------------------------

def _size(text):
    """A byte count: 4096, 0x1000, 64k, 1Mi."""
    units = {"k": 1024, "ki": 1024, "m": 1024 * 1024, "mi": 1024 * 1024}
    t = text.strip().lower()
    for suffix in ("ki", "mi", "k", "m"):
        if t.endswith(suffix):
            t, scale = t[:-len(suffix)], units[suffix]
            break
    else:
        scale = 1
    try:
        value = int(t, 0) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4, 64k, 1Mi)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def _choices_list(choices):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if not items or bad:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(choices)}")
        return items
    return parse


def _mtu_list(text):
    from numavia.gateware import via_frame
    try:
        values = [int(t, 0) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of MTUs") from None
    if not values or any(not via_frame.MTU_MIN <= v <= via_frame.MTU_JUMBO for v in values):
        raise argparse.ArgumentTypeError(f"MTUs must be {via_frame.MTU_MIN}..{via_frame.MTU_JUMBO}")
    return values


def cmd_bench_via(args):
    from numavia import bench_via
    if args.min_size > args.max_size:
        args.parser.error(f"--min-size {args.min_size} is larger than --max-size {args.max_size}")
    if args.max_size > 2 * 1024 * 1024:
        args.parser.error("--max-size is at most 2Mi (the simulated host memory holds 4 MiB)")
    if args.eth_delay < 14:
        args.parser.error("--eth-delay must be at least 14 cycles (the switch reads the destination first)")
    args.command_line = None
    paths = bench_via.main(args, _log)
    for p in paths:
        print(p)
    return 0


def _add_bench(sub):
    p = sub.add_parser("bench", help="benchmarks on the simulated cluster",
                       description="Benchmarks that run on the cycle-accurate simulation.")
    bench = p.add_subparsers(dest="bench", metavar="BENCHMARK", parser_class=_Parser)
    bench.required = True
    v = bench.add_parser("via", help="NetPIPE-style sweep of the VIA engine (send/receive, RDMA write, RDMA read)",
                         description="Latency and bandwidth of the VIA engine between two simulated nodes, "
                                     "measured by the firmware's benchmark agents with the card's cycle counter. "
                                     "Writes via_bench.csv, via_bench.md and via_bench.png to --out.")
    ops = ("send", "write", "read", "send-stream", "write-stream")
    v.add_argument("--ops", type=_choices_list(ops), default=list(ops),
                   help="operations, comma separated: ping-pongs send, write, read and streams send-stream, "
                        "write-stream (default all)")
    v.add_argument("--mtu", type=_mtu_list, default=[1500, 9000], help="MTUs, comma separated (default 1500,9000)")
    v.add_argument("--min-size", type=_size, default=4, help="smallest message (default 4)")
    v.add_argument("--max-size", type=_size, default=1024 * 1024, help="largest message (default 1Mi)")
    v.add_argument("--perturbation", type=_size, default=0,
                   help="also measure each power of two +- this many bytes (NetPIPE style; default 0)")
    v.add_argument("--iterations", type=_positive, default=20,
                   help="round trips per point for small messages (large ones use fewer, at least 2)")
    v.add_argument("--eth-delay", type=_positive, default=50, metavar="CYCLES",
                   help="Ethernet PHY+cable delay in 125 MHz cycles (default 50 = 400 ns)")
    v.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                   help="wall-time limit for one measurement (default 900)")
    v.add_argument("--out", default="results/via", help="output folder (default results/via)")
    v.set_defaults(func=cmd_bench_via, parser=v)


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
