"""The ``numavia`` command line: one module per command family, each registering its commands;
the argument types, option groups and error style they share are in :mod:`.common`."""

import signal
import sys

from numavia import __version__
from numavia.base.errors import NumaviaError

from . import bench, boards, demo, renode, sim, status, zephyr
from .common import Parser, log

__all__ = ["main", "make_parser"]

FAMILIES = (sim, zephyr, status, bench, demo, renode, boards)


def make_parser():
    parser = Parser(prog="numavia", description="Numavia cluster interconnect: simulation, host tools, benchmarks.")
    parser.add_argument("--version", action="version", version=f"numavia {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for family in FAMILIES:
        family.register(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM: stopped like Ctrl-C, so that every path that stops simulators on Ctrl-C (and
    mpirun with them) does so here too."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None):
    """Bad arguments (while parsing or after) exit 2 with argparse's one line; a run-time failure
    exits 1 with one line saying what went wrong; SIGTERM 143, Ctrl-C 130."""
    args = make_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except Terminated:
        log("terminated")
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except NumaviaError as e:
        print(f"numavia: error: {e}", file=sys.stderr)
        return 1
