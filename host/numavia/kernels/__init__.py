"""Small shared-memory kernels, run for real and recorded as host-port access traces.

Each kernel computes its result with NumPy exactly as the parallel program would (the same
partition, the same order), checks it against a plain reference, and records what every worker
does to shared memory: line-sized reads and writes of its arrays (the host does not cache
shared memory) with its compute in between, and a barrier wherever the program has one. The
simulated ring replays the traces; its cycle counters give the time, split into compute,
memory and barrier wait.

Writes carry a tag (the kernel step), not the doubles: a trace holds one value per burst.
"""

import numpy as np

from numavia.errors import NumaviaError

from .jacobi import Jacobi
from .layout import SharedArrays, TraceBuilder, block_rows
from .matmul import MatMul

KERNELS = {k.name: k for k in (Jacobi, MatMul)}



class KernelError(NumaviaError):
    pass


def write_traces(kernel, address_map, workers, nodes, folder):
    """Run ``kernel`` on ``workers`` of a ``nodes``-node ring, check its result against the
    reference, and write node<i>.trace into ``folder``. Returns the accesses per node."""
    arrays = SharedArrays(address_map, workers)
    builder = TraceBuilder(arrays, nodes)
    result = kernel.record(arrays, builder)
    if not np.allclose(result, kernel.reference()):
        raise KernelError(f"{kernel.name} on {workers} worker(s) disagrees with its reference")
    folder.mkdir(parents=True, exist_ok=True)
    return builder.write(folder)


__all__ = ["KERNELS", "Jacobi", "KernelError", "MatMul", "SharedArrays", "TraceBuilder", "block_rows",
           "write_traces"]
