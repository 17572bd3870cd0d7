"""SPLASH-2 LU (contiguous blocks): dense LU factorisation without pivoting of an ``n x n`` matrix
in ``B x B`` blocks, right-looking, with P processes.

Blocks are scattered 2-D over a ``pr x pc`` process grid (block ``(I, J)`` belongs to process
``(I mod pr) * pc + (J mod pc)``) and each block is stored contiguously, column-major, in its
owner's shared slice. Step ``k``: the owner of the diagonal block factors it; barrier; the owners
of the perimeter blocks (row ``k`` and column ``k``) solve them against it; barrier; the owners of
the interior blocks update them with a product of a column-``k`` block and a row-``k`` block;
barrier. Placement as in the paper: everything is shared.

Accesses: the kernels work on block columns (``B`` doubles, contiguous). Each loop nest keeps one
column in a local buffer (the column it updates, or the pivot column it applies) and reads every
other column it needs from shared memory each time it uses it, as a CPU must when the shared
window is not cacheable. In the interior update ``C -= A @ B`` for instance, each column ``j`` of
``C`` is read once and written once, column ``j`` of ``B`` is read once, and each column of ``A``
is read again for every ``j``: that re-reading is what the network cache serves.
"""

import math
from dataclasses import dataclass

import numpy as np

from numavia.instrument import KernelRun, Machine

DOUBLE = 8


@dataclass(frozen=True)
class Params:
    n: int = 256
    block: int = 16
    seed: int = 1

    def __post_init__(self):
        if self.n % self.block:
            raise ValueError(f"LU: the block size {self.block} does not divide n = {self.n}")

    def describe(self):
        return f"{self.n}x{self.n} matrix, {self.block}x{self.block} blocks"


SIZES = {"small": Params(n=64, block=8), "paper": Params(n=256, block=16)}


def process_grid(processes):
    """``(pr, pc)``: the most square grid with ``pr <= pc``."""
    pr = max(d for d in range(1, math.isqrt(processes) + 1) if processes % d == 0)
    return pr, processes // pr


def owner(I, J, grid):
    pr, pc = grid
    return (I % pr) * pc + (J % pc)


def matrix(params):
    """A random, diagonally dominant matrix (SPLASH-2's LU needs no pivoting either)."""
    rng = np.random.default_rng(params.seed)
    a = rng.random((params.n, params.n))
    return a + params.n * np.eye(params.n)


class _Blocks:
    """The shared block matrix: values, and the address of every block in its owner's slice."""

    def __init__(self, a, params, machine):
        self.B = B = params.block
        self.nb = nb = params.n // B
        self.grid = process_grid(machine.processes)
        self.values = a.reshape(nb, B, nb, B).transpose(0, 2, 1, 3).copy()  # [I, J, i, j]
        self.base = np.zeros((nb, nb), dtype=np.int64)
        for J in range(nb):
            for I in range(nb):
                self.base[I, J] = machine.alloc(f"block[{I},{J}]", owner(I, J, self.grid), B * B * DOUBLE)

    def column(self, I, J, j, first=0, last=None):
        """(address, bytes) of column ``j``, rows ``first..last-1``, of block ``(I, J)``."""
        last = self.B if last is None else last
        return int(self.base[I, J]) + (j * self.B + first) * DOUBLE, (last - first) * DOUBLE


def _factor_diagonal(rec, m, k):
    """``D = L U`` in place (unit lower L). Keeps the pivot column in a buffer across the
    updates of the columns to its right."""
    B, D = m.B, m.values[k, k]
    for kk in range(B):
        rec.read(*m.column(k, k, kk, kk))
        D[kk + 1 :, kk] /= D[kk, kk]
        rec.compute(B - kk - 1)
        rec.write(*m.column(k, k, kk, kk + 1))
        for j in range(kk + 1, B):
            rec.read(*m.column(k, k, j, kk))
            D[kk + 1 :, j] -= D[kk, j] * D[kk + 1 :, kk]
            rec.compute(2 * (B - kk - 1))
            rec.write(*m.column(k, k, j, kk + 1))


def _solve_row_block(rec, m, k, J):
    """``A_kJ := L_kk^-1 A_kJ`` (forward substitution), column by column of A."""
    B, L, A = m.B, m.values[k, k], m.values[k, J]
    for j in range(B):
        rec.read(*m.column(k, J, j))
        for kk in range(B - 1):
            rec.read(*m.column(k, k, kk, kk + 1))
            A[kk + 1 :, j] -= A[kk, j] * L[kk + 1 :, kk]
            rec.compute(2 * (B - kk - 1))
        rec.write(*m.column(k, J, j))


def _solve_column_block(rec, m, I, k):
    """``A_Ik := A_Ik U_kk^-1``, column by column of A."""
    B, U, A = m.B, m.values[k, k], m.values[I, k]
    for j in range(B):
        rec.read(*m.column(I, k, j))
        rec.read(*m.column(k, k, j, 0, j + 1))
        for kk in range(j):
            rec.read(*m.column(I, k, kk))
            A[:, j] -= U[kk, j] * A[:, kk]
            rec.compute(2 * B)
        A[:, j] /= U[j, j]
        rec.compute(B)
        rec.write(*m.column(I, k, j))


def _update_interior(rec, m, I, J, k):
    """``C_IJ -= A_Ik B_kJ``: for each column j of C, stream the columns of A."""
    B = m.B
    A, Bk, C = m.values[I, k], m.values[k, J], m.values[I, J]
    for j in range(B):
        rec.read(*m.column(I, J, j))
        rec.read(*m.column(k, J, j))
        for kk in range(B):
            rec.read(*m.column(I, k, kk))
        rec.compute(2 * B * B)
        rec.write(*m.column(I, J, j))
    C -= A @ Bk


def run(params, machine: Machine):
    """Factor ``matrix(params)`` with ``machine.processes`` processes. Result: ``(L, U)``."""
    m = _Blocks(matrix(params), params, machine)
    rec = machine.recorders
    for k in range(m.nb):
        _factor_diagonal(rec[owner(k, k, m.grid)], m, k)
        machine.barrier()
        for J in range(k + 1, m.nb):
            _solve_row_block(rec[owner(k, J, m.grid)], m, k, J)
        for I in range(k + 1, m.nb):
            _solve_column_block(rec[owner(I, k, m.grid)], m, I, k)
        machine.barrier()
        for I in range(k + 1, m.nb):
            for J in range(k + 1, m.nb):
                _update_interior(rec[owner(I, J, m.grid)], m, I, J, k)
        machine.barrier()
    machine.finish()
    n = params.n
    lu = m.values.transpose(0, 2, 1, 3).reshape(n, n)
    lower = np.tril(lu, -1) + np.eye(n)
    upper = np.triu(lu)
    return KernelRun(machine, (lower, upper), {"grid": m.grid, "blocks": m.nb})


def reference(params):
    """The matrix itself: a correct factorisation multiplies back to it."""
    return matrix(params)


def check(result, ref, rtol=1e-10):
    """Largest relative error of ``L @ U`` against A; raises if above ``rtol``."""
    lower, upper = result
    err = np.max(np.abs(lower @ upper - ref)) / np.max(np.abs(ref))
    if not np.all(np.diag(lower) == 1) or err > rtol:
        raise AssertionError(f"LU: |LU - A| / |A| = {err:.3g}")
    return err
