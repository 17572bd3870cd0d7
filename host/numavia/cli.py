"""The ``numavia`` command line."""

import argparse
import signal
import sys
from pathlib import Path

from numavia import __version__
from numavia.base import buildcache
from numavia.base.errors import NumaviaError
from numavia.base.coherence import LINE_BYTES, LINE_SIZES
from numavia.soc.model_top import ETH_MIN_DELAY


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _log(message):
    print(f"numavia: {message}", file=sys.stderr, flush=True)


def _integer_at_least(minimum, what):
    def convert(text):
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} {what}")
        return value
    return convert


_positive = _integer_at_least(1, "must be positive")
_count = _integer_at_least(0, "must not be negative")


def _list_of(convert, allowed=None, what="value"):
    """A comma-separated list for argparse; each item converted and, if given, among ``allowed``."""
    def parse(text):
        items = []
        for item in text.split(","):
            try:
                value = convert(item.strip())
            except ValueError:
                raise argparse.ArgumentTypeError(f"{item.strip()!r} is not a valid {what}") from None
            if allowed is not None and value not in allowed:
                raise argparse.ArgumentTypeError(
                    f"{item.strip()!r} is not a {what} (choose from {', '.join(map(str, allowed))})")
            items.append(value)
        if not items or len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"{text!r}: give distinct {what}s, separated by commas")
        return items
    return parse


def _float_where(accept, requirement):
    """An argparse type: a float for which ``accept(value)`` holds, else '<text> <requirement>'."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} {requirement}")
        return value
    return parse


_positive_float = _float_where(lambda v: v > 0, "must be positive")
_probability = _float_where(lambda v: 0 <= v <= 1, "is not a probability (0 to 1)")


CONSOLE_PORTS_FROM = 2345


def _firmware_choice(text):
    from numavia.soc import firmware
    try:
        firmware.parse_choice(text)
    except firmware.FirmwareError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _add_firmware_option(p, default="bare-metal", default_says="bare-metal, the default"):
    p.add_argument("--firmware", type=_firmware_choice, default=default, metavar="FIRMWARE",
                   help=f"what every node runs: bare-metal ({default_says}), zephyr or zephyr-shell (built "
                        "against $ZEPHYR_BASE, cached), or zephyr=PATH (a zephyr.elf built for this SoC; "
                        "docs/zephyr.md)")


# --- numavia sim ----------------------------------------------------------------------------------

def _spread(args, nodes):
    """The processes or MPI ranks a run's nodes are spread over, from --procs/--mpi/--hostfile."""
    from numavia.soc.ring_launch import Spread, default_procs
    spread = Spread(procs=args.procs or default_procs(nodes), mpi=args.mpi, hostfile=args.hostfile)
    spread.check(nodes)
    return spread


def _add_spread_options(p):
    g = p.add_argument_group("spreading the ring (results do not depend on it)")
    g.add_argument("--procs", type=_positive, default=None, metavar="P",
                   help="processes (or MPI ranks) to run the nodes in (default: one per core, at most one per node)")
    g.add_argument("--mpi", action="store_true", help="run the processes as MPI ranks with mpirun (OpenMPI)")
    g.add_argument("--hostfile", metavar="FILE",
                   help="with --mpi: mpirun's hostfile, to spread the ranks over machines (the run folder "
                        "must be shared between them)")


def cmd_sim(args):
    from numavia.soc import sim

    config = sim.SimConfig(nodes=args.nodes, cpu_variant=args.cpu_variant, via=not args.no_via)
    spread = _spread(args, config.nodes)
    if args.trace_dir:
        _check_traces(Path(args.trace_dir), config.nodes)
    if args.console is not None and not args.serve:
        raise NumaviaError("--console goes with --serve (the ring keeps running while you type)")
    if args.console is not None and args.console >= config.nodes:
        raise NumaviaError(f"--console {args.console}: the ring has nodes 0..{config.nodes - 1}")
    build = sim.build_all(config, log=_log, spread=spread, firmware=args.firmware)
    run_dir = Path(args.out or buildcache.build_root() / "run" / f"sim-{config.nodes}")
    if args.serve:
        return _serve(build, run_dir, args, spread)
    _log(f"running {config.nodes} node(s) in {spread}; stops when every node prints \"{sim.READY_MARKER}\""
         + (f" or after {args.max_cycles} cycles" if args.max_cycles else "")
         + (f" or {args.wall_limit} s" if args.wall_limit else ""))
    code, summary = sim.run(build, run_dir, spread, max_cycles=args.max_cycles, wall_limit=args.wall_limit,
                            quiet=args.quiet, progress=args.progress, trace_dir=args.trace_dir,
                            numa=args.numa, access_log=args.access_log)
    if summary is None:
        raise sim.SimError(f"the simulator exited with status {code} and wrote no results")
    mhz = config.sys_clk_freq / 1e6
    for node, cycle in enumerate(summary["marker_cycles"]):
        state = f"ready at cycle {cycle} ({cycle / mhz:.1f} us)" if cycle is not None else "not ready"
        print(f"  node {node}: {state}")
    for t in summary.get("trace", []):
        print(f"  node {t['node']} trace: {t['accesses']} accesses in {t['finished']} cycles "
              f"(compute {t['compute']}, memory {t['memory']}, barriers {t['barrier']}, errors {t['errors']})")
    print(f"  {summary['cycles']} cycles in {summary['wall_seconds']:.2f} s wall "
          f"({summary['cycles_per_second']:.0f} cycles/s, {summary['node_cycles_per_second']:.0f} node-cycles/s); "
          f"{summary['reason']}; logs in {run_dir}")
    if code != 0:
        missing = [str(n) for n, c in enumerate(summary["marker_cycles"]) if c is None]
        raise sim.SimError(f"{sim.EXIT_REASONS.get(code, f'simulator exit status {code}')}"
                           + (f"; node(s) {', '.join(missing)} never printed \"{sim.READY_MARKER}\""
                              if missing else ""))
    return 0


def _check_traces(folder, nodes):
    from numavia.base import trace
    for i in range(nodes):
        path = folder / f"node{i}.trace"
        if not path.exists():
            raise trace.TraceError(f"{path} is missing: a trace per node is needed")
        node, _ = trace.read_trace(path)
        if node != i:
            raise trace.TraceError(f"{path} is node {node}'s trace")


def _serve(build, run_dir, args, spread):
    """Run with host bridges until Ctrl-C or the last host disconnects; tools attach meanwhile."""
    import os
    from numavia.session import Session, regions_from_csr_json
    from numavia.soc import sim
    from numavia.cluster_session import free_port_range
    nodes = build.config.nodes
    console_port = args.console_port or free_port_range(nodes, start=CONSOLE_PORTS_FROM)
    ring = sim.start(build, run_dir, spread, bridge_port=args.bridge_port, serve=True,
                     until_disconnect=args.until_disconnect, quiet=args.quiet, numa=args.numa,
                     console_port=console_port, console_stdin=args.console)
    session = Session(os.getpid(), nodes, args.bridge_port, regions_from_csr_json(build.soc_dir / "csr.json"),
                      console_port)
    session.save()
    _log(f"serving {nodes} node(s): host bridges on 127.0.0.1:{args.bridge_port}.., consoles on "
         f"127.0.0.1:{console_port}..; `numavia mem`/`status`/`console` attach"
         + (f"; what you type goes to node {args.console}" if args.console is not None else "")
         + "; Ctrl-C stops")
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
    p.add_argument("--progress", type=_positive, default=1_000_000, metavar="CYCLES",
                   help="print a progress line (cycles, cycles/s, slowest node) each time the slowest node "
                        "passes a multiple of CYCLES (default 1M)")
    p.add_argument("--trace-dir", help="replay node<i>.trace (numavia.base.trace) on each node's host port "
                                       "once every node is ready; stop when all are done")
    p.add_argument("--access-log", metavar="FILE",
                   help="with --trace-dir: log every replayed access (node addr write value issued done error)")
    p.add_argument("--numa", action="store_true",
                   help="set every card's NUMA switch: the firmware turns the network cache off")
    p.add_argument("--no-via", action="store_true",
                   help="build the cards without the VIA engine, as small FPGAs do (shared memory only)")
    p.add_argument("--serve", action="store_true",
                   help="keep running with a host bridge per node (numavia mem/status attach) until Ctrl-C")
    p.add_argument("--until-disconnect", action="store_true",
                   help="with --serve: also stop when the last host that connected disconnects")
    p.add_argument("--bridge-port", type=_positive, default=1234,
                   help="TCP port of node 0's host bridge; node i listens on PORT + i (default 1234)")
    p.add_argument("--console-port", type=_positive, default=None,
                   help="with --serve: TCP port of node 0's console (numavia console); node i's is PORT + i "
                        f"(default: the first free range from {CONSOLE_PORTS_FROM})")
    p.add_argument("--console", type=_count, metavar="NODE",
                   help="with --serve: what you type goes to node NODE's console (its shell, with "
                        "--firmware zephyr-shell)")
    _add_firmware_option(p)
    _add_spread_options(p)
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
    from numavia.errorlog import ErrorLog, card_features, read_cycles, read_errors
    from numavia.results import markdown_table
    from numavia.session import Session, read_card, session_path
    from numavia.base import regmap
    session = Session.load()
    headers = ["node", "id", "ready", "microcode", "numa", "features"] + [f"{b}.{r}" for b, r in STATUS_COUNTERS]
    rows, errors = [], []
    log = ErrorLog(session_path().parent, session.pid)
    new_entries = []
    for node in range(session.nodes):
        with session.bridge(node) as bridge:
            read = lambda block, reg: read_card(bridge, session, block, reg)
            ctrl = read("ctrl", "CTRL")
            numa = ctrl & regmap.CTRL.register("CTRL").field("NUMA_MODE").mask
            rows.append([node, read("ctrl", "NODE_ID"),
                         "yes" if read("ctrl", "STATUS") & 1 else "no",
                         "loaded" if read("rac", "STATUS") & 1 else "not loaded",
                         "on" if numa else "off", ",".join(card_features(read)) or "-"]
                        + [read(b, r) for b, r in STATUS_COUNTERS])
            cycle = read_cycles(read)
            values = read_errors(read)
            errors.append(values)
            new_entries += log.update(node, cycle, values)
    log.save()
    print(markdown_table(headers, rows), end="")
    counted = [name for name in errors[0] if any(e[name] for e in errors)]
    print(f"\nerror counters ({len(errors[0])} per node): ", end="")
    if counted:
        print(f"{len(counted)} non-zero\n")
        print(markdown_table(["node"] + counted, [[n] + [e[c] for c in counted] for n, e in enumerate(errors)]),
              end="")
    else:
        print("all zero")
    lines = log.lines()
    shown = lines[-args.log_lines:] if args.log_lines else []
    print(f"\nerror log ({len(lines)} entries, {len(new_entries)} new; {log.log_path}):")
    for line in shown:
        print(f"  {line}")
    return 0


def _add_status(sub):
    p = sub.add_parser("status", help="node ids, microcode, mode, counters and error log of every node",
                       description="Attach to `numavia sim --serve` and read every card's state, its error "
                                   "counters (faults detected, recovered or refused) and the error log: "
                                   "each increase of an error counter since the previous `numavia status`, "
                                   "stamped with the node's cycle counter.")
    p.add_argument("--log-lines", type=_count, default=20, metavar="N",
                   help="show the last N error-log entries (default 20; 0: none)")
    p.set_defaults(func=cmd_status)


# --- numavia console ----------------------------------------------------------------------------

def cmd_console(args):
    from numavia.session import Session
    session = Session.load()
    with session.console(args.node) as console:
        if not args.command:
            _log(f"node {args.node}'s console; end of input (Ctrl-D) leaves")
            console.interact()
            return 0
        for line in args.command:
            for out in console.command(line, timeout=args.timeout):
                print(out)
    return 0


def _add_console(sub):
    p = sub.add_parser("console", help="a node's console (its shell) in a running simulation",
                       description="Attach to `numavia sim --serve` and talk to node NODE's console: what "
                                   "you type goes to its UART, what it prints comes back. With --command, run "
                                   "shell commands (the Zephyr image with the shell: --firmware zephyr-shell) "
                                   "and print their output.")
    p.add_argument("node", type=_count, metavar="NODE")
    p.add_argument("--command", action="append", metavar="LINE",
                   help="run this shell command and print its output (repeatable); without it, interactive")
    p.add_argument("--timeout", type=_positive_float, default=60.0, metavar="SECONDS",
                   help="how long one command may take, in wall time (default 60)")
    p.set_defaults(func=cmd_console)


# --- numavia firmware ---------------------------------------------------------------------------

def cmd_firmware(args):
    from numavia.soc import firmware
    from numavia.soc import sim

    config = sim.SimConfig(cpu_variant=args.cpu_variant)
    soc_dir = sim.build_soc(config, log=_log)
    image = firmware.build(args.firmware, soc_dir, log=_log)
    print(f"{image.path} ({image.path.stat().st_size} bytes, runs from {image.region})")
    return 0


def _add_firmware(sub):
    p = sub.add_parser("firmware", help="build the node firmware for the simulated SoC",
                       description="Generate the SoC headers if needed and build the firmware image: "
                                   "firmware.bin (bare metal, the default) or zephyr.bin (--firmware zephyr).")
    p.add_argument("--cpu-variant", default="standard", choices=["minimal", "lite", "standard"])
    _add_firmware_option(p)
    p.set_defaults(func=cmd_firmware)


# --- numavia build / flash (boards) ----------------------------------------------------------

_BOARDS = ("ecpix5", "colorlight_i5")


def cmd_build(args):
    from numavia.boards import flow

    board = flow.load_board(args.board)
    if args.bare and args.compare_bare:
        raise NumaviaError("--bare and --compare-bare exclude each other")
    if args.synth_only:
        if args.compare_bare:
            raise NumaviaError("--synth-only builds one SoC; leave out --compare-bare")
        netlist = flow.synthesise(board, args.config, with_card=not args.bare, nodes_max=args.nodes_max, log=_log)
        return _print_paths(netlist / f"{flow.TOP}.json", count=args.paths)
    out = _results_folder(args.out) if args.out else None
    report = flow.build(board, args.config, with_card=not args.bare, nodes_max=args.nodes_max,
                        bitstream=not args.no_bitstream, log=_log)
    print(flow.format_report(report))
    reports = [report]
    if args.compare_bare:
        bare = flow.build(board, args.config, with_card=False, bitstream=not args.no_bitstream, log=_log)
        print(flow.format_report(bare))
        reports.append(bare)
    if out:
        for path in flow.write_results(reports, out):
            _log(f"wrote {path}")
    for r in reports:
        flow.check_timing(r)
    return 0


def _add_build(sub):
    p = sub.add_parser("build", help="build a board's bitstream with the open ECP5 flow (yosys, nextpnr, ecppack)",
                       description="Generate the node SoC for a board, synthesise, place and route it and pack "
                                   "the bitstream (cached by inputs); print resources and Fmax per clock domain; "
                                   "fail if a clock misses its target (from nextpnr's report).")
    p.add_argument("--board", required=True, choices=_BOARDS)
    p.add_argument("--config", help="card configuration of the board (default: the board's own)")
    p.add_argument("--nodes-max", type=_positive, help="largest ring the card addresses (CardConfig.max_nodes)")
    p.add_argument("--bare", action="store_true", help="the LiteX SoC without the card, for comparison")
    p.add_argument("--compare-bare", action="store_true",
                   help="also build the bare LiteX SoC on the same board and report the card's cost")
    p.add_argument("--no-bitstream", action="store_true", help="stop after place and route (no ecppack)")
    p.add_argument("--synth-only", action="store_true",
                   help="stop after yosys and print the estimated slowest paths per clock (numavia paths)")
    p.add_argument("--paths", type=_positive, default=5, metavar="N",
                   help="with --synth-only: paths per clock, to different registers (default 5)")
    p.add_argument("--out", help="write the figures (JSON, CSV, Markdown) to this folder")
    p.set_defaults(func=cmd_build)


def _print_paths(netlist, *, count, clocks=None, top=None):
    from numavia.boards import logic_paths

    _log(f"estimating paths of {netlist}")
    paths = logic_paths.worst_paths(logic_paths.load(netlist, top), count)
    if not paths:
        raise NumaviaError(f"{netlist}: no register-to-register paths")
    known = dict.fromkeys(p.clock for p in paths)
    unknown = [c for c in clocks or () if c not in known]
    if unknown:
        raise NumaviaError(f"{netlist}: no clock {', '.join(unknown)} (its clocks: {', '.join(known)})")
    print(logic_paths.format_paths(paths, clocks))
    return 0


def cmd_paths(args):
    return _print_paths(args.netlist, count=args.count, clocks=args.clock, top=args.top)


def _add_paths(sub):
    p = sub.add_parser("paths", help="estimated slowest register-to-register paths of an ECP5 netlist",
                       description="Read a yosys JSON netlist (after synth_ecp5) and print, per clock, the "
                                   "slowest paths in nominal ECP5 delays and the signals they pass: what "
                                   "limits Fmax, without place and route (nextpnr names critical paths only "
                                   "for a routed design). An estimate of logic depth, not sign-off.")
    p.add_argument("netlist", help="yosys JSON netlist, e.g. build/netlists/<board>-.../numavia_board.json")
    p.add_argument("--top", help="module to analyse (default: the netlist's top)")
    p.add_argument("--count", type=_positive, default=5, help="paths per clock, to different registers (default 5)")
    p.add_argument("--clock", action="append", help="only this clock (its net name); repeatable")
    p.set_defaults(func=cmd_paths)


def cmd_flash(args):
    from numavia.boards import flow

    board = flow.load_board(args.board)
    bitstream = args.bitstream
    if bitstream is None:
        report = flow.build(board, args.config, log=_log)
        flow.check_timing(report)
        bitstream = report["bitstream"]
    flow.flash(board, bitstream, cable=args.cable, to_flash=args.flash, log=_log)
    return 0


def _add_flash(sub):
    p = sub.add_parser("flash", help="load a board's bitstream with openFPGALoader",
                       description="Load the bitstream into the FPGA (or, with --flash, write it to the "
                                   "configuration flash) with openFPGALoader; builds it first if needed.")
    p.add_argument("--board", required=True, choices=_BOARDS)
    p.add_argument("--config", help="card configuration of the board (default: the board's own)")
    p.add_argument("--bitstream", type=Path, help="a .bit file (default: build it)")
    p.add_argument("--cable", help="openFPGALoader cable name (-c), e.g. ft2232, dirtyJtag; default: the board's")
    p.add_argument("--flash", action="store_true", help="write the configuration flash instead of the FPGA's SRAM")
    p.set_defaults(func=cmd_flash)


# --- numavia renode ---------------------------------------------------------------------------

def cmd_renode(args):
    from numavia import renode
    from numavia.soc.firmware import build_firmware
    from numavia.renode import cosim, run
    from numavia.soc import sim

    config = sim.SimConfig(nodes=args.nodes, cpu_variant=args.cpu_variant)
    firmware, node_images = renode.firmware_images(args.firmware)
    renode.firmware_files(args.nodes, node_images)      # a node outside the ring: say so now
    # A run needs Renode, its integration library, CMake and Verilator: say which is missing
    # before spending minutes on builds.
    renode_root = run.require_tools(args.renode_dir) if args.run else None
    out = _results_folder(args.out)
    _log(f"SoC ({config.cpu_variant} VexRiscv + card) and firmware, cached under build/")
    soc_dir = sim.build_soc(config, log=_log)
    card_verilog = cosim.card_verilog(config, log=_log)
    images = {node: renode.memory_images(image, soc_dir, log=_log) for node, image in node_images.items()}
    every = renode.memory_images(firmware, soc_dir, log=_log) if firmware else build_firmware(soc_dir, log=_log)
    files = renode.generate(soc_dir / "csr.json", out, nodes=config.nodes, card_config=config.card_config(),
                            card_verilog=card_verilog, ready_marker=sim.READY_MARKER,
                            firmware=every, node_images=images,
                            quantum_cycles=args.quantum, ring_delay=args.ring_delay)
    for path in files:
        print(path)
    if args.run:
        run.build_card_model(out, renode_root, card_verilog, config.nodes, _log)
        run.run_tests(out, _log)
    return 0


def _add_renode(sub):
    from numavia.renode import DEFAULT_QUANTUM_CYCLES, RING_DELAY_CYCLES
    p = sub.add_parser("renode", help="write the Renode ring (platform, script, Robot tests) for the SoC",
                       description="Generate, from the SoC's csr.json (built and cached as for `numavia sim`), "
                                   "a Renode node platform (.repl), an N-node ring script (.resc) with the card "
                                   "co-simulated from its Verilog, Robot tests and the card's co-simulation "
                                   "inputs (renode/cosim builds them with CMake). --run also builds the card "
                                   "model and runs the tests: it needs Renode (renode, renode-test) and its "
                                   "integration library.")
    p.add_argument("--nodes", type=_positive, default=2, help="machines in the ring (default 2)")
    p.add_argument("--out", default="build/renode", help="output folder (default build/renode)")
    p.add_argument("--cpu-variant", default="standard", choices=["minimal", "lite", "standard"],
                   help="VexRiscv variant of each node (default standard)")
    p.add_argument("--firmware", action="append", default=[], metavar="[NODE=]IMAGE",
                   help="firmware of every node, or with NODE= of one node; repeatable: bare-metal (the "
                        "default), zephyr, zephyr-shell or zephyr=PATH as for `numavia sim` (a Zephyr "
                        "image runs from main RAM behind the ROM's jump), or a raw image for the ROM")
    p.add_argument("--quantum", type=_positive, default=DEFAULT_QUANTUM_CYCLES, metavar="CYCLES",
                   help=f"global quantum in card clock cycles (default {DEFAULT_QUANTUM_CYCLES})")
    p.add_argument("--ring-delay", type=_positive, default=RING_DELAY_CYCLES, metavar="CYCLES",
                   help=f"card cycles per ring hop (default {RING_DELAY_CYCLES}, as in the Verilator ring)")
    p.add_argument("--run", action="store_true",
                   help="then build the co-simulated card (CMake + Verilator) and run the Robot tests")
    p.add_argument("--renode-dir", metavar="DIR",
                   help="Renode's root folder, holding its co-simulation integration library (default $RENODE_ROOT)")
    p.set_defaults(func=cmd_renode)


# --- numavia zephyr-overlay ------------------------------------------------------------------

def cmd_zephyr_overlay(args):
    from numavia import zephyr_overlay

    if args.csr_json:
        csr_json = Path(args.csr_json)
    else:
        from numavia.soc import sim
        csr_json = sim.build_soc(sim.SimConfig(cpu_variant=args.cpu_variant), log=_log) / "csr.json"
    zephyr_overlay.write(csr_json, args.out, conf=args.conf, zephyr_base=args.zephyr_base)
    _log(f"{args.out}: devicetree overlay for litex_vexriscv from {csr_json}")
    return 0


def _add_zephyr_overlay(sub):
    p = sub.add_parser("zephyr-overlay", help="devicetree overlay for Zephyr's litex_vexriscv board, from csr.json",
                       description="Write the devicetree overlay (LiteX peripherals and the card's blocks) "
                                   "for a node SoC, from its csr.json and the register map.")
    p.add_argument("--csr-json", help="the SoC's csr.json (default: generate the simulated node SoC, cached)")
    p.add_argument("--cpu-variant", default="standard", choices=["minimal", "lite", "standard"],
                   help="VexRiscv variant of the generated SoC when --csr-json is not given")
    p.add_argument("--out", required=True, help="overlay file to write (.overlay)")
    p.add_argument("--conf", help="also write the Kconfig fragment the SoC needs (.conf)")
    p.add_argument("--zephyr-base", metavar="DIR",
                   help="the Zephyr tree to build with: use only the labels its litex_vexriscv board "
                        "defines and disable every peripheral it enables that the SoC lacks "
                        "(default: the labels LiteX's flow knows)")
    p.set_defaults(func=cmd_zephyr_overlay)


# --- numavia bench -----------------------------------------------------------------------------

def _results_folder(text):
    """The folder a command writes into, created before any work (results must never be lost to a
    missing folder after a long run); a file in its place is a one-line error, not a traceback."""
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise NumaviaError(f"the output folder {out} is a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NumaviaError(f"cannot create the output folder {out}: {e.strerror}") from None
    return out


def cmd_bench_latency(args):
    from numavia.bench import latency
    out = _results_folder(args.out)
    figures = latency.run(args.nodes, log=_log, out=buildcache.build_root() / "run" / "latency",
                          spread=_spread(args, args.nodes))
    print(latency.report(figures, out))
    _log(f"results in {out}/latency.{{md,csv,json,png}}")
    return 0


def cmd_bench_local_side(args):
    from numavia.bench import local_side
    out = _results_folder(args.out)
    _log("simulating the local side")
    figures = local_side.measure()
    synth = None if args.no_synth else local_side.synthesis(device=args.device, log=_log)
    print(local_side.report(figures, synth, out))
    _log(f"results in {out}/local_side.{{md,csv,json}}")
    return 0


def cmd_bench_coherence(args):
    from numavia.bench import coherence
    from numavia.base.errors import NumaviaError
    out = _results_folder(args.out)
    figures = coherence.run(args.nodes, args.ops, seed=args.seed, flip_rate=args.flip_rate, ring_drop=args.ring_drop,
                            ring_duplicate=args.ring_duplicate, numa=args.numa, line_bytes=args.line_bytes, log=_log,
                            spread=_spread(args, args.nodes))
    print(coherence.report(figures, out))
    _log(f"results in {out}/coherence.{{md,csv,json,png}}")
    if figures["violation_count"] or figures["protocol_errors"]:
        raise NumaviaError(f"{figures['violation_count']} coherence violation(s), "
                           f"{figures['protocol_errors']} protocol error(s): see {out}/coherence.json")
    return 0


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


def _mtu(text):
    from numavia.base import via_frame
    value = int(text, 0)
    if not via_frame.MTU_MIN <= value <= via_frame.MTU_JUMBO:
        raise argparse.ArgumentTypeError(f"MTUs must be {via_frame.MTU_MIN}..{via_frame.MTU_JUMBO}")
    return value


def cmd_bench_boot(args):
    from numavia.bench import boot
    out = _results_folder(args.out)
    figures = boot.measure(args.firmware, nodes=args.nodes, log=_log, spread=_spread(args, args.nodes),
                           run_root=buildcache.build_root() / "run" / "boot")
    print(boot.report(figures, out))
    _log(f"results in {out}/boot.{{md,csv,json}}")
    return 0


def _firmware_list(text):
    choices = [item.strip() for item in text.split(",")]
    if len(set(choices)) != len(choices):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct firmwares, separated by commas")
    return [_firmware_choice(choice) for choice in choices]


def cmd_bench_stream(args):
    from numavia.bench import stream
    out = _results_folder(args.out)
    figures = stream.measure(args.array_bytes, args.passes, log=_log, spread=_spread(args, stream.NODES))
    print(stream.report(figures, out))
    _log(f"results in {out}/stream.{{md,csv,json,png}}")
    return 0


def cmd_bench_shm(args):
    from numavia.bench import shm
    out = _results_folder(args.out)
    figures = shm.measure(args.max_size, log=_log, firmware=args.firmware, spread=_spread(args, shm.NODES))
    print(shm.report(figures, out))
    _log(f"results in {out}/shm.{{md,csv,json,png}}")
    return 0


def cmd_bench_via(args):
    from numavia import bench_via
    if args.min_size > args.max_size:
        args.parser.error(f"--min-size {args.min_size} is larger than --max-size {args.max_size}")
    if args.max_size > 2 * 1024 * 1024:
        args.parser.error("--max-size is at most 2Mi (the simulated host memory holds 4 MiB)")
    if args.eth_delay < ETH_MIN_DELAY:
        args.parser.error(f"--eth-delay must be at least {ETH_MIN_DELAY} cycles (the switch reads the destination "
                          "first, and each link to and from it takes a cycle)")
    if len(args.pair) != 2 or max(args.pair) >= args.nodes:
        args.parser.error(f"--pair names two nodes of the ring (0..{args.nodes - 1}), not {args.pair}")
    args.spread = _spread(args, args.nodes)
    _results_folder(args.out)
    args.command_line = None
    paths = bench_via.main(args, _log)
    for p in paths:
        print(p)
    return 0


def cmd_bench_pushpull(args):
    from numavia import bench_pushpull
    from numavia.base import pushpull_format
    if args.min_size > args.max_size:
        args.parser.error(f"--min-size {args.min_size} is larger than --max-size {args.max_size}")
    if args.max_size > 1024 * 1024:
        args.parser.error("--max-size is at most 1Mi (the library's translations hold 520 pages)")
    bad = [t for t in args.thresholds if t > pushpull_format.MAX_PUSH]
    if bad:
        args.parser.error(f"--thresholds: bytes_to_push is at most {pushpull_format.MAX_PUSH} "
                          f"(a pushed-buffer slot), not {bad[0]}")
    if args.eth_delay < ETH_MIN_DELAY:
        args.parser.error(f"--eth-delay must be at least {ETH_MIN_DELAY} cycles (the switch reads the destination "
                          "first, and each link to and from it takes a cycle)")
    args.spread = _spread(args, 2)
    _results_folder(args.out)
    args.command_line = None
    paths = bench_pushpull.main(args, _log)
    for p in paths:
        print(p)
    return 0


def cmd_bench_splash2(args):
    from numavia.bench import splash2
    from numavia.instrument import CostModel
    out = _results_folder(args.out)
    figures = splash2.run(args.kernels, args.nodes, args.modes, size=args.size, ways=args.ways, line_sizes=args.line_bytes,
                          placement=args.placement, access=args.access, cost=CostModel(ns_per_op=args.ns_per_op),
                          log=_log, spread=_spread(args, max(args.nodes)))
    print(splash2.report(figures, out))
    _log(f"results in {out}/splash2_*.{{md,csv,json}}, splash2_time.png, splash2_speedup.png")
    return 0


def cmd_bench_sim_speed(args):
    from numavia.bench import sim_speed
    from numavia.soc.ring_launch import require_mpi
    from numavia.base import regmap
    for option, values in (("--nodes", args.nodes), ("--procs", args.procs), ("--mpi-ranks", args.mpi_ranks)):
        if any(v < 1 for v in values):
            args.parser.error(f"{option}: every value must be at least 1")
    if max(args.nodes) > 1 << regmap.NODE_ID_BITS:
        args.parser.error(f"--nodes: a ring holds at most {1 << regmap.NODE_ID_BITS} nodes")
    if args.mpi_ranks:
        require_mpi()
    out = _results_folder(args.out)
    accesses = sim_speed.CARD_ACCESSES if args.card_accesses is None else args.card_accesses
    figures = sim_speed.measure(args.nodes, args.procs, args.mpi_ranks, cycles=args.cycles, card_accesses=accesses,
                                log=_log)
    print(sim_speed.report(figures, out))
    _log(f"results in {out}/sim_speed.{{md,csv,json,png}}")
    return 0


def cmd_bench_pcie(args):
    from numavia.bench import pcie
    out = _results_folder(args.out)
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
    _add_spread_options(lat)
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
    coh.add_argument("--flip-rate", type=_probability, default=0.0, help="ring bit errors per symbol")
    coh.add_argument("--ring-drop", type=_probability, default=0.0, metavar="P",
                     help="probability that a ring packet (echoes too) is lost")
    coh.add_argument("--ring-duplicate", type=_probability, default=0.0, metavar="P",
                     help="probability that a ring packet arrives twice (each hop then holds a packet's copy)")
    coh.add_argument("--numa", action="store_true", help="NUMA mode (no network cache)")
    coh.add_argument("--line-bytes", type=int, choices=LINE_SIZES, default=LINE_BYTES,
                     help=f"the cards' line size (default {LINE_BYTES}, as in the paper)")
    coh.add_argument("--out", default="results/coherence", help="results folder")
    _add_spread_options(coh)
    coh.set_defaults(func=cmd_bench_coherence)
    from numavia.splash2 import KERNELS, PLACEMENTS
    spl = benches.add_parser(
        "splash2", help="SPLASH-2 LU, FFT, Ocean, Barnes on 1-8 cards (the paper's Tables 3-6, Fig. 6)",
        description="Run the SPLASH-2 kernels with P processes, record their shared-memory accesses as "
                    "traces (cached under build/splash2), replay them on rings of RTL cards in NCC-NUMA "
                    "and NUMA mode, and write the paper's tables: speedups (Table 5), network cache "
                    "associativity (Table 4), line size (Table 3), remote/local accesses "
                    "(Table 6) and the compute/memory/barrier split (Fig. 6). On 2 cores --size small "
                    "takes about 1.5 hours, most of it verilating 8 ring models of 1-8 cards (cached for the "
                    "next run; --ways and --line-bytes add more); the paper sizes replay far longer traces.")
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
    spl.add_argument("--line-bytes", type=_list_of(int, LINE_SIZES, "line size"), default=[32, 64],
                     help="line sizes for Table 3, direct-mapped at equal capacity (default 32,64; "
                          "give 64 to skip the table)")
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
    _add_spread_options(spl)
    spl.set_defaults(func=cmd_bench_splash2)

    st = benches.add_parser("stream", help="STREAM-style bandwidth of private, home and remote memory",
                            description="Copy, Scale, Add and Triad streamed by node 0's host port in line "
                                        "bursts over arrays in private memory, the node's own shared slice and "
                                        "a remote slice (NCC-NUMA and NUMA), timed by the RTL's cycle stamps.")
    st.add_argument("--array-bytes", type=_size, default=4096,
                    help="bytes per array, a multiple of 64 (default 4096: all three fit the network cache)")
    st.add_argument("--passes", type=_positive, default=4, help="passes of each kernel (default 4)")
    st.add_argument("--out", default="results/stream", help="results folder (default results/stream)")
    _add_spread_options(st)
    st.set_defaults(func=cmd_bench_stream)

    sh = benches.add_parser("shm", help="NetPIPE-style sweep over shared memory: remote loads and stores",
                            description="Messages of 4 bytes up to --max-size moved between node 0 and node 1's "
                                        "slice by remote loads and stores, NCC-NUMA and NUMA, timed by the RTL's "
                                        "cycle stamps.")
    sh.add_argument("--max-size", type=_size, default=16 * 1024, help="largest message (default 16k)")
    sh.add_argument("--out", default="results/shm", help="results folder (default results/shm)")
    _add_firmware_option(sh, default=None, default_says="given any, the sweep runs on two complete nodes "
                         "booted with it; by default on two cards alone")
    _add_spread_options(sh)
    sh.set_defaults(func=cmd_bench_shm)

    v = benches.add_parser("via", help="NetPIPE-style sweep of the VIA engine (send/receive, RDMA write, RDMA read)",
                         description="Latency and bandwidth of the VIA engine between two simulated nodes, "
                                     "measured by the firmware's benchmark agents with the card's cycle counter. "
                                     "Writes via_bench.csv, via_bench.md and via_bench.png to --out.")
    ops = ("send", "write", "read", "send-stream", "write-stream")
    v.add_argument("--ops", type=_list_of(str, ops, "operation"), default=list(ops),
                   help="operations, comma separated: ping-pongs send, write, read and streams send-stream, "
                        "write-stream (default all)")
    v.add_argument("--mtu", type=_list_of(_mtu, what="MTU"), default=[1500, 9000],
                   help="MTUs, comma separated (default 1500,9000)")
    v.add_argument("--min-size", type=_size, default=4, help="smallest message (default 4)")
    v.add_argument("--max-size", type=_size, default=1024 * 1024, help="largest message (default 1Mi)")
    v.add_argument("--perturbation", type=_size, default=0,
                   help="also measure each power of two +- this many bytes (NetPIPE style; default 0)")
    v.add_argument("--iterations", type=_positive, default=20,
                   help="round trips per point for small messages (large ones use fewer, at least 2)")
    v.add_argument("--eth-delay", type=_positive, default=50, metavar="CYCLES",
                   help="Ethernet PHY+cable delay in 125 MHz cycles (default 50 = 400 ns)")
    v.add_argument("--nodes", type=_integer_at_least(2, "must be at least 2"), default=2,
                   help="nodes in the ring, all on one Ethernet switch (default 2)")
    v.add_argument("--pair", type=_list_of(int, what="node"), default=[0, 1], metavar="A,B",
                   help="the two nodes measured: A initiates, B responds (default 0,1)")
    v.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                   help="wall-time limit for one measurement (default 900)")
    v.add_argument("--out", default="results/via", help="output folder (default results/via)")
    _add_firmware_option(v)
    _add_spread_options(v)
    v.set_defaults(func=cmd_bench_via, parser=v)
    pp = benches.add_parser("pushpull", help="push-pull messaging (seed 002): original vs advanced scheme over VIA",
                            description="Ping-pong and one-way latency of the push-pull library (firmware, on the "
                                        "VIA engine) between two simulated nodes, original and advanced scheme, "
                                        "swept over message size and bytes_to_push, beside plain send/receive and "
                                        "RDMA write; card cycle counters. Writes pushpull_bench.{csv,md,json,png} "
                                        "to --out.")
    pp.add_argument("--schemes", type=_list_of(str, ("original", "advanced"), "scheme"),
                    default=["original", "advanced"], help="schemes, comma separated (default original,advanced)")
    pp.add_argument("--thresholds", type=_list_of(_size, what="bytes_to_push"), default=[64, 512, 2048],
                    help="bytes_to_push values, comma separated, 0..2048 (default 64,512,2048)")
    pp.add_argument("--min-size", type=_size, default=1, help="smallest message (default 1)")
    pp.add_argument("--max-size", type=_size, default=64 * 1024, help="largest message (default 64Ki)")
    pp.add_argument("--iterations", type=_positive, default=10,
                    help="round trips per point for small messages (large ones use fewer, at least 2)")
    pp.add_argument("--baselines", type=_list_of(str, ("send", "write"), "baseline"), default=["send", "write"],
                    help="plain VIA ping-pongs to compare with, comma separated (default send,write)")
    pp.add_argument("--no-baselines", dest="baselines", action="store_const", const=[],
                    help="measure push-pull only")
    pp.add_argument("--mtu", type=_mtu, default=1500, help="MTU (default 1500)")
    pp.add_argument("--eth-delay", type=_positive, default=50, metavar="CYCLES",
                    help="Ethernet PHY+cable delay in 125 MHz cycles (default 50 = 400 ns)")
    pp.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                    help="wall-time limit for one measurement (default 900)")
    pp.add_argument("--out", default="results/pushpull", help="output folder (default results/pushpull)")
    _add_firmware_option(pp)
    _add_spread_options(pp)
    pp.set_defaults(func=cmd_bench_pushpull, parser=pp)
    ss = benches.add_parser("sim-speed", help="how fast the ring simulation runs, against ring size and spread",
                            description="Boot rings of full nodes (and run the card bench) for a fixed number of "
                                        "cycles, in 1..P processes and MPI ranks, and report simulated cycles per "
                                        "second, node-cycles per second per core and the model's build time.")
    ss.add_argument("--nodes", type=_list_of(int, what="ring size"), default=[2, 4, 8, 16],
                    help="ring sizes, comma separated (default 2,4,8,16; at most 64)")
    ss.add_argument("--procs", type=_list_of(int, what="process count"), default=[1, 2],
                    help="process counts, comma separated (default 1,2)")
    ss.add_argument("--mpi-ranks", type=_list_of(int, what="rank count"), default=[],
                    help="MPI rank counts, comma separated (default none)")
    ss.add_argument("--cycles", type=_positive, default=200_000, help="cycles per run (default 200000)")
    ss.add_argument("--card-accesses", type=_count, default=None, metavar="N",
                    help="random accesses per card in the card-bench runs (default: as many as keep a 64-card "
                         "run to minutes; the results say how many); 0 leaves them out")
    ss.add_argument("--out", default="results/sim_speed", help="results folder (default results/sim_speed)")
    ss.set_defaults(func=cmd_bench_sim_speed, parser=ss)
    bo = benches.add_parser("boot", help="firmware image size and boot time (cycles to ready)",
                            description="For each firmware, its image size (text, data, bss) and the cycles "
                                        "from reset to every node's ready line on a ring. Writes "
                                        "boot.{md,csv,json} to --out.")
    bo.add_argument("--firmware", type=_firmware_list, default=["bare-metal"], metavar="FIRMWARES",
                    help="comma-separated firmwares (bare-metal, zephyr, zephyr-shell, zephyr=PATH; default "
                         "bare-metal; the Zephyr ones need $ZEPHYR_BASE, docs/zephyr.md)")
    bo.add_argument("--nodes", type=_positive, default=2, help="nodes in the ring (default 2)")
    bo.add_argument("--out", default="results/boot", help="results folder (default results/boot)")
    _add_spread_options(bo)
    bo.set_defaults(func=cmd_bench_boot)
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
    Demo(nodes=args.nodes, out=_results_folder(args.out), log=_log, spread=_spread(args, args.nodes),
         firmware=args.firmware).run()
    return 0


def _add_demo(sub):
    from numavia.demo import DEFAULT_NODES
    p = sub.add_parser("demo", help="the main job: build and boot a ring, measure latency and kernels, report",
                       description="Build (cached) and boot a ring of full nodes (cycle-accurate, one process per "
                                   "node by default), then measure the Table 1 latency set and shared-memory "
                                   "kernels in NCC-NUMA and NUMA mode; write a report with tables and PNG plots.")
    p.add_argument("--nodes", type=_positive, default=DEFAULT_NODES,
                   help=f"nodes in the ring (default {DEFAULT_NODES})")
    p.add_argument("--out", default="results/demo", help="report folder (default results/demo)")
    _add_firmware_option(p)
    _add_spread_options(p)
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
    _add_zephyr_overlay(sub)
    _add_mem(sub)
    _add_status(sub)
    _add_console(sub)
    _add_bench(sub)
    _add_demo(sub)
    _add_renode(sub)
    _add_build(sub)
    _add_paths(sub)
    _add_flash(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM: stopped like Ctrl-C, so that every path that stops simulators on Ctrl-C (and
    mpirun with them) does so here too."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except argparse.ArgumentTypeError as e:
        parser.exit(2, f"numavia: error: {e}\n")
    except Terminated:
        _log("terminated")
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        _log("interrupted")
        return 130
    except NumaviaError as e:   # every expected failure ends in one line saying what went wrong
        print(f"numavia: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
