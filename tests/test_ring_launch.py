"""Starting a ring simulator's processes (soc/ring_launch.py): the spread's checks, MPI missing,
log merging, standard input going to the one process that runs the node whose console reads it,
and what happens when a process of a real ring fails: the run stops, the failure names the node(s)
and the reason, and no process is left behind."""

import contextlib
import os
import shutil
import signal
import socket
import sys
import time

import pytest
from support.ring_sim import build, free_port_range, simulator_processes

from numavia.soc import card_bench as cb
from numavia.soc import ring_launch, sim
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
    monkeypatch.setenv("PATH", str(tmp_path))  # no mpirun, no mpicxx
    with pytest.raises(LaunchError, match="mpirun not found: --mpi needs OpenMPI"):
        Spread(procs=2, mpi=True).check(4)


def test_logs_merge_in_completion_order(tmp_path):
    (tmp_path / "a.node0").write_text("0 16 1 7 10 30 0\n0 16 0 7 31 50 0\n")
    (tmp_path / "a.node1").write_text("1 32 1 9 5 30 0\n")
    ring_launch.merge_logs(
        [tmp_path / "a.node0", tmp_path / "a.node1"],
        tmp_path / "a",
        key=lambda line: (int(line.split()[5]), int(line.split()[0])),
    )
    assert (tmp_path / "a").read_text().splitlines() == ["0 16 1 7 10 30 0", "1 32 1 9 5 30 0", "0 16 0 7 31 50 0"]
    assert not (tmp_path / "a.node0").exists()


# Stands in for a simulator: writes what its standard input holds to stdin.<rank> in the run folder.
STDIN_READER = """#!{python}
import os, sys
args = sys.argv
rank = args[args.index("--rank") + 1] if "--rank" in args else os.environ["OMPI_COMM_WORLD_RANK"]
text = sys.stdin.read()
with open(os.path.join(args[args.index("--out-dir") + 1], "stdin." + rank), "w") as f:
    f.write(text)
"""


@contextlib.contextmanager
def standard_input(path):
    """This process's file descriptor 0 reads ``path`` meanwhile (the launcher passes fd 0 on)."""
    saved = os.dup(0)
    with open(path) as f:
        os.dup2(f.fileno(), 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def _what_each_process_read(tmp_path, spread, stdin_node):
    reader = tmp_path / "reader"
    reader.write_text(STDIN_READER.format(python=sys.executable))
    reader.chmod(0o755)
    (tmp_path / "typed").write_text("numavia status\n")
    run_dir = tmp_path / "run"
    with standard_input(tmp_path / "typed"):
        run = RingRun(
            reader, run_dir, 4, [], spread, mpi_binary=reader, echo_stderr=False, stdin_node=stdin_node
        ).start()
    assert run.wait(timeout=60) == 0, run.stderr_log
    return {rank: (run_dir / f"stdin.{rank}").read_text() for rank in range(spread.procs)}


@pytest.mark.parametrize("stdin_node", [2, None])
def test_standard_input_goes_to_the_process_of_the_console_node_only(tmp_path, stdin_node):
    read = _what_each_process_read(tmp_path, Spread(procs=2), stdin_node)  # nodes 0-1, 2-3
    assert read == {0: "", 1: "numavia status\n" if stdin_node == 2 else ""}


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI (make setup installs it)")
@pytest.mark.parametrize("stdin_node", [3, None])
def test_mpirun_forwards_standard_input_to_the_rank_of_the_console_node_only(tmp_path, stdin_node):
    read = _what_each_process_read(tmp_path, Spread(procs=2, mpi=True), stdin_node)
    assert read == {0: "", 1: "numavia status\n" if stdin_node == 3 else ""}


# --- a real ring ------------------------------------------------------------------------------

pytest_slow = pytest.mark.slow


@pytest.fixture(scope="module")
def bench():
    return cb.build_bench(cb.bench_card_config(), log=lambda m: None)


@pytest_slow
def test_a_bad_argument_names_the_process_and_the_reason(tmp_path, bench):
    run = RingRun(bench, tmp_path, 4, ["--frobnicate"], Spread(procs=2), echo_stderr=False).start()
    assert run.wait(timeout=60) == 1
    assert run.failure.startswith("the process of nodes ")
    assert "unknown argument --frobnicate" in run.failure
    assert simulator_processes(tmp_path) == []


@pytest_slow
def test_a_node_process_that_dies_stops_the_run(tmp_path, bench):
    ucode = tmp_path / "ucode.hex"
    ucode.write_text("".join(f"{w:016x}\n" for w in cb.codegen.microcode_program().words))
    # A long run (far more accesses than the test waits for), in three processes.
    run = RingRun(
        bench, tmp_path, 6, ["--ucode", str(ucode), "--ops", "100000000"], Spread(procs=3), echo_stderr=False
    ).start()
    try:
        time.sleep(2)
        assert run.poll() is None
        victim = run.procs[1][1]  # nodes 2-3
        os.kill(victim.pid, signal.SIGKILL)
        assert run.wait(timeout=60) == 1
        assert run.failure == "the process of nodes 2-3 was killed by signal 9"
        assert simulator_processes(tmp_path) == []
    finally:
        run.kill()


@pytest_slow
def test_terminate_stops_every_node_at_one_cycle(tmp_path, bench):
    ucode = tmp_path / "ucode.hex"
    ucode.write_text("".join(f"{w:016x}\n" for w in cb.codegen.microcode_program().words))
    run = RingRun(
        bench,
        tmp_path,
        4,
        ["--ucode", str(ucode), "--ops", "100000000", "--no-access-log"],
        Spread(procs=2),
        echo_stderr=False,
    ).start()
    time.sleep(2)
    assert run.terminate() == 130
    hub, nodes = ring_launch.read_results(tmp_path, 4)
    assert hub["reason"] == "terminated"
    assert len({n["cycles"] for n in nodes}) == 1  # the hub stopped them all at the same cycle
    assert simulator_processes(tmp_path) == []


@pytest_slow
@pytest.mark.parametrize(
    "what, option",
    [("", {"bridge_port": "PORT", "serve": True}), ("console ", {"console_port": "PORT", "max_cycles": 1000})],
    ids=["host-bridge", "console"],
)
def test_a_port_in_use_names_the_node(tmp_path, what, option):
    """Node i's host bridge, and its console, listen on PORT + i in the process that runs node i."""
    b = build(2)
    port = free_port_range(2)
    kwargs = {k: port if v == "PORT" else v for k, v in option.items()}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        with pytest.raises(
            sim.SimError, match=f"the process of node 1 .*node 1: {what}cannot listen on 127.0.0.1:{port + 1}"
        ):
            sim.run(b, tmp_path, ring_launch.Spread(procs=2), quiet=True, **kwargs)
    assert simulator_processes(tmp_path) == []


def test_a_simulator_that_ignores_sigterm_is_killed(tmp_path, capsys):
    """Ctrl-C on `numavia sim --serve` must leave no process, even if a simulator is stuck."""
    stuck = tmp_path / "stuck"
    stuck.write_text("#!/bin/sh\ntrap '' TERM\nsleep 60\n")
    stuck.chmod(0o755)
    run = RingRun(stuck, tmp_path, 2, [], Spread(procs=2), echo_stderr=False).start()
    time.sleep(0.5)  # the traps are set
    assert run.terminate(grace_seconds=0.5) == 130
    assert all(p.poll() is not None for _, p in run.procs) and run.failure is None
    assert "did not stop within 0.5 s of SIGTERM: killed" in capsys.readouterr().err


def test_a_spread_says_itself_in_words():
    assert [str(s) for s in (Spread(), Spread(procs=2), Spread(procs=1, mpi=True), Spread(procs=8, mpi=True))] == [
        "1 process",
        "2 processes",
        "1 MPI rank",
        "8 MPI ranks",
    ]
