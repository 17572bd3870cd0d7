"""A running cluster simulation the host tools talk to: the ring in serve mode, one host
bridge per node (and, asked for, a console per node), ready once every node's firmware printed
its ready line.

    with ClusterSession(build, run_dir, eth_loss=0.01) as session:
        nic0 = session.nic(0)
"""

import errno
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Self

from numavia.base.errors import NumaviaError
from numavia.bridge import BridgeError, HostBridge
from numavia.console import NodeConsole
from numavia.soc import sim
from numavia.soc.ring_launch import RingRun, Spread
from numavia.vipl import Nic, VipOpenNic


class SessionError(NumaviaError):
    pass


#: Sessions of one process pick their ports one at a time: a session's ports are free only until
#: its simulator binds them, so two picking together would pick the same ones. Booting the nodes
#: happens outside the lock.
_PICKING_PORTS = threading.Lock()


def _can_bind(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# Below Linux's ephemeral ports (32768-60999 by default): an outgoing connection of any process
# (another session's bridge clients) cannot take a port of the range between the check here and
# the simulator's bind, as one did at 51130 while two benchmarks ran side by side.
_PORTS_FROM, _PORTS_TO, _PORT_STEP = 23000, 32768, 97
#: How a simulator that found a port of its range taken says so (the C library's message), and how
#: many ranges a session tries before it gives up.
_PORT_IN_USE = os.strerror(errno.EADDRINUSE)
_PORT_ATTEMPTS = 4


def free_port_range(count: int, start: int | None = None) -> int:
    """A base port such that ``base .. base+count-1`` are free on 127.0.0.1. The search starts at
    ``start``, or by default at a place that depends on the process id: processes that pick at
    the same time (parallel test workers, two users' sessions) then seldom try the same ports
    before their simulators bind them."""
    first = start or _PORTS_FROM
    slots = (_PORTS_TO - count - first) // _PORT_STEP
    if slots <= 0:
        raise SessionError(f"no TCP port range of {count} from {first} on 127.0.0.1")
    offset = 0 if start else os.getpid() % slots
    for slot in range(slots):
        base = first + (offset + slot) % slots * _PORT_STEP
        if all(_can_bind(port) for port in range(base, base + count)):
            return base
    raise SessionError("no free TCP port range on 127.0.0.1")


class ClusterSession:
    """``spread``: processes or MPI ranks of the ring (ring_launch.Spread; default one process
    per core); ``consoles``: serve each node's console on a port too; ``ready_timeout``: wall
    seconds for the nodes to boot (a dead simulator fails at once; this only catches a hung one,
    so it is generous: a booting node competes for two cores with builds and other rings);
    ``sim_kwargs``: the simulator's options (sim.simulator_args)."""

    def __init__(
        self,
        build: sim.Build,
        run_dir: str | os.PathLike[str],
        *,
        ready_timeout: float = 300.0,
        spread: Spread | None = None,
        consoles: bool = False,
        **sim_kwargs: Any,
    ) -> None:
        self.build = build
        self.nodes = build.config.nodes
        self.run_dir = Path(run_dir).resolve()
        self.ready_timeout = ready_timeout
        self.spread = spread
        self.consoles = consoles
        self.console_port: int | None = None
        self.sim_kwargs = sim_kwargs
        self.ring: RingRun | None = None
        self.bridges: list[HostBridge] = []
        self._nics: dict[int, Nic] = {}

    def __enter__(self) -> Self:
        deadline = time.monotonic() + self.ready_timeout
        try:
            self._start_listening(deadline)
            self._wait_until(deadline, self._nodes_ready, "every node was ready")
            for i in range(self.nodes):
                self.bridges.append(self._connect(self.port + i))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start_listening(self, deadline: float) -> None:
        """Start the ring on a free port range and wait until its bridges listen. The pick cannot
        hold the ports: another process (a parallel test worker, another user's ring) may bind
        one before the simulator does, which then exits at once with the port in use; the ring
        starts again on the next free range, a few times."""
        ports = self._port_count()
        start = None
        for attempt in range(_PORT_ATTEMPTS):
            with _PICKING_PORTS:
                self.port = free_port_range(ports, start)
                self.console_port = self.port + self.nodes if self.consoles else None
                self.ring = sim.start(
                    self.build,
                    self.run_dir,
                    self.spread,
                    bridge_port=self.port,
                    serve=True,
                    until_disconnect=True,
                    quiet=True,
                    echo_stderr=False,
                    console_port=self.console_port,
                    **self.sim_kwargs,
                )
                try:
                    self._wait_until(deadline, self._ports_bound, "its host bridges listened")
                    return
                except SessionError:
                    if attempt == _PORT_ATTEMPTS - 1 or _PORT_IN_USE not in (self.ring.failure or ""):
                        raise
            above = self.port + _PORT_STEP
            start = above if above + ports < _PORTS_TO else _PORTS_FROM

    def _port_count(self) -> int:
        """The session's ports: a bridge per node, and a console per node if asked for."""
        return self.nodes * (2 if self.consoles else 1)

    def _ports_bound(self) -> bool:
        return not any(_can_bind(self.port + i) for i in range(self._port_count()))

    def _nodes_ready(self) -> bool:
        logs = [self.run_dir / f"node{i}.log" for i in range(self.nodes)]
        return all(p.exists() and sim.READY_MARKER in p.read_text() for p in logs)

    def _wait_until(self, deadline: float, done: Callable[[], bool], event: str) -> None:
        assert self.ring is not None  # started before anything waits on it
        while not done():
            if self.ring.poll() is not None:
                why = self.ring.failure or f"the simulator exited with status {self.ring.exit_status()}"
                raise SessionError(f"{why} before {event} (see {self.run_dir})")
            if time.monotonic() > deadline:
                raise SessionError(
                    f"nodes not ready after {self.ready_timeout} s (waiting until {event}; logs in {self.run_dir})"
                )
            time.sleep(0.05)

    def _connect(self, port: int) -> HostBridge:
        for _ in range(200):
            try:
                return HostBridge(port)
            except BridgeError:
                time.sleep(0.05)
        return HostBridge(port)

    def nic(self, node: int, **kwargs: Any) -> Nic:
        if node not in self._nics:
            self._nics[node] = VipOpenNic(self.bridges[node], **kwargs)
        return self._nics[node]

    def console(self, node: int) -> NodeConsole:
        """Node ``node``'s console (a session started with ``consoles=True``)."""
        if self.console_port is None:
            raise SessionError("this session serves no consoles (ClusterSession(..., consoles=True))")
        return NodeConsole(self.console_port + node)

    def log(self, node: int) -> str:
        return (self.run_dir / f"node{node}.log").read_text()

    def __exit__(self, *exc: object) -> Literal[False]:
        for b in self.bridges:
            try:
                b.close()
            except OSError:
                pass
        self.bridges = []
        if self.ring is not None:
            try:  # the hub stops the run once the last host disconnected
                self.ring.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.ring.terminate()
            self._summary = sim.summarize(self.ring)
        return False

    def run_summary(self) -> dict[str, Any]:
        """The run's ``run.json`` (cycles, wall time), once the session has ended."""
        summary = getattr(self, "_summary", None)
        if summary is None:
            raise SessionError(f"the simulator wrote no results in {self.run_dir}")
        return summary

    def link_stats(self) -> dict[str, Any] | None:
        """The Ethernet switch's ``eth_link.json`` (its fault rates, and per port what it sent,
        delivered, lost, corrupted, duplicated, reordered), or None if there was no switch."""
        path = self.run_dir / "eth_link.json"
        return json.loads(path.read_text()) if path.exists() else None

    def link_totals(self) -> dict[str, int] | None:
        """The switch's per-port counts summed over its ports (``{"lost": n, ...}``), or None."""
        stats = self.link_stats()
        if stats is None:
            return None
        return {name: sum(port[name] for port in stats["ports"]) for name in stats["ports"][0]}
