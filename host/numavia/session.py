"""The running simulation, as host tools find it: ``numavia sim --serve`` records its host-bridge
and console ports and memory map in a session file; ``numavia mem``, ``numavia status`` and
``numavia console`` attach to it (the way LiteX tools attach to a board through litex_server)."""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from numavia.base import buildcache, regmap
from numavia.base.errors import NumaviaError
from numavia.bridge import HostBridge
from numavia.console import NodeConsole


class SessionError(NumaviaError):
    pass


def session_path() -> Path:
    """Where the session is recorded: $NUMAVIA_SESSION, else build/run/session.json."""
    env = os.environ.get("NUMAVIA_SESSION")
    return Path(env) if env else buildcache.build_root() / "run" / "session.json"


@dataclass
class Region:
    name: str
    base: int
    size: int

    def contains(self, addr: int, length: int = 4) -> bool:
        return self.base <= addr and addr + length <= self.base + self.size


@dataclass
class Session:
    pid: int
    nodes: int
    bridge_port: int
    regions: list[Region]
    console_port: int | None = None

    def save(self) -> None:
        path = session_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "pid": self.pid,
                    "nodes": self.nodes,
                    "bridge_port": self.bridge_port,
                    "regions": [r.__dict__ for r in self.regions],
                    "console_port": self.console_port,
                },
                indent=1,
            )
        )

    @staticmethod
    def remove() -> None:
        session_path().unlink(missing_ok=True)

    @classmethod
    def load(cls) -> Self:
        path = session_path()
        if not path.exists():
            raise SessionError("no simulation is running (start one with `numavia sim --serve`)")
        data = json.loads(path.read_text())
        try:
            os.kill(data["pid"], 0)
        except ProcessLookupError:
            raise SessionError(f"the simulation recorded in {path} (pid {data['pid']}) is gone") from None
        return cls(
            data["pid"],
            data["nodes"],
            data["bridge_port"],
            [Region(**r) for r in data["regions"]],
            data.get("console_port"),
        )

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise SessionError(f"the SoC has no {name} region")

    def check_address(self, node: int, addr: int, length: int = 4) -> None:
        self._check_node(node)
        if addr % 4:
            raise SessionError(f"address {addr:#010x} is not word aligned")
        if not any(r.contains(addr, length) for r in self.regions):
            known = ", ".join(f"{r.name} {r.base:#010x}+{r.size:#x}" for r in self.regions)
            raise SessionError(f"{addr:#010x} is in no region of node {node}'s memory map ({known})")

    def _check_node(self, node: int) -> None:
        if not 0 <= node < self.nodes:
            raise SessionError(f"node {node} is not in the ring (nodes 0..{self.nodes - 1})")

    def bridge(self, node: int) -> HostBridge:
        self._check_node(node)
        return HostBridge(self.bridge_port + node)

    def console(self, node: int) -> NodeConsole:
        self._check_node(node)
        if self.console_port is None:
            raise SessionError("the simulation serves no consoles")
        return NodeConsole(self.console_port + node)


def regions_from_csr_json(path: str | os.PathLike[str]) -> list[Region]:
    memories = json.loads(Path(path).read_text())["memories"]
    return [Region(name, m["base"], m["size"]) for name, m in memories.items()]


def read_card(bridge: HostBridge, session: Session, block: str, register: str) -> int:
    """A card register of one node."""
    return bridge.read(session.region("card").base + regmap.CARD.address(block, register))
