"""Jacobi relaxation on an n x n grid, rows block-distributed, a barrier after every sweep.

Each worker reads the rows its block needs once per sweep (its own rows and the two halo rows of
its neighbours, which are remote), computes, and writes its interior rows into the other grid.
Remote data is used once per sweep and rewritten by its owner in between, so a network cache
gains nothing here and pays for invalidations: the kernel shows the cost of coherence.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class Jacobi:
    name: ClassVar[str] = "jacobi"
    title: ClassVar[str] = "Jacobi relaxation"
    n: int = 32  # grid points per side, boundary included
    sweeps: int = 4
    cycles_per_point: int = 8  # host compute per updated point (4 adds, a multiply), in card cycles

    def describe(self):
        return f"{self.n}x{self.n} grid, {self.sweeps} sweeps, {self.cycles_per_point} cycles/point"

    def initial(self):
        grid = np.zeros((self.n, self.n))
        grid[0, :] = 1.0
        grid[:, 0] = np.linspace(1.0, 0.0, self.n)
        return grid

    @staticmethod
    def sweep(a):
        b = a.copy()
        b[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
        return b

    def reference(self):
        a = self.initial()
        for _ in range(self.sweeps):
            a = self.sweep(a)
        return a

    def record(self, arrays):
        """Run the partitioned program, recording its traces; returns the final grid."""
        n = self.n
        grids = [arrays.allocate("grid0", n, n), arrays.allocate("grid1", n, n)]
        a = self.initial()
        for p in range(arrays.workers):
            for r in arrays.rows(grids[0], p):
                arrays.write_row(p, grids[0], r)
                arrays.write_row(p, grids[1], r)
        arrays.barrier()
        for sweep in range(self.sweeps):
            src, dst = grids[sweep % 2], grids[(sweep + 1) % 2]
            b = a.copy()
            for p in range(arrays.workers):
                interior = [r for r in arrays.rows(src, p) if 0 < r < n - 1]
                if not interior:
                    continue
                arrays.read_row(p, src, interior[0] - 1)
                arrays.read_row(p, src, interior[0])
                for r in interior:
                    arrays.read_row(p, src, r + 1)
                    b[r, 1:-1] = 0.25 * (a[r - 1, 1:-1] + a[r + 1, 1:-1] + a[r, :-2] + a[r, 2:])
                    arrays.compute(p, self.cycles_per_point * (n - 2))
                    arrays.write_row(p, dst, r)
            arrays.barrier()
            a = b
        return a
