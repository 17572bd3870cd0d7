"""SPLASH-2 FFT: the six-step 1-D complex FFT of ``n = rootN^2`` points with P processes.

The data is a ``rootN x rootN`` matrix of complex doubles (16 bytes), rows partitioned into P
contiguous bands; each process's rows of ``x`` and of the scratch matrix ``trans`` live in its
node's shared slice. Steps (barrier after each): transpose x -> trans; an ``rootN``-point FFT of
each own row of trans, and the twiddle multiplication; transpose trans -> x; FFT of each own row
of x; transpose x -> trans (the result, in natural order).

Transposes are blocked as in SPLASH-2: process p fetches from every process q (starting with
q = p + 1, so that they do not all read the same node at once) the sub-block of q's rows and p's
columns, one contiguous row segment at a time, into a local buffer, and writes it transposed into
its own rows, again as contiguous row segments. A row FFT reads its row once into a local buffer,
transforms it there and writes it back.

Placement ("paper"): the twiddle factors ``W_N^(r c)`` of a row are used only by the row's owner,
and the ``rootN`` roots of the row FFTs are read-only and replicated per process: both live in
local memory, as the paper placed FFT's locally used data. x and trans are shared (other
processes read them in the transposes). Placement "shared" puts the twiddle rows in the owner's
slice and the roots in node 0's slice.
"""

from dataclasses import dataclass

import numpy as np

from numavia.instrument import KernelRun

COMPLEX = 16
FLOPS_PER_BUTTERFLY = 10  # a complex multiply (6) and a complex add and subtract (4)


@dataclass(frozen=True)
class Params:
    points: int = 1024
    seed: int = 1

    def __post_init__(self):
        m = self.points.bit_length() - 1
        if self.points != 1 << m or m % 2:
            raise ValueError(f"FFT: {self.points} points is not an even power of two")

    @property
    def root(self):
        return 1 << ((self.points.bit_length() - 1) // 2)

    def describe(self):
        return f"{self.points} complex points ({self.root}x{self.root})"


SIZES = {"small": Params(points=256), "paper": Params(points=1024)}


def data(params):
    rng = np.random.default_rng(params.seed)
    return rng.standard_normal(params.points) + 1j * rng.standard_normal(params.points)


def _bit_reverse(n):
    bits = n.bit_length() - 1
    return np.array([int(f"{i:0{bits}b}"[::-1], 2) for i in range(n)])


def fft_row(row, roots):
    """Iterative radix-2 decimation-in-time FFT of one row (length a power of two) with the
    precomputed ``roots`` (``exp(-2 pi i k / len)``, k < len / 2)."""
    n = len(row)
    a = row[_bit_reverse(n)].copy()
    half = 1
    while half < n:
        w = roots[:: n // (2 * half)][:half]
        a = a.reshape(-1, 2 * half)
        top, bottom = a[:, :half].copy(), a[:, half:] * w
        a[:, :half] = top + bottom
        a[:, half:] = top - bottom
        a = a.reshape(n)
        half *= 2
    return a


class _Matrix:
    """A ``root x root`` complex matrix, rows in bands, each band in its owner's slice."""

    def __init__(self, name, values, machine, bands):
        self.values = values
        root = values.shape[0]
        self.row_bytes = root * COMPLEX
        self.row_base = np.zeros(root, dtype=np.int64)
        for p, rows in enumerate(bands):
            base = machine.alloc(f"{name} rows {rows.start}..{rows.stop - 1}", p, len(rows) * self.row_bytes)
            for k, r in enumerate(rows):
                self.row_base[r] = base + k * self.row_bytes

    def segment(self, row, cols):
        return int(self.row_base[row]) + cols.start * COMPLEX, len(cols) * COMPLEX


def _transpose(machine, src, dst, bands, buffers):
    """dst = src^T, each process producing its own rows of dst."""
    P = machine.processes
    for p, mine in enumerate(bands):
        rec = machine.recorders[p]
        for step in range(P):
            q = (p + 1 + step) % P
            theirs = bands[q]
            for r in theirs:  # fetch src[theirs, mine]
                rec.read(*src.segment(r, mine))
            buffer_bytes = len(theirs) * len(mine) * COMPLEX
            rec.compute(len(theirs) * len(mine) * 2)  # local transposition: load + store
            rec.read(buffers[p], buffer_bytes)
            rec.write(buffers[p], buffer_bytes)
            for i in mine:  # store dst[mine, theirs]
                dst.values[i, theirs.start : theirs.stop] = src.values[theirs.start : theirs.stop, i]
                rec.write(*dst.segment(i, theirs))
    machine.barrier()


def _row_ffts(machine, mat, bands, buffers, roots, roots_addr, twiddle=None, twiddle_addr=None):
    """FFT (and optionally twiddle) every own row of ``mat``."""
    root = mat.values.shape[0]
    cols = range(root)
    stages = root.bit_length() - 1
    for p, mine in enumerate(bands):
        rec = machine.recorders[p]
        for r in mine:
            rec.read(*mat.segment(r, cols))
            rec.read(roots_addr[p], root // 2 * COMPLEX)
            row = fft_row(mat.values[r], roots)
            for _ in range(stages):  # each stage reads and writes the buffer
                rec.read(buffers[p], root * COMPLEX)
                rec.write(buffers[p], root * COMPLEX)
            rec.compute(root // 2 * stages * FLOPS_PER_BUTTERFLY)
            if twiddle is not None:
                rec.read(int(twiddle_addr[r]), root * COMPLEX)
                row = row * twiddle[r]
                rec.compute(6 * root)
            mat.values[r] = row
            rec.write(*mat.segment(r, cols))
    machine.barrier()


def run(params, machine, placement="paper"):
    """The FFT of ``data(params)``; result: the transform (natural order)."""
    root, P = params.root, machine.processes
    if root % P:
        raise ValueError(f"FFT: {P} processes do not divide {root} rows")
    per = root // P
    bands = [range(p * per, (p + 1) * per) for p in range(P)]
    local_aux = placement == "paper"
    x = _Matrix("x", data(params).reshape(root, root).copy(), machine, bands)
    trans = _Matrix("trans", np.zeros((root, root), dtype=complex), machine, bands)
    roots = np.exp(-2j * np.pi * np.arange(root // 2) / root)
    rows, cols = np.meshgrid(np.arange(root), np.arange(root), indexing="ij")
    twiddle = np.exp(-2j * np.pi * rows * cols / params.points)
    # Twiddle rows go with the rows of trans they multiply; the roots are read-only.
    twiddle_addr = np.zeros(root, dtype=np.int64)
    for p, mine in enumerate(bands):
        base = machine.alloc(f"twiddle rows of {p}", p, per * root * COMPLEX, local=local_aux)
        for k, r in enumerate(mine):
            twiddle_addr[r] = base + k * root * COMPLEX
    if local_aux:
        roots_addr = [machine.alloc(f"roots of {p}", p, root // 2 * COMPLEX, local=True) for p in range(P)]
    else:
        roots_addr = [machine.alloc("roots", 0, root // 2 * COMPLEX)] * P
    buffers = [machine.alloc(f"buffer of {p}", p, root * per * COMPLEX + root * COMPLEX, local=True) for p in range(P)]

    _transpose(machine, x, trans, bands, buffers)
    _row_ffts(machine, trans, bands, buffers, roots, roots_addr, twiddle, twiddle_addr)
    _transpose(machine, trans, x, bands, buffers)
    _row_ffts(machine, x, bands, buffers, roots, roots_addr)
    _transpose(machine, x, trans, bands, buffers)
    machine.finish()
    return KernelRun(machine, trans.values.reshape(params.points).copy(), {"rows_per_process": per})


def reference(params):
    return np.fft.fft(data(params))


def check(result, ref, rtol=1e-10):
    err = np.max(np.abs(result - ref)) / np.max(np.abs(ref))
    if err > rtol:
        raise AssertionError(f"FFT: |X - numpy.fft| / |X| = {err:.3g}")
    return err
