"""What every ``numavia`` command shares: the parser class, the argument types, the repeated
option groups (--out, --firmware, --nodes/--procs/--mpi/--hostfile, --eth-delay) and the rule that
a bad argument, found while parsing or after, is argparse's one line and exit status 2."""

import argparse
import contextlib
import sys
from pathlib import Path

from numavia.base import via_frame
from numavia.base.coherence import CACHE_AT, MAX_NODES
from numavia.base.errors import NumaviaError
from numavia.bench import ETH_DELAY_CYCLES
from numavia.soc import firmware
from numavia.soc.model_top import ETH_MIN_DELAY
from numavia.soc.ring_launch import Spread, default_procs

CPU_VARIANTS = ("minimal", "lite", "standard")


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def log(message):
    print(f"numavia: {message}", file=sys.stderr, flush=True)


def command(sub, name, func, **kwargs):
    """A subcommand parser whose arguments run ``func``; ``args.parser`` is this parser, so that a
    value rejected after parsing is reported as argparse reports one rejected while parsing."""
    p = sub.add_parser(name, **kwargs)
    p.set_defaults(func=func, parser=p)
    return p


@contextlib.contextmanager
def checking(args):
    """Errors raised while checking arguments (configurations, spreads) are bad arguments."""
    try:
        yield
    except NumaviaError as e:
        args.parser.error(str(e))


# --- argument types ---------------------------------------------------------------------------


def integer_at_least(minimum, what):
    def convert(text):
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} {what}")
        return value

    return convert


positive = integer_at_least(1, "must be positive")


def integer_in(lowest, highest, what=None):
    """An argparse type: an integer from ``lowest`` to ``highest`` (``what`` says what else it is not)."""
    what = what or f"is not in {lowest}..{highest}"
    at_least = integer_at_least(lowest, what)

    def convert(text):
        value = at_least(text)
        if value > highest:
            raise argparse.ArgumentTypeError(f"{text!r} {what}")
        return value

    return convert


def ring_size(minimum=1):
    """An argparse type: a node count from ``minimum`` to the most nodes a ring addresses."""
    return integer_in(minimum, MAX_NODES, f"is not a ring size ({minimum}..{MAX_NODES})")


count = integer_at_least(0, "must not be negative")


def counts(text):
    """A comma-separated list of counts (repeats allowed)."""
    try:
        return [count(item.strip()) for item in text.split(",")]
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None


def address(text):
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an address") from None


def list_of(convert, allowed=None, what="value"):
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
                    f"{item.strip()!r} is not a {what} (choose from {', '.join(map(str, allowed))})"
                )
            items.append(value)
        if not items or len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"{text!r}: give distinct {what}s, separated by commas")
        return items

    return parse


def float_where(accept, requirement):
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


positive_float = float_where(lambda v: v > 0, "must be positive")
probability = float_where(lambda v: 0 <= v <= 1, "is not a probability (0 to 1)")


def size(text):
    """A byte count: 4096, 0x1000, 64k, 1Mi."""
    units = {"k": 1024, "ki": 1024, "m": 1024 * 1024, "mi": 1024 * 1024}
    t = text.strip().lower()
    for suffix in ("ki", "mi", "k", "m"):
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)], units[suffix]
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


def mtu(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an MTU") from None
    if not via_frame.MTU_MIN <= value <= via_frame.MTU_JUMBO:
        raise argparse.ArgumentTypeError(f"MTUs must be {via_frame.MTU_MIN}..{via_frame.MTU_JUMBO}")
    return value


def firmware_choice(text):
    try:
        firmware.parse_choice(text)
    except firmware.FirmwareError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def firmware_list(text):
    choices = [item.strip() for item in text.split(",")]
    if len(set(choices)) != len(choices):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct firmwares, separated by commas")
    return [firmware_choice(choice) for choice in choices]


# --- repeated options --------------------------------------------------------------------------


def add_nodes_option(p, default, what="nodes in the ring", minimum=1):
    p.add_argument("--nodes", type=ring_size(minimum), default=default, help=f"{what} (default {default})")


def add_out_option(p, default, what="results folder"):
    if default is None:
        p.add_argument("--out", help=what)
    else:
        p.add_argument("--out", default=default, help=f"{what} (default {default})")


def add_cpu_variant_option(p, help="VexRiscv variant of each node (default standard)"):
    p.add_argument("--cpu-variant", default="standard", choices=CPU_VARIANTS, help=help)


def add_firmware_option(p, default="bare-metal", default_says="bare-metal, the default"):
    p.add_argument(
        "--firmware",
        type=firmware_choice,
        default=default,
        metavar="FIRMWARE",
        help=f"what every node runs: bare-metal ({default_says}), zephyr or zephyr-shell (built "
        "against $ZEPHYR_BASE, cached), or zephyr=PATH (a zephyr.elf built for this SoC; "
        "docs/zephyr.md)",
    )


def add_cache_at_option(p, runs="NCC-NUMA runs"):
    p.add_argument(
        "--cache-at",
        choices=list(CACHE_AT),
        default="second",
        help=f"the read miss at which the network cache takes a remote line in the {runs}: second "
        "(the allocation filter: lines read once are not cached; the default) or first",
    )


def add_spread_options(p):
    g = p.add_argument_group("spreading the ring (results do not depend on it)")
    g.add_argument(
        "--procs",
        type=positive,
        default=None,
        metavar="P",
        help="processes (or MPI ranks) to run the nodes in (default: one per core, at most one per node)",
    )
    g.add_argument("--mpi", action="store_true", help="run the processes as MPI ranks with mpirun (OpenMPI)")
    g.add_argument(
        "--hostfile",
        metavar="FILE",
        help="with --mpi: mpirun's hostfile, to spread the ranks over machines (the run folder "
        "must be shared between them)",
    )


def spread(args, nodes):
    """The processes or MPI ranks a run's nodes are spread over, from --procs/--mpi/--hostfile;
    a spread that does not fit the ring is a bad argument."""
    with checking(args):
        s = Spread(procs=args.procs or default_procs(nodes), mpi=args.mpi, hostfile=args.hostfile)
        s.check(nodes)
    return s


def add_eth_delay_option(p):
    p.add_argument(
        "--eth-delay",
        type=positive,
        default=ETH_DELAY_CYCLES,
        metavar="CYCLES",
        help=f"Ethernet PHY+cable delay in 125 MHz cycles (default {ETH_DELAY_CYCLES} = {ETH_DELAY_CYCLES * 8} ns)",
    )


def check_eth_delay(args):
    if args.eth_delay < ETH_MIN_DELAY:
        args.parser.error(
            f"--eth-delay must be at least {ETH_MIN_DELAY} cycles (the switch reads the destination "
            "first, and each link to and from it takes a cycle)"
        )


def check_sizes(args, largest, why):
    if args.min_size > args.max_size:
        args.parser.error(f"--min-size {args.min_size} is larger than --max-size {args.max_size}")
    if args.max_size > largest:
        args.parser.error(f"--max-size is at most {largest // (1024 * 1024)}Mi ({why})")


def results_folder(text):
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
