"""Matrix multiply C = A B, rows of A, B and C block-distributed.

Each worker computes its rows of C a row at a time: it reads its row of A, then every row of B
(a quarter of them local on four nodes, the rest remote), accumulating into a private row of C
which it writes out at the end. Every worker reads all of B once per row of C it owns: a
network cache that holds B turns the remote reads after the first into hits.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class MatMul:
    name: ClassVar[str] = "matmul"
    title: ClassVar[str] = "Matrix multiply"
    n: int = 32
    cycles_per_madd: int = 2  # host compute per multiply-add, in card cycles
    seed: int = 1

    def describe(self):
        return f"{self.n}x{self.n} doubles, {self.cycles_per_madd} cycles/multiply-add"

    def operands(self):
        rng = np.random.default_rng(self.seed)
        return rng.standard_normal((self.n, self.n)), rng.standard_normal((self.n, self.n))

    def reference(self):
        a, b = self.operands()
        return a @ b

    def record(self, arrays):
        """Run the partitioned program, recording its traces; returns C."""
        n = self.n
        names = [arrays.allocate(x, n, n) for x in ("A", "B", "C")]
        A, B, C = names
        a, b = self.operands()
        c = np.zeros((n, n))
        for p in range(arrays.workers):
            for r in arrays.rows(A, p):
                arrays.write_row(p, A, r)
                arrays.write_row(p, B, r)
        arrays.barrier()
        for p in range(arrays.workers):
            for i in arrays.rows(C, p):
                arrays.read_row(p, A, i)
                row = np.zeros(n)
                for k in range(n):
                    arrays.read_row(p, B, k)
                    row += a[i, k] * b[k]
                    arrays.compute(p, self.cycles_per_madd * n)
                c[i] = row
                arrays.write_row(p, C, i)
        arrays.barrier()
        return c
