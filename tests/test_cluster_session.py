"""Cluster session start-up: its errors, and that one session's boot does not hold up another's.

The simulator is a stand-in script with the simulator's command line, run as one process for
the whole ring: the subject is the session's start-up (port choice, waiting, cleanup), which does
not depend on what the nodes run.
"""

import json
import socket
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from numavia import cluster_session
from numavia.cluster_session import ClusterSession, SessionError
from numavia.soc import firmware
from numavia.soc.ring_launch import Spread

STAND_IN = """#!{python}
import os, socket, sys, time
args = sys.argv[1:]
port = int(args[args.index("--bridge-port") + 1])
if {exit_status} is not None:
    sys.exit({exit_status})
listeners = []
for i in range({nodes}):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port + i))
    except OSError as e:  # as the simulator says it
        sys.exit(f"sim: node {{i}}: cannot listen on 127.0.0.1:{{port + i}} ({{os.strerror(e.errno)}})")
    s.listen(1)
    listeners.append(s)
time.sleep({lifetime})   # bound, never ready
"""


def stand_in_build(tmp_path, name, *, nodes=2, exit_status=None, lifetime=600):
    folder = tmp_path / name
    (folder / "gateware").mkdir(parents=True)
    (folder / "csr.json").write_text(json.dumps({"memories": {"rom": {"size": 64}}}))
    (folder / "firmware.bin").write_bytes(b"\x13\x00\x00\x00")
    model = folder / "model"
    model.write_text(STAND_IN.format(python=sys.executable, nodes=nodes, exit_status=exit_status, lifetime=lifetime))
    model.chmod(0o755)
    return SimpleNamespace(
        config=SimpleNamespace(nodes=nodes),
        soc_dir=folder,
        model=model,
        firmware=firmware.Image(firmware.BARE_METAL, folder / "firmware.bin", firmware.ROM),
        mpi_model=None,
    )


def serving(build, run_dir, **kwargs):
    return ClusterSession(build, run_dir, spread=Spread(procs=1), **kwargs)


def bindable(base, count):
    """Whether any of the ports ``base .. base+count-1`` is free (nobody listens on it)."""
    for port in range(base, base + count):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return True
            except OSError:
                pass
    return False


def test_a_simulator_that_exits_at_once_is_a_clear_error(tmp_path):
    session = serving(stand_in_build(tmp_path, "dead", exit_status=3), tmp_path / "run")
    with pytest.raises(SessionError, match="exited with status 3 before its host bridges listened"):
        session.__enter__()
    assert [p.returncode for _, p in session.ring.procs] == [3]


def test_nodes_that_never_get_ready_time_out_and_the_simulator_is_stopped(tmp_path):
    session = serving(stand_in_build(tmp_path, "silent", lifetime=3), tmp_path / "run", ready_timeout=1.0)
    with pytest.raises(SessionError, match=r"not ready after 1.0 s \(waiting until every node was ready"):
        session.__enter__()
    assert all(p.poll() is not None for _, p in session.ring.procs)  # waited for (or killed), not left running
    assert bindable(session.port, 1)  # its ports are free again


def test_a_session_booting_does_not_hold_up_another_one_starting(tmp_path):
    booting = serving(stand_in_build(tmp_path, "booting"), tmp_path / "run-a", ready_timeout=20)
    failure = {}

    def boot():
        try:
            booting.__enter__()
        except SessionError as e:
            failure["a"] = str(e)

    thread = threading.Thread(target=boot)
    thread.start()
    try:
        while booting.ring is None or bindable(booting.port, 2):
            thread.join(0.05)
            assert thread.is_alive(), failure
        other = serving(stand_in_build(tmp_path, "other", exit_status=4), tmp_path / "run-b")
        with pytest.raises(SessionError, match="status 4"):
            other.__enter__()
        assert other.port != booting.port
        assert thread.is_alive()  # the first session is still waiting for its nodes, not timed out
    finally:
        booting.ring.kill()
        thread.join()
    assert "before every node was ready" in failure["a"]


def test_a_port_taken_between_the_pick_and_the_simulator_s_bind_is_picked_again(tmp_path, monkeypatch):
    """Another process binds a port of the range just picked before the simulator does: the
    simulator exits with the port in use, and the session starts it again on another range."""
    picked = []
    real_pick = cluster_session.free_port_range
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]

        def pick(count, start=None):
            picked.append(busy if not picked else real_pick(count, start))
            return picked[-1]

        monkeypatch.setattr(cluster_session, "free_port_range", pick)
        session = serving(stand_in_build(tmp_path, "raced", lifetime=3), tmp_path / "run", ready_timeout=5.0)
        with pytest.raises(SessionError, match="before every node was ready"):  # bound, then never ready
            session.__enter__()
    assert len(picked) == 2 and session.port == picked[1] != busy


def test_free_port_ranges_are_free_and_differ_between_processes(monkeypatch):
    # Two processes start their searches at different ranges. Whether the ports are free is
    # taken as yes here: a port another test's simulator holds meanwhile moves a search on to the
    # next range, which may be where the other process's starts.
    with monkeypatch.context() as every_port_free:
        every_port_free.setattr(cluster_session, "_can_bind", lambda port: True)
        every_port_free.setattr(cluster_session.os, "getpid", lambda: 1000)
        first = cluster_session.free_port_range(4)
        every_port_free.setattr(cluster_session.os, "getpid", lambda: 1001)
        assert cluster_session.free_port_range(4) != first
    monkeypatch.setattr(cluster_session.os, "getpid", lambda: 1000)
    base = cluster_session.free_port_range(4)
    # A range with a port in use is passed over.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 2))
        other = cluster_session.free_port_range(4)
    assert not other <= base + 2 < other + 4


def test_port_ranges_stay_below_the_ephemeral_ports(monkeypatch):
    """A connection's local port is taken from the ephemeral range at any moment: a simulator's
    listening port must not be one of those, whatever the process id."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for pid in range(0, 4000, 37):
        monkeypatch.setattr(cluster_session.os, "getpid", lambda pid=pid: pid)
        assert cluster_session.free_port_range(8) + 8 <= low
