"""Ocean (after SPLASH-2's Ocean, contiguous partitions): a wind-driven barotropic ocean on a
square ``G x G`` grid (``G - 2`` interior points a side, zero on the boundary), with P processes.

Each time step: the vorticity ``zeta`` is advanced by the Jacobian ``J(psi, zeta)``, the beta
effect, wind forcing, bottom friction and lateral viscosity (five-point stencils, forward
Euler); then ``laplacian(psi) = zeta`` is solved for the stream function by red-black successive
over-relaxation, warm-started from the previous ``psi``, until the largest correction of an
iteration falls below ``tol * max|psi|`` (or after ``max_iterations``). This is a simplified
Ocean: one layer and SOR instead of SPLASH-2's two layers and multigrid, with the same
communication structure (row partitions, nearest-neighbour rows, red-black phases separated by
barriers, a global reduction for convergence).

Partition: the interior rows are split into P contiguous bands, one per process; a process reads
the edge rows of its neighbours' bands. Rows are processed through a local row buffer: a row is
read as a unit and (for the rows the process owns) written back as a unit.

Placement ("paper"): the rows a neighbour reads, the first and last row of every band, are
shared and live in the owner's slice; the rows inside a band, the fixed boundary rows and the
forcing profile are touched by the owner only and live in local memory (host DRAM), as the paper
placed Ocean's locally used data. The convergence reduction goes through a shared slot per
process (read by all). Placement "shared": every row is shared.
"""

from dataclasses import dataclass

import numpy as np

from numavia.instrument import KernelRun

DOUBLE = 8
STENCIL_STEP_OPS = 30  # per point: Jacobian, beta, forcing, friction, Laplacian, Euler update
SOR_OPS = 9  # per point updated: five-point sum, relaxation, |change| max


@dataclass(frozen=True)
class Params:
    grid: int = 66
    steps: int = 4
    tol: float = 1e-6
    max_iterations: int = 200
    seed: int = 1

    def describe(self):
        return f"{self.grid}x{self.grid} ocean, {self.steps} time steps"


SIZES = {"small": Params(grid=18, steps=2), "paper": Params(grid=66, steps=4)}

# Physical constants (nondimensional, unit basin).
DT = 2e-4
BETA = 50.0
FRICTION = 0.5
VISCOSITY = 2e-3
WIND = 1e3


def _h(grid):
    return 1.0 / (grid - 1)


def omega(grid):
    """Optimal SOR over-relaxation for the five-point Laplacian on this grid."""
    return 2.0 / (1.0 + np.sin(np.pi / (grid - 1)))


def forcing(grid):
    """Wind stress curl by row (double gyre)."""
    y = np.arange(grid) * _h(grid)
    return -WIND * np.sin(2 * np.pi * y)


def initial(params):
    """A small random vorticity field, and psi = 0."""
    rng = np.random.default_rng(params.seed)
    zeta = np.zeros((params.grid, params.grid))
    zeta[1:-1, 1:-1] = 10.0 * rng.standard_normal((params.grid - 2, params.grid - 2))
    return np.zeros_like(zeta), zeta


def advance_rows(psi, zeta, rows, grid):
    """New interior vorticity of ``rows`` (a slice of interior rows), from rows around them."""
    h = _h(grid)
    i = np.arange(rows.start, rows.stop)[:, None]
    j = np.arange(1, grid - 1)[None, :]
    psi_x = (psi[i, j + 1] - psi[i, j - 1]) / (2 * h)
    psi_y = (psi[i + 1, j] - psi[i - 1, j]) / (2 * h)
    zeta_x = (zeta[i, j + 1] - zeta[i, j - 1]) / (2 * h)
    zeta_y = (zeta[i + 1, j] - zeta[i - 1, j]) / (2 * h)
    lap = (zeta[i + 1, j] + zeta[i - 1, j] + zeta[i, j + 1] + zeta[i, j - 1] - 4 * zeta[i, j]) / (h * h)
    tendency = (
        -(psi_x * zeta_y - psi_y * zeta_x) - BETA * psi_x + forcing(grid)[i] - FRICTION * zeta[i, j] + VISCOSITY * lap
    )
    return zeta[i, j] + DT * tendency


def relax_rows(psi, zeta, rows, colour, grid):
    """One SOR half-sweep over ``rows`` for the points of ``colour`` (0 red: i + j even);
    updates psi in place, returns the largest |change|."""
    h2, w = _h(grid) ** 2, omega(grid)
    largest = 0.0
    for i in rows:
        j = np.arange(1 + (i + colour + 1) % 2, grid - 1, 2)
        residual = psi[i + 1, j] + psi[i - 1, j] + psi[i, j + 1] + psi[i, j - 1] - 4 * psi[i, j] - h2 * zeta[i, j]
        change = 0.25 * w * residual
        psi[i, j] += change
        if len(change):
            largest = max(largest, float(np.max(np.abs(change))))
    return largest


class _Grid:
    """A ``G x G`` grid of doubles; each row in its owner's slice, or in its owner's local
    memory when only the owner touches it."""

    def __init__(self, name, values, machine, owners, shared_rows):
        self.values = values
        self.row_bytes = values.shape[1] * DOUBLE
        self.row_base = [
            machine.alloc(f"{name}[{r}]", owners[r], self.row_bytes, local=r not in shared_rows)
            for r in range(values.shape[0])
        ]

    def row(self, r):
        return self.row_base[r], self.row_bytes


def bands(grid, processes):
    interior = grid - 2
    if interior < processes:
        raise ValueError(f"Ocean: {processes} processes for {interior} interior rows")
    cuts = [1 + p * interior // processes for p in range(processes + 1)]
    return [range(cuts[p], cuts[p + 1]) for p in range(processes)]


def run(params, machine, placement="paper"):
    """Integrate ``params.steps`` time steps. Result: ``(psi, zeta, iterations per step)``."""
    G, P = params.grid, machine.processes
    parts = bands(G, P)
    owners = [0] * G
    for p, rows in enumerate(parts):
        for r in rows:
            owners[r] = p
    owners[G - 1] = P - 1
    edges = {r for rows in parts for r in (rows.start, rows.stop - 1)}
    shared_rows = set(range(G)) if placement == "shared" else edges
    psi0, zeta0 = initial(params)
    psi = _Grid("psi", psi0, machine, owners, shared_rows)
    zetas = [
        _Grid("zeta", zeta0, machine, owners, shared_rows),
        _Grid("zeta'", zeta0.copy(), machine, owners, shared_rows),
    ]
    # Convergence: each process's largest change and largest |psi|, two slots (alternating
    # iterations, so a slot is not rewritten while others may still read it).
    slots = [[machine.alloc(f"reduction {k} of {p}", p, 2 * DOUBLE, local=False) for p in range(P)] for k in range(2)]
    rec = machine.recorders
    iterations = []
    cur = 0
    for _ in range(params.steps):
        zeta, new = zetas[cur], zetas[1 - cur]
        for p, rows in enumerate(parts):
            new.values[rows.start : rows.stop, 1:-1] = advance_rows(psi.values, zeta.values, rows, G)
            # A rolling window of three rows of psi and zeta: row i + 1 comes in, row i goes out.
            for r in (rows.start - 1, rows.start):
                rec[p].read(*psi.row(r))
                rec[p].read(*zeta.row(r))
            for r in rows:
                rec[p].read(*psi.row(r + 1))
                rec[p].read(*zeta.row(r + 1))
                rec[p].compute(STENCIL_STEP_OPS * (G - 2))
                rec[p].write(*new.row(r))
        machine.barrier()
        cur = 1 - cur
        zeta = new
        done, k = False, 0
        while not done and k < params.max_iterations:
            largest = [0.0] * P
            for colour in (0, 1):
                for p, rows in enumerate(parts):
                    largest[p] = max(largest[p], relax_rows(psi.values, zeta.values, rows, colour, G))
                    rec[p].read(*psi.row(rows.start - 1))
                    rec[p].read(*psi.row(rows.start))
                    for r in rows:
                        rec[p].read(*psi.row(r + 1))
                        rec[p].read(*zeta.row(r))
                        # Half the points of the row; the black sweep also takes max |psi|.
                        rec[p].compute(SOR_OPS * (G - 2) / 2 + colour * (G - 2))
                        rec[p].write(*psi.row(r))
                    if colour == 1:
                        rec[p].write(slots[k % 2][p], 2 * DOUBLE)
                machine.barrier()
            scale = max(float(np.max(np.abs(psi.values[rows.start : rows.stop]))) for rows in parts)
            for p in range(P):
                for q in range(P):
                    rec[p].read(slots[k % 2][q], 2 * DOUBLE)
                rec[p].compute(2 * P)
            done = max(largest) <= params.tol * scale
            k += 1
        iterations.append(k)
    machine.finish()
    return KernelRun(machine, (psi.values.copy(), zetas[cur].values.copy(), iterations), {"iterations": iterations})


def reference(params):
    """The same iteration on the whole grid with plain numpy slicing, no partitions."""
    G = params.grid
    h2, w = _h(G) ** 2, omega(G)
    h = _h(G)
    psi, zeta = initial(params)
    f = forcing(G)[1:-1, None]
    iterations = []
    for _ in range(params.steps):
        c = np.s_[1:-1, 1:-1]
        n, s, e, wst = np.s_[2:, 1:-1], np.s_[:-2, 1:-1], np.s_[1:-1, 2:], np.s_[1:-1, :-2]
        psi_x = (psi[e] - psi[wst]) / (2 * h)
        psi_y = (psi[n] - psi[s]) / (2 * h)
        zeta_x = (zeta[e] - zeta[wst]) / (2 * h)
        zeta_y = (zeta[n] - zeta[s]) / (2 * h)
        lap = (zeta[n] + zeta[s] + zeta[e] + zeta[wst] - 4 * zeta[c]) / (h * h)
        new = zeta.copy()
        new[c] = zeta[c] + DT * (
            -(psi_x * zeta_y - psi_y * zeta_x) - BETA * psi_x + f - FRICTION * zeta[c] + VISCOSITY * lap
        )
        zeta = new
        ii, jj = np.meshgrid(np.arange(G), np.arange(G), indexing="ij")
        k = 0
        while k < params.max_iterations:
            largest = 0.0
            for colour in (0, 1):
                mask = ((ii + jj) % 2 == colour)[1:-1, 1:-1]
                residual = psi[n] + psi[s] + psi[e] + psi[wst] - 4 * psi[c] - h2 * zeta[c]
                change = np.where(mask, 0.25 * w * residual, 0.0)
                psi[c] += change
                largest = max(largest, float(np.max(np.abs(change))))
            k += 1
            if largest <= params.tol * float(np.max(np.abs(psi))):
                break
        iterations.append(k)
    return psi, zeta, iterations


def check(result, ref, rtol=1e-9):
    psi, zeta, iterations = result
    rpsi, rzeta, riterations = ref
    if iterations != riterations:
        raise AssertionError(f"Ocean: {iterations} SOR iterations per step, reference {riterations}")
    err = max(np.max(np.abs(psi - rpsi)) / np.max(np.abs(rpsi)), np.max(np.abs(zeta - rzeta)) / np.max(np.abs(rzeta)))
    if err > rtol:
        raise AssertionError(f"Ocean: relative difference from the reference {err:.3g}")
    return err
