"""The full system ring: N nodes (VexRiscv + firmware + card) in one Verilator model, reached
through their host bridges as a host would, and driven by traces at their host ports."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.ring_sim import as_from_a_terminal, build, free_port_range, kill_ring, simulator_processes

from numavia.base import codegen, regmap, trace
from numavia.bridge import BridgeError, HostBridge
from numavia.soc import sim

pytestmark = pytest.mark.slow

SHARED = 0x9000_0000


def test_four_nodes_boot_and_share_memory(tmp_path):
    b = build(4)
    port = free_port_range(4)
    ring = sim.start(b, tmp_path, bridge_port=port, serve=True, until_disconnect=True, quiet=True)
    try:
        bridges = [_connect(port + i) for i in range(4)]
        _wait_ready(tmp_path, 4)
        program = codegen.microcode_program()
        for node in range(4):
            log = (tmp_path / f"node{node}.log").read_text()
            assert f"node id set to {node} (read back {node})" in log
            assert f"microcode loaded and verified ({len(program.words)} words" in log
        # A write on node 0 into node 2's slice is seen by nodes 1 and 3 (and by node 2 itself).
        addr = SHARED + 2 * 256 * 1024 + 0x40
        bridges[0].write(addr, 0x5EED_0002)
        assert [bridges[n].read(addr) for n in (1, 3, 2)] == [0x5EED_0002] * 3
        bridges[3].write(addr + 4, 0x5EED_0003)  # and the other way round
        assert bridges[0].read(addr + 4) == 0x5EED_0003
        for br in bridges:
            br.close()
        assert ring.wait(timeout=60) == 0
        assert sim.summarize(ring)["reason"] == "the host disconnected"
    finally:
        ring.kill()


def _connect(port):
    for _ in range(600):
        try:
            return HostBridge(port)
        except BridgeError:
            time.sleep(0.1)
    raise AssertionError(f"no host bridge on port {port}")


def _wait_ready(run_dir, nodes, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = [(run_dir / f"node{i}.log") for i in range(nodes)]
        if all(p.exists() and sim.READY_MARKER in p.read_text() for p in logs):
            return
        time.sleep(0.2)
    raise AssertionError("nodes did not get ready")


def test_four_node_runs_are_deterministic(tmp_path):
    results = []
    for attempt in ("a", "b"):
        code, summary = sim.run(build(4), tmp_path / attempt, quiet=True, max_cycles=5_000_000)
        assert code == 0
        logs = [(tmp_path / attempt / f"node{i}.log").read_text() for i in range(4)]
        results.append((summary["cycles"], summary["marker_cycles"], logs))
    assert results[0] == results[1]


def test_ctrl_c_stops_the_served_simulation_and_leaves_no_process(tmp_path):
    env = {**os.environ, "NUMAVIA_SESSION": str(tmp_path / "session.json")}
    port = free_port_range(2)
    with open(tmp_path / "sim.err", "w") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "numavia.cli",
                "sim",
                "--nodes",
                "2",
                "--serve",
                "--quiet",
                "--bridge-port",
                str(port),
                "--out",
                str(tmp_path / "run"),
            ],
            env=env,
            stderr=stderr,
            text=True,
            preexec_fn=as_from_a_terminal,
        )
    try:
        deadline = time.monotonic() + 900  # a first run builds the model: minutes on 2 busy cores
        while not (tmp_path / "session.json").exists():
            assert proc.poll() is None, (tmp_path / "sim.err").read_text()
            assert time.monotonic() < deadline, "no session after 15 minutes"
            time.sleep(0.1)
        session = json.loads((tmp_path / "session.json").read_text())
        # Host tools attach to it; a bad address is refused with one line.
        cli = [sys.executable, "-m", "numavia.cli"]
        ok = subprocess.run(
            cli + ["mem", "read", "--node", "1", hex(0x8000_0000)], env=env, capture_output=True, text=True
        )
        assert ok.returncode == 0 and f"{regmap.CARD_ID:#010x}" in ok.stdout
        bad = subprocess.run(
            cli + ["mem", "read", "--node", "0", "0x70000000"], env=env, capture_output=True, text=True
        )
        assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "in no region" in bad.stderr
        bad_node = subprocess.run(
            cli + ["mem", "read", "--node", "5", hex(SHARED)], env=env, capture_output=True, text=True
        )
        assert bad_node.returncode == 1 and "not in the ring" in bad_node.stderr
        status = subprocess.run(cli + ["status"], env=env, capture_output=True, text=True)
        assert status.returncode == 0 and status.stdout.count("loaded") >= 2
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        time.sleep(0.5)
        with pytest.raises(ProcessLookupError):
            os.kill(session["pid"], 0)
        assert simulator_processes(tmp_path / "run") == []  # every node's process is gone too
        assert not (tmp_path / "session.json").exists()
    finally:
        kill_ring(proc, tmp_path / "run")


def test_sigterm_stops_an_mpi_ring_and_leaves_no_process(tmp_path):
    """A job system or `kill` stops `numavia sim` with SIGTERM: mpirun and every rank go too."""
    env = {**os.environ, "NUMAVIA_SESSION": str(tmp_path / "session.json")}
    with open(tmp_path / "sim.err", "w") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "numavia.cli",
                "sim",
                "--nodes",
                "2",
                "--serve",
                "--quiet",
                "--mpi",
                "--procs",
                "2",
                "--bridge-port",
                str(free_port_range(4)),
                "--out",
                str(tmp_path / "run"),
            ],
            env=env,
            stderr=stderr,
            text=True,
        )
    try:
        deadline = time.monotonic() + 900
        while not (tmp_path / "session.json").exists():
            assert proc.poll() is None, (tmp_path / "sim.err").read_text()
            assert time.monotonic() < deadline, "no session after 15 minutes"
            time.sleep(0.1)
        assert simulator_processes(tmp_path / "run")  # mpirun (its command line names the run folder)
        proc.terminate()
        proc.wait(timeout=60)
        time.sleep(0.5)
        assert simulator_processes(tmp_path / "run") == []
        assert not (tmp_path / "session.json").exists()
    finally:
        kill_ring(proc, tmp_path / "run")


def test_trace_replay_on_the_host_ports_honours_barriers(tmp_path):
    b = build(2)
    a = 0x100  # in node 0's slice (host-port addresses)
    remote = 256 * 1024 + 0x200  # in node 1's slice
    traces = tmp_path / "traces"
    traces.mkdir()
    trace.write_trace(
        traces / "node0.trace", 0, [trace.write_access(a, 0x11), trace.barrier(0), trace.read_access(remote, words=2)]
    )
    trace.write_trace(
        traces / "node1.trace",
        1,
        [trace.write_access(remote, 0x22, gap=3000), trace.barrier(0, gap=1500), trace.read_access(a)],
    )
    log = tmp_path / "access.log"
    code, summary = sim.run(b, tmp_path / "run", quiet=True, trace_dir=traces, max_cycles=5_000_000, access_log=log)
    assert code == 0 and summary["reason"] == "every trace is done"
    stats = {t["node"]: t for t in summary["trace"]}
    assert stats[0]["accesses"] == stats[1]["accesses"] == 2
    assert stats[0]["errors"] == stats[1]["errors"] == 0
    # Node 0 waited at the barrier for node 1's compute before its write and before the barrier.
    assert stats[0]["barrier"] >= 4500 > stats[1]["barrier"]
    assert stats[1]["compute"] == 4500
    # Completion order: both writes, then the reads, each of which sees the other node's write.
    entries = [line.split() for line in log.read_text().splitlines()]
    order = [(int(node), int(write)) for node, _, write, *_ in entries]
    assert sorted(order[:2]) == [(0, 1), (1, 1)] and sorted(order[2:]) == [(0, 0), (1, 0)]
    reads = {int(e[0]): int(e[3]) for e in entries if e[2] == "0"}
    assert reads == {0: 0x22, 1: 0x11}
    done = {(int(e[0]), int(e[2])): int(e[5]) for e in entries}
    assert min(done[(0, 0)], done[(1, 0)]) > max(done[(0, 1)], done[(1, 1)])
