"""Start a ring simulator's processes or MPI ranks, watch them, and merge what they wrote.

A ring simulator binary (``node_main.cpp``, ``card_main.cpp``) runs one process's share of the
ring. Locally, :class:`RingRun` starts ``procs`` of them over one shared-memory channel file; with
``mpi``, it starts ``mpirun`` with the MPI build of the same simulator. Each process forwards its
stderr through here, so a process that fails is named with its last line, and every other one is
stopped: no process is left behind. Standard input goes to the one process (or rank) that runs the
node whose console reads it (``stdin_node``), and to no other.

Every node writes ``node<i>.json`` into the run folder and the hub ``hub.json``; :func:`merge`
puts them together.
"""

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from numavia.base.errors import NumaviaError


class LaunchError(NumaviaError):
    """The ring could not be started or a process of it failed; the message says which and why."""


@dataclass(frozen=True)
class Spread:
    """How the nodes are spread: ``procs`` processes on this machine (shared memory), or ``procs``
    MPI ranks (``mpi``; ``hostfile`` for several machines, whose run folder must be shared)."""

    procs: int = 1
    mpi: bool = False
    hostfile: str | None = None

    def __str__(self):
        """In words: "1 process", "2 processes", "2 MPI ranks"."""
        if self.mpi:
            return f"{self.procs} MPI rank{'s' if self.procs > 1 else ''}"
        return f"{self.procs} process{'es' if self.procs > 1 else ''}"

    def fitted(self, nodes):
        """The same spread for a ring of ``nodes`` (no more processes than nodes)."""
        return replace(self, procs=min(self.procs, nodes))

    @classmethod
    def default(cls, nodes):
        return cls(procs=default_procs(nodes))

    def check(self, nodes):
        if self.procs < 1:
            raise LaunchError(f"--procs must be at least 1, not {self.procs}")
        if self.procs > nodes:
            raise LaunchError(f"{self.procs} processes for {nodes} node(s): at most one per node")
        if self.hostfile and not self.mpi:
            raise LaunchError("a hostfile needs --mpi")
        if self.hostfile and not Path(self.hostfile).is_file():
            raise LaunchError(f"hostfile {self.hostfile} does not exist")
        if self.mpi:
            require_mpi()


def default_procs(nodes):
    """One process per core, but never more than nodes."""
    return max(1, min(nodes, os.cpu_count() or 1))


def require_mpi():
    for tool in ("mpirun", "mpicxx"):
        if shutil.which(tool) is None:
            raise LaunchError(f"{tool} not found: --mpi needs OpenMPI (Debian packages openmpi-bin libopenmpi-dev)")


_arena_names = itertools.count()


def _arena_path():
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    return base / f"numavia-{os.getpid()}-{next(_arena_names)}.ring"


class RingRun:
    """One run of a ring simulator. ``args`` are the simulator's own options (without the spread,
    ``--nodes`` and ``--out-dir``). ``stdin_node``: the node whose console reads this process's
    standard input (the simulator's ``--console-stdin``), None for none."""

    def __init__(
        self,
        binary,
        run_dir,
        nodes,
        args,
        spread=Spread(),
        *,
        mpi_binary=None,
        stdout=None,
        echo_stderr=True,
        stdin_node=None,
    ):
        spread.check(nodes)
        if spread.mpi and mpi_binary is None:
            raise LaunchError("no MPI build of the simulator was given")
        self.binary, self.mpi_binary = Path(binary), mpi_binary
        self.run_dir = Path(run_dir).resolve()
        self.nodes, self.args, self.spread = nodes, list(args), spread
        self.stdout, self.echo_stderr = stdout, echo_stderr
        self.stdin_rank = None if stdin_node is None else self.rank_of(stdin_node)
        self.procs = []  # (rank, Popen)
        self.last_lines = {}  # rank -> the last line it said (sim: ..., bench: ...)
        self.stderr_log = []  # every stderr line, in arrival order
        self._readers = []
        self._arena = None
        self.failure = None
        self.started_at = None
        self._stopping = False  # terminate() is killing what did not stop: not a failure

    # --- life cycle --------------------------------------------------------------------------

    def start(self):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("node*.json", "process*.json", "hub.json", "run.json"):
            for path in self.run_dir.glob(stale):
                path.unlink()
        common = [*self.args, "--nodes", str(self.nodes), "--out-dir", str(self.run_dir)]
        self.started_at = time.monotonic()
        if self.spread.mpi:
            # mpirun forwards its standard input to one rank (rank 0 unless told).
            stdin_to = "none" if self.stdin_rank is None else str(self.stdin_rank)
            cmd = ["mpirun", "--oversubscribe", "-np", str(self.spread.procs), "--stdin", stdin_to]
            if self.spread.hostfile:
                cmd += ["--hostfile", str(Path(self.spread.hostfile).resolve())]
            env = {
                **os.environ,
                "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
            }
            self._spawn(0, cmd + [str(self.mpi_binary), *common, "--mpi"], env, self.stdin_rank is not None)
            return self
        if self.spread.procs > 1:
            self._arena = _arena_path()
            self._arena.unlink(missing_ok=True)
        for rank in range(self.spread.procs):
            spread = ["--procs", str(self.spread.procs), "--rank", str(rank)]
            if self._arena:
                spread += ["--arena", str(self._arena)]
            self._spawn(rank, [str(self.binary), *common, *spread], None, rank == self.stdin_rank)
        return self

    def _spawn(self, rank, cmd, env, reads_stdin):
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=self.run_dir,
                stdin=None if reads_stdin else subprocess.DEVNULL,
                stdout=self.stdout,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
                errors="replace",
            )
        except OSError as e:
            self.kill()
            raise LaunchError(f"cannot start {cmd[0]}: {e.strerror}") from None
        self.procs.append((rank, proc))
        reader = threading.Thread(target=self._forward, args=(rank, proc.stderr), daemon=True)
        reader.start()
        self._readers.append(reader)

    def _forward(self, rank, stream):
        for line in stream:
            line = line.rstrip("\n")
            if line.startswith(("sim: ", "bench: ")):  # a simulator's own words (not its usage text)
                self.last_lines[rank] = line
            if line:
                self.stderr_log.append(line)
                if self.echo_stderr:
                    print(line, file=sys.stderr, flush=True)

    def rank_of(self, node):
        """The process (or rank) that runs ``node``: the simulator's contiguous blocks."""
        return node * self.spread.procs // self.nodes

    def nodes_of(self, rank):
        """The nodes a process runs."""
        return [i for i in range(self.nodes) if self.rank_of(i) == rank]

    def _describe(self, rank):
        if self.spread.mpi:
            return "mpirun"
        nodes = self.nodes_of(rank)
        return f"the process of node {nodes[0]}" if len(nodes) == 1 else f"the process of nodes {nodes[0]}-{nodes[-1]}"

    def poll(self):
        """None while running; the run's exit status once every process has ended. A process that
        fails stops the others, and ``failure`` says which and why."""
        running = False
        for rank, proc in self.procs:
            code = proc.poll()
            if code is None:
                running = True
            elif code != 0 and self.failure is None and not self._stopping and not self._is_clean_stop(code):
                self._fail(rank, code)
        if running:
            return None
        self._finish()
        return self.exit_status()

    def _is_clean_stop(self, code):
        # A hub's run status (the run ended as asked, maybe early) is not a process failure.
        return code == self._hub_exit_code()

    def _hub_exit_code(self):
        """The run's status as the hub wrote it into hub.json; None before it has."""
        hub = self.run_dir / "hub.json"
        return json.loads(hub.read_text())["exit_code"] if hub.exists() else None

    def _fail(self, rank, code):
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        time.sleep(0.1)  # let its last words arrive
        last = self.last_lines.get(rank)
        self.failure = f"{self._describe(rank)} {how}" + (f": {last}" if last else "")
        self.kill()

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while (status := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.binary), timeout)
            time.sleep(0.02)
        return status

    def terminate(self, grace_seconds=15.0):
        """Ask the run to stop (the hub stops every node at one simulated time), and kill whatever
        is still there after ``grace_seconds``."""
        if not self.procs:
            return None
        first = self.procs[0][1]
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while (status := self.poll()) is None:
            if time.monotonic() > deadline:
                print(
                    f"numavia: the simulator did not stop within {grace_seconds:g} s of SIGTERM: killed",
                    file=sys.stderr,
                    flush=True,
                )
                self._stopping = True
                self.kill()
                return 130
            time.sleep(0.02)
        return status

    def kill(self):
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for _, proc in self.procs:
            proc.wait()
        self._finish()

    def _finish(self):
        for reader in self._readers:
            reader.join(timeout=1)
        if self._arena:
            self._arena.unlink(missing_ok=True)

    def exit_status(self):
        if self.failure:
            return 1
        if (hub_code := self._hub_exit_code()) is not None:
            return hub_code
        codes = [p.returncode for _, p in self.procs]
        return next((c for c in codes if c), 0)

    @property
    def wall_seconds(self):
        return time.monotonic() - self.started_at if self.started_at else 0.0

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if any(p.poll() is None for _, p in self.procs):
            self.terminate()
        return False


def read_results(run_dir, nodes):
    """``(hub, [node results])`` from the run folder; a node that wrote nothing is None. The hub's
    results gain ``cpu_seconds``: the processor time of every process of the run together."""
    run_dir = Path(run_dir)
    hub_path = run_dir / "hub.json"
    hub = json.loads(hub_path.read_text()) if hub_path.exists() else None
    if hub is not None:
        processes = [json.loads(p.read_text()) for p in run_dir.glob("process*.json")]
        hub["cpu_seconds"] = round(sum(p["cpu_seconds"] for p in processes), 3)
    results = []
    for i in range(nodes):
        path = run_dir / f"node{i}.json"
        results.append(json.loads(path.read_text()) if path.exists() else None)
    return hub, results


def merge_logs(parts, target, key):
    """Concatenate per-node log files into ``target``, lines ordered by ``key(line)`` (stable), and
    remove the parts."""
    lines = []
    for part in parts:
        if part.exists():
            lines.extend(part.read_text().splitlines())
            part.unlink()
    lines.sort(key=key)
    Path(target).write_text("".join(line + "\n" for line in lines))
