"""Starting a ring simulator's processes (soc/ring_launch.py): the spread's checks, MPI missing,
log merging, and what happens when a process of a real ring fails: the run stops, the failure
names the node(s) and the reason, and no process is left behind."""

import os
import signal
import time
from pathlib import Path

import pytest

from numavia.soc import card_bench as cb
from numavia.soc import ring_launch
from numavia.soc.ring_launch import LaunchError, RingRun, Spread


def test_spread_refuses_what_cannot_run(tmp_path):
    with pytest.raises(LaunchError, match="3 processes for 2 node"):
        Spread(procs=3).check(2)
    with pytest.raises(LaunchError, match="at least 1"):
        Spread(procs=0).check(2)
    with pytest.raises(LaunchError, match="hostfile needs --mpi"):
        Spread(procs=1, hostfile=str(tmp_path / "hosts")).check(2)
    with pytest.raises(LaunchError, match="does not exist"):
        Spread(procs=1, mpi=True, hostfile=str(tmp_path / "hosts")).check(2)
    assert Spread(procs=8).fitted(3).procs == 3 and Spread(procs=2).fitted(8).procs == 2
    assert 1 <= Spread.default(64).procs <= os.cpu_count()
    assert Spread.default(1).procs == 1


def test_mpi_missing_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # no mpirun, no mpicxx
    with pytest.raises(LaunchError, match="mpirun not found: --mpi needs OpenMPI"):
        Spread(procs=2, mpi=True).check(4)


def test_logs_merge_in_completion_order(tmp_path):
    (tmp_path / "a.node0").write_text("0 16 1 7 10 30 0\n0 16 0 7 31 50 0\n")
    (tmp_path / "a.node1").write_text("1 32 1 9 5 30 0\n")
    ring_launch.merge_logs([tmp_path / "a.node0", tmp_path / "a.node1"], tmp_path / "a",
                           key=lambda line: (int(line.split()[5]), int(line.split()[0])))
    assert (tmp_path / "a").read_text().splitlines() == ["0 16 1 7 10 30 0", "1 32 1 9 5 30 0", "0 16 0 7 31 50 0"]
    assert not (tmp_path / "a.node0").exists()


# --- a real ring ------------------------------------------------------------------------------

pytest_slow = pytest.mark.slow


@pytest.fixture(scope="module")
def bench():
    return cb.build_bench(cb.bench_card_config(), log=lambda m: None)


def _simulators(run_dir):
    """Processes whose command line names ``run_dir`` (every simulator process gets it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(run_dir.resolve()).encode() in cmdline and b"--out-dir" in cmdline:
            found.append(int(proc.name))
    return found


@pytest_slow
def test_a_bad_argument_names_the_process_and_the_reason(tmp_path, bench):
    run = RingRun(bench, tmp_path, 4, ["--frobnicate"], Spread(procs=2), echo_stderr=False).start()
    assert run.wait(timeout=60) == 1
    assert run.failure.startswith("the process of nodes ")
    assert "unknown argument --frobnicate" in run.failure
    assert _simulators(tmp_path) == []


@pytest_slow
def test_a_node_process_that_dies_stops_the_run(tmp_path, bench):
    ucode = tmp_path / "ucode.hex"
    ucode.write_text("".join(f"{w:016x}\n" for w in cb.codegen.microcode_program().words))
    # A long run (far more accesses than the test waits for), in three processes.
    run = RingRun(bench, tmp_path, 6, ["--ucode", str(ucode), "--ops", "100000000"], Spread(procs=3),
                  echo_stderr=False).start()
    try:
        time.sleep(2)
        assert run.poll() is None
        victim = run.procs[1][1]   # nodes 2-3
        os.kill(victim.pid, signal.SIGKILL)
        assert run.wait(timeout=60) == 1
        assert run.failure == "the process of nodes 2-3 was killed by signal 9"
        assert _simulators(tmp_path) == []
    finally:
        run.kill()


@pytest_slow
def test_terminate_stops_every_node_at_one_cycle(tmp_path, bench):
    ucode = tmp_path / "ucode.hex"
    ucode.write_text("".join(f"{w:016x}\n" for w in cb.codegen.microcode_program().words))
    run = RingRun(bench, tmp_path, 4, ["--ucode", str(ucode), "--ops", "100000000", "--no-access-log"],
                  Spread(procs=2), echo_stderr=False).start()
    time.sleep(2)
    assert run.terminate() == 130
    hub, nodes = ring_launch.read_results(tmp_path, 4)
    assert hub["reason"] == "terminated"
    assert len({n["cycles"] for n in nodes}) == 1   # the hub stopped them all at the same cycle
    assert _simulators(tmp_path) == []


@pytest_slow
def test_a_port_in_use_names_the_node(tmp_path):
    import socket
    from simulation import build, free_port_range
    from numavia.soc import sim
    b = build(2)
    port = free_port_range(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        with pytest.raises(sim.SimError, match=f"node 1: cannot listen on 127.0.0.1:{port + 1}"):
            sim.run(b, tmp_path, ring_launch.Spread(procs=2), quiet=True, bridge_port=port, serve=True)
    assert _simulators(tmp_path) == []


def test_a_simulator_that_ignores_sigterm_is_killed(tmp_path, capsys):
    """Ctrl-C on `numavia sim --serve` must leave no process, even if a simulator is stuck."""
    stuck = tmp_path / "stuck"
    stuck.write_text("#!/bin/sh\ntrap '' TERM\nsleep 60\n")
    stuck.chmod(0o755)
    run = RingRun(stuck, tmp_path, 2, [], Spread(procs=2), echo_stderr=False).start()
    time.sleep(0.5)                     # the traps are set
    assert run.terminate(grace_seconds=0.5) == 130
    assert all(p.poll() is not None for _, p in run.procs) and run.failure is None
    assert "did not stop within 0.5 s of SIGTERM: killed" in capsys.readouterr().err
