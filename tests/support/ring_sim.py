"""Shared helpers for tests that build and run rings of simulated nodes."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from numavia.cluster_session import free_port_range  # noqa: F401 (re-exported for the tests)
from numavia.soc import sim

_builds = {}


def as_from_a_terminal():
    """``preexec_fn`` for a command a test stops with SIGINT, as Ctrl-C does: SIGINT handled as
    from a terminal even when the tests run as a background job of a non-interactive shell, which
    ignores it and whose children inherit that (Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def build(nodes=2, **kwargs):
    """The (cached) build for ``nodes`` nodes; built once per test process."""
    config = sim.SimConfig(nodes=nodes, **kwargs)
    if config not in _builds:
        _builds[config] = sim.build_all(config, log=lambda message: None)
    return _builds[config]


def simulator_processes(run_dir):
    """Processes whose command line names ``run_dir`` after ``--out-dir``, as every simulator
    process (and mpirun) of a ring run in that folder has it."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(Path(run_dir).resolve()).encode() in cmdline and b"--out-dir" in cmdline:
            found.append(int(proc.name))
    return found


def kill_ring(proc, run_dir):
    """What a test does last with a ring it started: kill the launcher ``proc`` if it still runs,
    and every simulator process (and mpirun) of ``run_dir``, which a killed launcher leaves
    behind; a test whose ring did not stop as asked then fails without leaving a simulation."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in simulator_processes(run_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def served_cli(tmp_path, nodes, *sim_args):
    """``numavia sim --serve`` of ``nodes`` nodes in the background, as a user starts it; once every
    node's firmware is ready, yields ``cli(*args)``, which runs another ``numavia`` command against
    it. The run folder is ``tmp_path / "run"``; the command's stderr goes to ``tmp_path / "sim.err"``
    (a pipe nobody reads would fill with build output and block the simulator)."""
    env = {**os.environ, "NUMAVIA_SESSION": str(tmp_path / "session.json")}
    cli = [sys.executable, "-m", "numavia.cli"]
    err = tmp_path / "sim.err"
    # The host bridges and the consoles from one free range picked by this process: the CLI's
    # default consoles start at the same port for every run, and two tests serving at once on
    # parallel workers both found it free before either bound it.
    ports = free_port_range(2 * nodes)
    with open(err, "w") as stderr:
        proc = subprocess.Popen(
            cli
            + [
                "sim",
                "--nodes",
                str(nodes),
                "--serve",
                "--quiet",
                "--bridge-port",
                str(ports),
                "--console-port",
                str(ports + nodes),
                "--out",
                str(tmp_path / "run"),
                *sim_args,
            ],
            env=env,
            stderr=stderr,
            text=True,
        )
    try:
        logs = [tmp_path / "run" / f"node{i}.log" for i in range(nodes)]
        ready = lambda log: log.exists() and sim.READY_MARKER in log.read_text()
        for _ in range(6000):
            if ((tmp_path / "session.json").exists() and all(map(ready, logs))) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, err.read_text()
        yield lambda *args: subprocess.run(cli + list(args), env=env, capture_output=True, text=True)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
        kill_ring(proc, tmp_path / "run")
