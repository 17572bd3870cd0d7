"""``numavia sim``: build (cached) and run the cycle-accurate ring, or serve it to host tools."""

import os
from pathlib import Path

from numavia.base import buildcache, trace
from numavia.base.coherence import CACHE_AT
from numavia.cluster_session import free_port_range
from numavia.session import Session, regions_from_csr_json
from numavia.soc import sim

from .common import (
    add_cache_at_option,
    add_cpu_variant_option,
    add_firmware_option,
    add_nodes_option,
    add_spread_options,
    checking,
    command,
    count,
    log,
    positive,
    spread,
)

CONSOLE_PORTS_FROM = 2345


def cmd_sim(args):
    with checking(args):
        config = sim.SimConfig(nodes=args.nodes, cpu_variant=args.cpu_variant, via=not args.no_via)
    run_spread = spread(args, config.nodes)
    if args.console is not None and not args.serve:
        args.parser.error("--console goes with --serve (the ring keeps running while you type)")
    if args.console is not None and args.console >= config.nodes:
        args.parser.error(f"--console {args.console}: the ring has nodes 0..{config.nodes - 1}")
    if args.trace_dir:
        _check_traces(Path(args.trace_dir), config.nodes)
    build = sim.build_all(config, log=log, spread=run_spread, firmware=args.firmware)
    run_dir = Path(args.out or buildcache.build_root() / "run" / f"sim-{config.nodes}")
    if args.serve:
        return _serve(build, run_dir, args, run_spread)
    log(
        f'running {config.nodes} node(s) in {run_spread}; stops when every node prints "{sim.READY_MARKER}"'
        + (f" or after {args.max_cycles} cycles" if args.max_cycles else "")
        + (f" or {args.wall_limit} s" if args.wall_limit else "")
    )
    code, summary = sim.run(
        build,
        run_dir,
        run_spread,
        max_cycles=args.max_cycles,
        wall_limit=args.wall_limit,
        quiet=args.quiet,
        progress=args.progress,
        trace_dir=args.trace_dir,
        numa=args.numa,
        cache_first_miss=CACHE_AT[args.cache_at],
        access_log=args.access_log,
    )
    if summary is None:
        raise sim.SimError(f"the simulator exited with status {code} and wrote no results")
    mhz = config.sys_clk_freq / 1e6
    for node, cycle in enumerate(summary["marker_cycles"]):
        state = f"ready at cycle {cycle} ({cycle / mhz:.1f} us)" if cycle is not None else "not ready"
        print(f"  node {node}: {state}")
    for t in summary.get("trace", []):
        print(
            f"  node {t['node']} trace: {t['accesses']} accesses in {t['finished']} cycles "
            f"(compute {t['compute']}, memory {t['memory']}, barriers {t['barrier']}, errors {t['errors']})"
        )
    print(
        f"  {summary['cycles']} cycles in {summary['wall_seconds']:.2f} s wall "
        f"({summary['cycles_per_second']:.0f} cycles/s, {summary['node_cycles_per_second']:.0f} node-cycles/s); "
        f"{summary['reason']}; logs in {run_dir}"
    )
    if code != 0:
        missing = [str(n) for n, c in enumerate(summary["marker_cycles"]) if c is None]
        raise sim.SimError(
            f"{sim.EXIT_REASONS.get(code, f'simulator exit status {code}')}"
            + (f'; node(s) {", ".join(missing)} never printed "{sim.READY_MARKER}"' if missing else "")
        )
    return 0


def _check_traces(folder, nodes):
    for i in range(nodes):
        path = folder / f"node{i}.trace"
        if not path.exists():
            raise trace.TraceError(f"{path} is missing: a trace per node is needed")
        node, _ = trace.read_trace(path)
        if node != i:
            raise trace.TraceError(f"{path} is node {node}'s trace")


def _serve(build, run_dir, args, run_spread):
    """Run with host bridges until Ctrl-C or the last host disconnects; tools attach meanwhile."""
    nodes = build.config.nodes
    console_port = args.console_port or free_port_range(nodes, start=CONSOLE_PORTS_FROM)
    ring = sim.start(
        build,
        run_dir,
        run_spread,
        bridge_port=args.bridge_port,
        serve=True,
        until_disconnect=args.until_disconnect,
        quiet=args.quiet,
        numa=args.numa,
        cache_first_miss=CACHE_AT[args.cache_at],
        console_port=console_port,
        console_stdin=args.console,
    )
    session = Session(
        os.getpid(), nodes, args.bridge_port, regions_from_csr_json(build.soc_dir / "csr.json"), console_port
    )
    session.save()
    log(
        f"serving {nodes} node(s): host bridges on 127.0.0.1:{args.bridge_port}.., consoles on "
        f"127.0.0.1:{console_port}..; `numavia mem`/`status`/`console` attach"
        + (f"; what you type goes to node {args.console}" if args.console is not None else "")
        + "; Ctrl-C stops"
    )
    try:
        code = ring.wait()
    except KeyboardInterrupt:
        code = ring.terminate()
    finally:
        Session.remove()
    sim.summarize(ring)
    if ring.failure:
        raise sim.SimError(ring.failure)
    return 0 if code in (0, 130) else code


def register(sub):
    p = command(
        sub,
        "sim",
        cmd_sim,
        help="build (cached) and run the cycle-accurate ring simulation",
        description="Build the SoC, firmware and Verilator model (all cached under "
        "build/), boot N nodes and stream their consoles.",
    )
    add_nodes_option(p, 2, "number of nodes in the ring")
    p.add_argument(
        "--max-cycles",
        type=positive,
        default=50_000_000,
        help="stop after this many cycles if not every node is ready (default 50M)",
    )
    p.add_argument("--wall-limit", type=float, default=None, metavar="SECONDS", help="stop after this much wall time")
    add_cpu_variant_option(p)
    p.add_argument("--out", help="run folder for console logs and run.json (default build/run/sim-N)")
    p.add_argument("--quiet", action="store_true", help="do not echo the node consoles")
    p.add_argument(
        "--progress",
        type=positive,
        default=1_000_000,
        metavar="CYCLES",
        help="print a progress line (cycles, cycles/s, slowest node) each time the slowest node "
        "passes a multiple of CYCLES (default 1M)",
    )
    p.add_argument(
        "--trace-dir",
        help="replay node<i>.trace (numavia.base.trace) on each node's host port "
        "once every node is ready; stop when all are done",
    )
    p.add_argument(
        "--access-log",
        metavar="FILE",
        help="with --trace-dir: log every replayed access (node addr write value issued done error)",
    )
    p.add_argument(
        "--numa", action="store_true", help="set every card's NUMA switch: the firmware turns the network cache off"
    )
    add_cache_at_option(p, "cards (a board switch the firmware applies at boot)")
    p.add_argument(
        "--no-via",
        action="store_true",
        help="build the cards without the VIA engine, as small FPGAs do (shared memory only)",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="keep running with a host bridge per node (numavia mem/status attach) until Ctrl-C",
    )
    p.add_argument(
        "--until-disconnect",
        action="store_true",
        help="with --serve: also stop when the last host that connected disconnects",
    )
    p.add_argument(
        "--bridge-port",
        type=positive,
        default=1234,
        help="TCP port of node 0's host bridge; node i listens on PORT + i (default 1234)",
    )
    p.add_argument(
        "--console-port",
        type=positive,
        default=None,
        help="with --serve: TCP port of node 0's console (numavia console); node i's is PORT + i "
        f"(default: the first free range from {CONSOLE_PORTS_FROM})",
    )
    p.add_argument(
        "--console",
        type=count,
        metavar="NODE",
        help="with --serve: what you type goes to node NODE's console (its shell, with --firmware zephyr-shell)",
    )
    add_firmware_option(p)
    add_spread_options(p)
