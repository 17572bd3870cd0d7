"""The host side of the Renode ring's Robot tests: a VIPL host on each node, over Renode's monitor.

On the Verilator path a host reaches a node's bus through its host bridge; in Renode the test
runner reaches every machine's system bus through monitor commands. :class:`MonitorBridge` turns
the bridge's word reads and writes into ``sysbus ReadDoubleWord``/``WriteDoubleWord`` on one
machine, so :mod:`numavia.vipl` and :func:`numavia.via_ping.rdma_ping` run unchanged on top.

The Robot file imports :class:`NumaviaHost` as a keyword library; ``renode-test`` must be able to
import ``numavia`` (``numavia renode --run`` puts it on ``PYTHONPATH``).
"""

import re

try:  # Robot Framework is there only when renode-test runs this library; tests drive it without
    from robot.api import logger as robot_logger
    from robot.libraries.BuiltIn import BuiltIn
except ImportError:
    robot_logger = BuiltIn = None

from numavia.base import regmap
from numavia.base.errors import NumaviaError
from numavia.bench import latency
from numavia.soc.sim import SimConfig
from numavia.via_ping import rdma_ping
from numavia.vipl import VipOpenNic

#: Renode answers a bus read with the value in hex (``0x0000CAFE``), possibly between blank lines.
_VALUE = re.compile(r"^\s*(0x[0-9A-Fa-f]+)\s*$")
#: Wall-clock seconds a mailbox command or completion may take: the card is co-simulated RTL.
HOST_TIMEOUT_S = 300.0


class MonitorError(NumaviaError):
    pass


class Monitor:
    """Renode's monitor behind ``execute(command) -> output``, remembering the selected machine
    so bridges of different machines can share it from one thread."""

    def __init__(self, execute):
        self._execute = execute
        self._machine = None

    def on(self, machine, command):
        if machine != self._machine:
            self._execute(f'mach set "{machine}"')
            self._machine = machine
        return self._execute(command)


class MonitorBridge:
    """The host bridge interface (``read``/``write`` of 32-bit words) for one Renode machine."""

    def __init__(self, monitor, machine):
        self.monitor, self.machine = monitor, machine

    def _read_word(self, addr):
        output = self.monitor.on(self.machine, f"sysbus ReadDoubleWord {addr:#010x}")
        found = [m.group(1) for line in output.splitlines() if (m := _VALUE.match(line))]
        if len(found) != 1:
            raise MonitorError(f"{self.machine}: reading {addr:#010x} answered {output.strip()!r}")
        return int(found[0], 16)

    def read(self, addr, count=None):
        words = [self._read_word(addr + 4 * i) for i in range(1 if count is None else count)]
        return words[0] if count is None else words

    def write(self, addr, values):
        for i, value in enumerate(values if isinstance(values, (list, tuple)) else [values]):
            self.monitor.on(self.machine, f"sysbus WriteDoubleWord {addr + 4 * i:#010x} {value & 0xFFFF_FFFF:#010x}")

    def close(self):
        pass


class NumaviaHost:
    """Robot keyword library: ``RDMA Ping    node0    node1    size=64    rounds=2``."""

    ROBOT_LIBRARY_SCOPE = "SUITE"

    def __init__(self, execute=None):
        self._monitor = Monitor(execute or _robot_execute_command)

    def rdma_ping(self, machine_a, machine_b, size=64, rounds=2):
        nics = [VipOpenNic(MonitorBridge(self._monitor, m), timeout=HOST_TIMEOUT_S) for m in (machine_a, machine_b)]
        result = rdma_ping(*nics, size=int(size), rounds=int(rounds), log=_robot_log)
        _robot_log(
            f"RDMA ping {machine_a} <-> {machine_b}: {result.size} bytes, round trips "
            f"{result.round_trip_cycles} card cycles"
        )
        return result.round_trip_cycles

    def measure_access_latencies(self, nodes, shared_base, card_base, folder):
        """Every access of the latency bench, alone, through the cards of this ring; its latency is
        the card's LAC.LAST_LATENCY counter. Writes ``latency.{md,csv,json,png}`` into ``folder``."""
        nodes, shared_base, card_base = int(nodes), int(shared_base, 0), int(card_base, 0)
        config = SimConfig(nodes=nodes).card_config()
        counter = card_base + regmap.LAC.base + regmap.LAC.register("LAST_LATENCY").offset
        measured = {}
        for mode, script in latency.scripts(nodes, config).items():
            if mode != "ncc":
                continue  # NUMA mode is a strap the ring sets at power-up: one mode per ring
            cycles = []
            for node, op, addr, value in script.steps:
                bridge = MonitorBridge(self._monitor, f"node{node}")
                if op == "w":
                    bridge.write(shared_base + addr, value)
                else:
                    bridge.read(shared_base + addr)
                cycles.append(bridge.read(counter))
            for name, index in script.measured:
                measured.setdefault(name, {})[mode] = cycles[index]
                _robot_log(f"{name}: {cycles[index]} card cycles")
        figures = latency.figures(nodes, config, measured, measured_by=latency.CARD_COUNTER + ", in Renode")
        latency.report(figures, folder)
        return figures


def _robot_execute_command(command):
    if BuiltIn is None:
        raise MonitorError("no Robot Framework here: the Renode monitor is reachable only inside renode-test")
    return BuiltIn().run_keyword("Execute Command", command)


def _robot_log(message):
    if robot_logger is not None:
        robot_logger.info(message)
