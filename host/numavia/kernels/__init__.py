"""Small shared-memory kernels, run for real and recorded as host-port access traces.

Each kernel computes its result with NumPy exactly as the parallel program would (the same
partition, the same order), checks it against a plain reference, and records what every worker
does to shared memory: line-sized reads and writes of its arrays (the host does not cache
shared memory) with its compute in between, and a barrier wherever the program has one. The
simulated ring replays the traces; its cycle counters give the time, split into compute,
memory and barrier wait.

The recording is :mod:`numavia.instrument`'s, as for the SPLASH-2 kernels; these kernels count
their compute in card cycles (one operation per cycle). Writes carry a value that identifies the
writer and the write, not the doubles: a trace holds one value per burst.
"""

import numpy as np

from numavia.base.errors import NumaviaError
from numavia.instrument import CostModel, Machine

from .jacobi import Jacobi
from .matmul import MatMul
from .rows import RowArrays, block_rows

KERNELS = {k.name: k for k in (Jacobi, MatMul)}


class KernelError(NumaviaError):
    pass


def record(kernel, address_map, workers, nodes):
    """Run ``kernel`` on ``workers`` of a ``nodes``-node ring; returns ``(result, machine)``."""
    machine = Machine(nodes, address_map.slice_bytes, CostModel.per_cycle())
    return kernel.record(RowArrays(machine, workers)), machine  # kernels end on a barrier


def write_traces(kernel, address_map, workers, nodes, folder):
    """Record ``kernel``, check its result against the reference, and write node<i>.trace (and
    summary.json) into ``folder``. Returns the card accesses per node."""
    result, machine = record(kernel, address_map, workers, nodes)
    if not np.allclose(result, kernel.reference()):
        raise KernelError(f"{kernel.name} on {workers} worker(s) disagrees with its reference")
    machine.write_traces(folder)
    return {r.process: r.stats.reads + r.stats.writes for r in machine.recorders}


__all__ = ["KERNELS", "Jacobi", "KernelError", "MatMul", "RowArrays", "block_rows", "record", "write_traces"]
