"""Instrumentation shared by every kernel (the SPLASH-2 set and the demo's): where data lives,
what an access costs, and the per-process recorders that turn a kernel's work into host-port
access traces (numavia.base.trace).

A kernel runs its ``P`` processes phase by phase (SPMD): within a phase every process works on
its own recorder, and a :meth:`Machine.barrier` ends the phase for all of them, so every process
has the same barrier sequence.

Placement. Each process runs on its own node. Shared data lives in the nodes' shared slices of
the card (node ``i``'s slice starts at host-port address ``i * slice_bytes``): the part a process
owns is allocated in its node's slice. Data that only its own process ever touches may instead
be *local*: host DRAM behind the CPU's caches, as the paper did for Ocean and FFT. Local data
gets addresses in a separate space (``LOCAL_SPACE`` and up) that never reaches the card: its
accesses are charged as compute (``LOCAL_ACCESS_OPS`` operations each) and folded into the gaps.

Accesses. The host does not cache the shared window (PCI), so every access to shared data is a
card access. A kernel reads or writes a contiguous run of bytes it uses at once (a block column,
a row segment, a body record). How the host issues the run is the ``access`` granularity:

* ``"line"``: bursts of up to 16 words, cut at 64-byte lines (what the card's host port takes
  at most; a host that streams uncached data in bursts);
* ``"double"``: one 2-word access per double, as the paper's Pentium III did on uncached PCI
  memory (an x87 load or store of 8 bytes; uncached accesses are never combined).

Compute. Kernels count operations (floating-point arithmetic, comparisons, index arithmetic of
the inner loops); :class:`CostModel` turns them into card cycles with one parameter,
``ns_per_op``. The gap of a record is the compute since the previous record.

Barriers. A barrier record's gap is the compute since the process's last access: the trace
player (``soc/verilator/trace_player.hpp``) spends it, then arrives at the barrier.
"""

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from numavia.base import trace
from numavia.base.coherence import LINE_BYTES
from numavia.base.errors import NumaviaError
from numavia.base.params import SYS_CLOCK_HZ

WORD_BYTES = 4
LINE_WORDS = LINE_BYTES // WORD_BYTES

#: Access granularities: the largest card access, in bytes.
ACCESS_BYTES = {"line": LINE_BYTES, "double": 8}

#: Addresses at or above this are local (host DRAM) data: never emitted as card accesses.
LOCAL_SPACE = 1 << 40

#: One access to local data (a double in host DRAM behind the CPU's caches), in operations: the
#: paper's Table 1 measured 10 ns for a local memory read, 4 operations of the default 2.5 ns.
LOCAL_ACCESS_OPS = 4


class PlacementError(NumaviaError):
    pass


@dataclass(frozen=True)
class CostModel:
    """Compute cost. ``ns_per_op``: time of one counted operation on the host CPU. The default,
    2.5 ns, is the paper's 800 MHz Pentium III issuing one x87 floating-point operation (with its
    share of loads and loop overhead) every two clocks."""

    ns_per_op: float = 2.5

    @classmethod
    def per_cycle(cls):
        """One operation per card cycle: for kernels that count their compute in cycles."""
        return cls(ns_per_op=1e9 / SYS_CLOCK_HZ)

    def cycles(self, ops):
        """Card cycles (100 MHz) of ``ops`` operations (fractional; the recorder carries the rest)."""
        return ops * self.ns_per_op * SYS_CLOCK_HZ / 1e9


@dataclass
class ProcessStats:
    """What one process did, counted while recording (the trace's own account)."""

    ops: float = 0.0
    local_accesses: int = 0  # host DRAM accesses, folded into gaps
    home_accesses: int = 0  # card accesses to this node's own slice
    remote_accesses: int = 0  # card accesses to another node's slice
    home_words: int = 0
    remote_words: int = 0
    reads: int = 0
    writes: int = 0
    barriers: int = 0


class Recorder:
    """One process's trace: card accesses with the compute before each, and barriers."""

    def __init__(self, process, machine):
        self.process = process
        self.machine = machine
        self.records = []
        self.stats = ProcessStats()
        self._pending_cycles = 0.0  # compute not yet attached to a record
        self._writes = 0

    # -- compute --------------------------------------------------------------------------
    def compute(self, ops):
        """``ops`` operations of computation."""
        self.stats.ops += ops
        self._pending_cycles += self.machine.cost.cycles(ops)

    def _local(self, nbytes):
        accesses = max(1, math.ceil(nbytes / 8))
        self.stats.local_accesses += accesses
        self.compute(accesses * LOCAL_ACCESS_OPS)

    def _take_gap(self):
        gap = int(self._pending_cycles)
        self._pending_cycles -= gap
        return gap

    # -- memory -----------------------------------------------------------------------------
    def read(self, addr, nbytes):
        """The process reads ``nbytes`` at ``addr`` as one unit (e.g. a block column)."""
        self._access(False, addr, nbytes)

    def write(self, addr, nbytes):
        """The process writes ``nbytes`` at ``addr`` as one unit."""
        self._access(True, addr, nbytes)

    def _access(self, write, addr, nbytes):
        addr, nbytes = int(addr), int(nbytes)
        if nbytes <= 0:
            return
        if addr >= LOCAL_SPACE:
            self._local(nbytes)
            return
        if addr % WORD_BYTES or nbytes % WORD_BYTES:
            raise PlacementError(f"process {self.process}: access {addr:#x}+{nbytes} is not whole words")
        home = self.machine.home_of(addr)
        end = addr + nbytes
        if self.machine.home_of(end - 1) != home:
            raise PlacementError(f"process {self.process}: access {addr:#x}+{nbytes} crosses a slice")
        stats = self.stats
        step = self.machine.access_bytes
        while addr < end:
            chunk = min(end, (addr // LINE_BYTES + 1) * LINE_BYTES, addr + step) - addr
            words = chunk // WORD_BYTES
            gap = self._take_gap()
            if write:
                self._writes += 1
                value = (self.process + 1) << 24 | (self._writes & 0xFFFFFF)
                self.records.append(trace.write_access(addr, value, words=words, gap=gap))
                stats.writes += 1
            else:
                self.records.append(trace.read_access(addr, words=words, gap=gap))
                stats.reads += 1
            if home == self.process:
                stats.home_accesses += 1
                stats.home_words += words
            else:
                stats.remote_accesses += 1
                stats.remote_words += words
            addr += chunk

    def _barrier(self, number):
        self.records.append(trace.barrier(number, gap=self._take_gap()))
        self.stats.barriers += 1


@dataclass(frozen=True)
class Region:
    """An allocation: ``base`` (host-port byte address, or local space), ``nbytes``, its ``owner``
    process and whether it is ``local`` (host DRAM) rather than shared."""

    name: str
    base: int
    nbytes: int
    owner: int
    local: bool


class Machine:
    """``processes`` processes, one per node, the shared slices of their cards and their local
    memories; the recorders and the barrier numbering."""

    def __init__(self, processes, slice_bytes, cost=None, access="line"):
        if processes < 1:
            raise ValueError("at least one process")
        if access not in ACCESS_BYTES:
            raise ValueError(f"unknown access granularity {access!r} (known: {', '.join(ACCESS_BYTES)})")
        self.processes = processes
        self.access = access
        self.access_bytes = ACCESS_BYTES[access]
        self.slice_bytes = slice_bytes
        self.cost = cost or CostModel()
        self.recorders = [Recorder(p, self) for p in range(processes)]
        self.regions = []
        self._shared_used = [0] * processes
        self._local_used = [0] * processes
        self._barriers = 0

    @property
    def slice_bits(self):
        return self.slice_bytes.bit_length() - 1

    def home_of(self, addr):
        return addr >> self.slice_bits

    def alloc(self, name, owner, nbytes, *, local=False, align=LINE_BYTES):
        """Room for ``nbytes`` owned by process ``owner``: in its node's shared slice, or in its
        local memory when ``local``. Returns the base address."""
        if not 0 <= owner < self.processes:
            raise PlacementError(f"{name}: no process {owner}")
        used = self._local_used if local else self._shared_used
        offset = -(-used[owner] // align) * align
        if not local and offset + nbytes > self.slice_bytes:
            raise PlacementError(
                f"{name}: node {owner}'s {self.slice_bytes // 1024} KiB shared slice is full "
                f"({offset + nbytes} bytes needed); use a larger slice"
            )
        used[owner] = offset + nbytes
        base = (LOCAL_SPACE + (owner << 32) if local else owner * self.slice_bytes) + offset
        self.regions.append(Region(name, base, nbytes, owner, local))
        return base

    def barrier(self):
        """Every process reaches the next barrier."""
        for r in self.recorders:
            r._barrier(self._barriers)
        self._barriers += 1

    def finish(self):
        """The closing barrier (its gap is each process's trailing compute)."""
        self.barrier()

    # -- results ---------------------------------------------------------------------------------
    def summary(self):
        stats = [asdict(r.stats) for r in self.recorders]
        home = sum(s["home_accesses"] for s in stats)
        remote = sum(s["remote_accesses"] for s in stats)
        return {
            "processes": self.processes,
            "slice_bytes": self.slice_bytes,
            "cost": asdict(self.cost),
            "access": self.access,
            "barriers": self._barriers,
            "records": [len(r.records) for r in self.recorders],
            "shared_bytes_per_node": list(self._shared_used),
            "local_bytes_per_node": list(self._local_used),
            "home_accesses": home,
            "remote_accesses": remote,
            "remote_per_home": remote / home if home else None,
            "compute_cycles": [round(self.cost.cycles(s["ops"])) for s in stats],
            "per_process": stats,
        }

    def write_traces(self, folder):
        """``node<i>.trace`` for every process, and ``summary.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for r in self.recorders:
            trace.write_trace(folder / f"node{r.process}.trace", r.process, r.records)
        (folder / "summary.json").write_text(json.dumps(self.summary(), indent=1) + "\n")
        return folder


@dataclass
class KernelRun:
    """A kernel's numeric result with the machine that recorded it."""

    machine: Machine
    result: object
    info: dict = field(default_factory=dict)
