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
    if args.trace_dir:
        _check_traces(Path(args.trace_dir), config.nodes)
    build = sim.build_all(config, log=_log)
    run_dir = Path(args.out or buildcache.build_root() / "run" / f"sim-{config.nodes}")
    if args.serve:
        return _serve(build, run_dir, args)
    _log(f"running {config.nodes} node(s); stops when every node prints \"{sim.READY_MARKER}\""
         + (f" or after {args.max_cycles} cycles" if args.max_cycles else "")
         + (f" or {args.wall_limit} s" if args.wall_limit else ""))
    code, summary = sim.run(build, run_dir, max_cycles=args.max_cycles, wall_limit=args.wall_limit,
                            quiet=args.quiet, progress=args.progress, trace_dir=args.trace_dir,
                            numa=args.numa, access_log=args.access_log)
    if summary is None:
        raise sim.SimError(f"the simulator exited with status {code} and wrote no run.json")
    mhz = config.sys_clk_freq / 1e6
    for node, cycle in enumerate(summary["marker_cycles"]):
        state = f"ready at cycle {cycle} ({cycle / mhz:.1f} us)" if cycle is not None else "not ready"
        print(f"  node {node}: {state}")
    for t in summary.get("trace", []):
        print(f"  node {t['node']} trace: {t['accesses']} accesses in {t['finished']} cycles "
              f"(compute {t['compute']}, memory {t['memory']}, barriers {t['barrier']}, errors {t['errors']})")
    print(f"  {summary['cycles']} cycles in {summary['wall_seconds']:.2f} s wall "
          f"({summary['cycles_per_second']:.0f} cycles/s); logs in {run_dir}")
    if code != 0:
        missing = [str(n) for n, c in enumerate(summary["marker_cycles"]) if c is None]
        raise sim.SimError(f"{sim.EXIT_REASONS.get(code, f'simulator exit status {code}')}"
                           + (f"; node(s) {', '.join(missing)} never printed \"{sim.READY_MARKER}\""
                              if missing else ""))
    return 0


def _check_traces(folder, nodes):
    from numavia import trace
    for i in range(nodes):
        path = folder / f"node{i}.trace"
        if not path.exists():
            raise trace.TraceError(f"{path} is missing: a trace per node is needed")
        node, _ = trace.read_trace(path)
        if node != i:
            raise trace.TraceError(f"{path} is node {node}'s trace")


def _serve(build, run_dir, args):
    """Run with host bridges until Ctrl-C or the last host disconnects; tools attach meanwhile."""
    import subprocess
    from numavia.session import Session, regions_from_csr_json
    from numavia.soc import sim
    sim.prepare_run(run_dir, build.soc_dir, build.firmware)
    cmd = sim.harness_command(build.model, run_dir, bridge_port=args.bridge_port, serve=True,
                              until_disconnect=args.until_disconnect, quiet=args.quiet, numa=args.numa,
                              stop_marker=sim.READY_MARKER)
    proc = subprocess.Popen(cmd, cwd=run_dir)
    session = Session(proc.pid, build.config.nodes, args.bridge_port,
                      regions_from_csr_json(build.soc_dir / "csr.json"))
    session.save()
    _log(f"serving {build.config.nodes} node(s) on 127.0.0.1:{args.bridge_port}..; "
         f"`numavia mem`/`numavia status` attach; Ctrl-C stops")
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        code = proc.wait()
    finally:
        Session.remove()
    return 0 if code in (0, 130, -15) else code


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
    p.add_argument("--trace-dir", help="replay node<i>.trace (numavia.trace) on each node's host port "
                                       "once every node is ready; stop when all are done")
    p.add_argument("--access-log", metavar="FILE",
                   help="with --trace-dir: log every replayed access (node addr write value issued done error)")
    p.add_argument("--numa", action="store_true",
                   help="set every card's NUMA switch: the firmware turns the network cache off")
    p.add_argument("--serve", action="store_true",
                   help="keep running with a host bridge per node (numavia mem/status attach) until Ctrl-C")
    p.add_argument("--until-disconnect", action="store_true",
                   help="with --serve: also stop when the last host that connected disconnects")
    p.add_argument("--bridge-port", type=_positive, default=1234,
                   help="TCP port of node 0's host bridge; node i listens on PORT + i (default 1234)")
    p.set_defaults(func=cmd_sim)


# --- numavia mem / status ---------------------------------------------------------------------

def _address(text):
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an address") from None


def cmd_mem(args):
    from numavia.session import Session
    session = Session.load()
    count = 1 if args.op == "write" else args.count
    session.check_address(args.node, args.addr, 4 * count)
    with session.bridge(args.node) as bridge:
        if args.op == "read":
            for i, word in enumerate(bridge.read(args.addr, count)):
                print(f"{args.addr + 4 * i:#010x}: {word:#010x}")
        else:
            if args.value is None:
                raise argparse.ArgumentTypeError("write needs a VALUE")
            bridge.write(args.addr, args.value & 0xFFFFFFFF)
    return 0


def _add_mem(sub):
    p = sub.add_parser("mem", help="read or write a node's memory map through its host bridge",
                       description="Attach to `numavia sim --serve` and access a node's SoC bus: "
                                   "registers, RAM, or the shared window (which goes through the card).")
    p.add_argument("op", choices=["read", "write"])
    p.add_argument("addr", type=_address, metavar="ADDR")
    p.add_argument("value", type=_address, nargs="?", metavar="VALUE")
    p.add_argument("--node", type=int, default=0, help="node to access (default 0)")
    p.add_argument("--count", type=_positive, default=1, help="words to read (default 1)")
    p.set_defaults(func=cmd_mem)


STATUS_COUNTERS = [("lac", "ACCESSES"), ("lac", "CACHE_READ_HITS"), ("lac", "READ_MISSES"),
                   ("lac", "WRITE_MISSES"), ("lac", "ERRORS"), ("rac", "RUNS"), ("rac", "NACKS_SENT"),
                   ("rac", "PROTOCOL_ERRORS"), ("ring", "TX_PACKETS"), ("ring", "RX_PACKETS"),
                   ("ring", "CRC_ERRORS"), ("ring", "TIMEOUTS")]


def cmd_status(args):
    from numavia.results import markdown_table
    from numavia.session import Session, read_card
    from numavia.gateware import regmap
    session = Session.load()
    headers = ["node", "id", "ready", "microcode", "numa"] + [f"{b}.{r}" for b, r in STATUS_COUNTERS]
    rows = []
    for node in range(session.nodes):
        with session.bridge(node) as bridge:
            read = lambda block, reg: read_card(bridge, session, block, reg)
            ctrl = read("ctrl", "CTRL")
            numa = ctrl & regmap.CTRL.register("CTRL").field("NUMA_MODE").mask
            rows.append([node, read("ctrl", "NODE_ID"),
                         "yes" if read("ctrl", "STATUS") & 1 else "no",
                         "loaded" if read("rac", "STATUS") & 1 else "not loaded",
                         "on" if numa else "off"] + [read(b, r) for b, r in STATUS_COUNTERS])
    print(markdown_table(headers, rows), end="")
    return 0


def _add_status(sub):
    p = sub.add_parser("status", help="node ids, microcode, mode and counters of every node",
                       description="Attach to `numavia sim --serve` and read every card's state.")
    p.set_defaults(func=cmd_status)


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


def cmd_bench_pcie(args):
    from numavia.bench import pcie
    out = Path(args.out)
    _log("simulating the PCIe endpoint")
    print(pcie.report(pcie.measure(), out))
    _log(f"results in {out}/pcie.{{md,csv,json,png}}")
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
    pci = benches.add_parser("pcie", help="the PCIe endpoint: BAR round trips, DMA latency and throughput",
                             description="Amaranth simulation of the PCIe endpoint at the transaction layer "
                                         "against a host that answers at once; x1 Gen1/Gen2 equivalents.")
    pci.add_argument("--out", default="results/pcie", help="results folder (default results/pcie)")
    pci.set_defaults(func=cmd_bench_pcie)


# --- numavia demo --------------------------------------------------------------------------------

def cmd_demo(args):
    from numavia.demo import Demo
    if args.nodes < 2:
        raise NumaviaError("the demo needs a ring: --nodes 2 or more")
    Demo(nodes=args.nodes, out=Path(args.out), log=_log).run()
    return 0


def _add_demo(sub):
    from numavia.demo import DEFAULT_NODES
    p = sub.add_parser("demo", help="the main job: build and boot a ring, measure latency and kernels, report",
                       description="Build (cached) and boot a ring of full nodes in one cycle-accurate model, "
                                   "then measure the Table 1 latency set and shared-memory kernels in "
                                   "NCC-NUMA and NUMA mode; write a report with tables and PNG plots.")
    p.add_argument("--nodes", type=_positive, default=DEFAULT_NODES,
                   help=f"nodes in the ring (default {DEFAULT_NODES})")
    p.add_argument("--out", default="results/demo", help="report folder (default results/demo)")
    p.set_defaults(func=cmd_demo)


# --- entry point -----------------------------------------------------------------------------

def make_parser():
    parser = _Parser(prog="numavia",
                     description="Numavia cluster interconnect: simulation, host tools, benchmarks.")
    parser.add_argument("--version", action="version", version=f"numavia {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    _add_sim(sub)
    _add_firmware(sub)
    _add_mem(sub)
    _add_status(sub)
    _add_bench(sub)
    _add_demo(sub)
    return parser


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except argparse.ArgumentTypeError as e:
        parser.exit(2, f"numavia: error: {e}\n")
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    except NumaviaError as e:   # every expected failure ends in one line saying what went wrong
        print(f"numavia: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
