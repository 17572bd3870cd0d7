"""``numavia mem``, ``numavia status`` and ``numavia console``: tools that attach to a ring served by
``numavia sim --serve``."""

from numavia.base import regmap
from numavia.bench.results import markdown_table
from numavia.errorlog import ErrorLog, card_features, read_cycles, read_errors
from numavia.session import Session, read_card, session_path

from .common import address, command, count, log, positive, positive_float

STATUS_COUNTERS = [
    ("lac", "ACCESSES"),
    ("lac", "CACHE_READ_HITS"),
    ("lac", "READ_MISSES"),
    ("lac", "WRITE_MISSES"),
    ("lac", "ERRORS"),
    ("rac", "RUNS"),
    ("rac", "NACKS_SENT"),
    ("rac", "PROTOCOL_ERRORS"),
    ("ring", "TX_PACKETS"),
    ("ring", "RX_PACKETS"),
    ("ring", "CRC_ERRORS"),
    ("ring", "TIMEOUTS"),
]


def cmd_mem(args):
    if args.op == "write" and args.value is None:
        args.parser.error("write needs a VALUE")
    session = Session.load()
    words = 1 if args.op == "write" else args.count
    session.check_address(args.node, args.addr, 4 * words)
    with session.bridge(args.node) as bridge:
        if args.op == "read":
            for i, word in enumerate(bridge.read(args.addr, words)):
                print(f"{args.addr + 4 * i:#010x}: {word:#010x}")
        else:
            bridge.write(args.addr, args.value & 0xFFFFFFFF)
    return 0


def cmd_status(args):
    session = Session.load()
    headers = ["node", "id", "ready", "microcode", "numa", "caches a line at", "features"] + [
        f"{b}.{r}" for b, r in STATUS_COUNTERS
    ]
    rows, errors = [], []
    error_log = ErrorLog(session_path().parent, session.pid)
    new_entries = []
    for node in range(session.nodes):
        with session.bridge(node) as bridge:
            read = lambda block, reg: read_card(bridge, session, block, reg)
            ctrl = read("ctrl", "CTRL")
            numa = ctrl & regmap.CTRL.register("CTRL").field("NUMA_MODE").mask
            first_miss = ctrl & regmap.CTRL.register("CTRL").field("CACHE_FIRST_MISS").mask
            rows.append(
                [
                    node,
                    read("ctrl", "NODE_ID"),
                    "yes" if read("ctrl", "STATUS") & 1 else "no",
                    "loaded" if read("rac", "STATUS") & 1 else "not loaded",
                    "on" if numa else "off",
                    "-" if numa else "first miss" if first_miss else "second miss",
                    ",".join(card_features(read)) or "-",
                ]
                + [read(b, r) for b, r in STATUS_COUNTERS]
            )
            cycle = read_cycles(read)
            values = read_errors(read)
            errors.append(values)
            new_entries += error_log.update(node, cycle, values)
    error_log.save()
    print(markdown_table(headers, rows), end="")
    counted = [name for name in errors[0] if any(e[name] for e in errors)]
    print(f"\nerror counters ({len(errors[0])} per node): ", end="")
    if counted:
        print(f"{len(counted)} non-zero\n")
        print(markdown_table(["node"] + counted, [[n] + [e[c] for c in counted] for n, e in enumerate(errors)]), end="")
    else:
        print("all zero")
    lines = error_log.lines()
    shown = lines[-args.log_lines :] if args.log_lines else []
    print(f"\nerror log ({len(lines)} entries, {len(new_entries)} new; {error_log.log_path}):")
    for line in shown:
        print(f"  {line}")
    return 0


def cmd_console(args):
    session = Session.load()
    with session.console(args.node) as console:
        if not args.command:
            log(f"node {args.node}'s console; end of input (Ctrl-D) leaves")
            console.interact()
            return 0
        for line in args.command:
            for out in console.command(line, timeout=args.timeout):
                print(out)
    return 0


def register(sub):
    p = command(
        sub,
        "mem",
        cmd_mem,
        help="read or write a node's memory map through its host bridge",
        description="Attach to `numavia sim --serve` and access a node's SoC bus: "
        "registers, RAM, or the shared window (which goes through the card).",
    )
    p.add_argument("op", choices=["read", "write"])
    p.add_argument("addr", type=address, metavar="ADDR")
    p.add_argument("value", type=address, nargs="?", metavar="VALUE")
    p.add_argument("--node", type=int, default=0, help="node to access (default 0)")
    p.add_argument("--count", type=positive, default=1, help="words to read (default 1)")

    p = command(
        sub,
        "status",
        cmd_status,
        help="node ids, microcode, mode, counters and error log of every node",
        description="Attach to `numavia sim --serve` and read every card's state, its error "
        "counters (faults detected, recovered or refused) and the error log: "
        "each increase of an error counter since the previous `numavia status`, "
        "stamped with the node's cycle counter.",
    )
    p.add_argument(
        "--log-lines",
        type=count,
        default=20,
        metavar="N",
        help="show the last N error-log entries (default 20; 0: none)",
    )

    p = command(
        sub,
        "console",
        cmd_console,
        help="a node's console (its shell) in a running simulation",
        description="Attach to `numavia sim --serve` and talk to node NODE's console: what "
        "you type goes to its UART, what it prints comes back. With --command, run "
        "shell commands (the Zephyr image with the shell: --firmware zephyr-shell) "
        "and print their output.",
    )
    p.add_argument("node", type=count, metavar="NODE")
    p.add_argument(
        "--command",
        action="append",
        metavar="LINE",
        help="run this shell command and print its output (repeatable); without it, interactive",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="how long one command may take, in wall time (default 60)",
    )
