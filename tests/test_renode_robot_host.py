"""The Renode Robot tests' host (numavia.renode.robot_host) and the RDMA ping it runs
(numavia.via_ping).

Renode cannot be installed here, so the generated keyword library is loaded as renode-test would
load it and its RDMA ping is run against the Verilator ring, through a monitor stand-in that
accepts exactly the monitor commands the library may send (machine selection and 32-bit system
bus reads and writes, in Renode's syntax) and answers reads the way Renode prints them.
"""

import importlib.util
import re
import site

import pytest
from support.via_system import session
from test_renode import MODEL_ID, fixture_csr

from numavia.renode import ROBOT_FILE, render
from numavia.renode.robot import HOST_LIBRARY_FILE
from numavia.renode.robot_host import Monitor, MonitorBridge, MonitorError
from numavia.soc.sim import READY_MARKER, SimConfig
from numavia.via_ping import PingError, rdma_ping

_MACH_SET = re.compile(r'^mach set "(node\d+)"$')
_READ = re.compile(r"^sysbus ReadDoubleWord (0x[0-9a-f]{8})$")
_WRITE = re.compile(r"^sysbus WriteDoubleWord (0x[0-9a-f]{8}) (0x[0-9a-f]{8})$")


class RingMonitor:
    """Renode's monitor for the machines ``node0``.. of a running Verilator ring."""

    def __init__(self, bridges):
        self.bridges = bridges
        self.machine = None
        self.commands = 0

    def __call__(self, command):
        self.commands += 1
        if m := _MACH_SET.match(command):
            self.machine = int(m.group(1)[4:])
            return ""
        assert self.machine is not None, f"{command!r} before any `mach set`"
        bridge = self.bridges[self.machine]
        if m := _READ.match(command):
            return f"0x{bridge.read(int(m.group(1), 16)):08X}\n\n"
        if m := _WRITE.match(command):
            bridge.write(int(m.group(1), 16), int(m.group(2), 16))
            return ""
        raise AssertionError(f"not a monitor command the library may send: {command!r}")


def load_generated_library(folder, text):
    """Import the generated keyword library file the way Robot does: by path."""
    path = folder / HOST_LIBRARY_FILE
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("numavia_host", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.numavia_host


def ping_arguments(robot_text):
    """The machines and keyword arguments of the Robot file's `RDMA Ping` step."""
    line = next(line for line in robot_text.splitlines() if line.strip().startswith("RDMA Ping    "))
    cells = line.strip().split("    ")[1:]
    return [c for c in cells if "=" not in c], dict(c.split("=", 1) for c in cells if "=" in c)


# --- Without a simulation ----------------------------------------------------------------------------


def test_bridge_reads_renode_output_and_selects_machines_only_when_they_change():
    sent = []

    def execute(command):
        sent.append(command)
        return "\r\n0x0000CAFE\r\n" if "Read" in command else ""

    monitor = Monitor(execute)
    a, b = MonitorBridge(monitor, "node0"), MonitorBridge(monitor, "node1")
    assert a.read(0x8000_0000, 2) == [0xCAFE, 0xCAFE]
    b.write(0x9000_0004, [1, 0xFFFF_FFFF])
    assert a.read(0x8000_0008) == 0xCAFE
    assert sent == [
        'mach set "node0"',
        "sysbus ReadDoubleWord 0x80000000",
        "sysbus ReadDoubleWord 0x80000004",
        'mach set "node1"',
        "sysbus WriteDoubleWord 0x90000004 0x00000001",
        "sysbus WriteDoubleWord 0x90000008 0xffffffff",
        'mach set "node0"',
        "sysbus ReadDoubleWord 0x80000008",
    ]


@pytest.mark.parametrize("answer", ["", "There is no peripheral at 0x80000000", "0x1\n0x2"])
def test_bridge_refuses_an_answer_that_is_not_one_value(answer):
    bridge = MonitorBridge(Monitor(lambda command: answer), "node3")
    with pytest.raises(MonitorError, match=r"node3: reading 0x80000000 answered"):
        bridge.read(0x8000_0000)


@pytest.mark.parametrize(
    "size, rounds, problem",
    [(0, 1, "not within 1..65536"), (65537, 1, "not within 1..65536"), (64, 0, "at least one round")],
)
def test_ping_refuses_bad_arguments_before_touching_a_card(size, rounds, problem):
    with pytest.raises(PingError, match=problem):
        rdma_ping(None, None, size=size, rounds=rounds)


def test_robot_file_pings_with_the_generated_library():
    files = render(
        fixture_csr(), nodes=2, card_config=SimConfig().card_config(), ready_marker=READY_MARKER, card_model_id=MODEL_ID
    )
    robot = files[ROBOT_FILE]
    assert f"Library           ${{CURDIR}}/{HOST_LIBRARY_FILE}" in robot
    machines, kwargs = ping_arguments(robot)
    assert machines == ["node0", "node1"] and int(kwargs["size"]) > 0 and int(kwargs["rounds"]) > 0
    assert "Skip" not in robot.split("RDMA Ping Both Ways")[1]


# --- On the Verilator ring ---------------------------------------------------------------------------


@pytest.mark.slow
def test_generated_robot_ping_runs_on_the_verilator_ring(tmp_path_factory, tmp_path, monkeypatch):
    files = render(
        fixture_csr(), nodes=2, card_config=SimConfig().card_config(), ready_marker=READY_MARKER, card_model_id=MODEL_ID
    )
    monkeypatch.setenv("NUMAVIA_SITE", ":".join(site.getsitepackages()))
    library = load_generated_library(tmp_path, files[HOST_LIBRARY_FILE])
    machines, kwargs = ping_arguments(files[ROBOT_FILE])
    with session(tmp_path_factory, "robot-ping") as ring:
        monitor = RingMonitor(ring.bridges)
        host = library(execute=monitor)
        round_trips = host.rdma_ping(*machines, **kwargs)
        assert len(round_trips) == int(kwargs["rounds"]) and all(c > 0 for c in round_trips)
        counters = [ring.nic(n).counters() for n in (0, 1)]
    assert monitor.commands > 100
    assert all(c["RX_PROTECTION"] == 0 for c in counters)
