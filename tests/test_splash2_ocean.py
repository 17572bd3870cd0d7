"""Ocean as a trace generator: the partitioned red-black iteration equals a plain whole-grid
numpy version for every process count; only band edges are shared under the paper's placement."""

import numpy as np
import pytest
from support.splash2_checks import check_trace_invariants, generated, writes_outside_own_slice

from numavia.splash2 import ocean


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_matches_whole_grid_reference(processes):
    g = generated("ocean", processes)
    psi, zeta, iterations = g.result
    rpsi, rzeta, riterations = ocean.reference(ocean.SIZES["small"])
    assert iterations == riterations and all(k > 1 for k in iterations)
    assert np.allclose(psi, rpsi, rtol=1e-12, atol=0) and np.allclose(zeta, rzeta, rtol=1e-12, atol=0)
    assert np.abs(psi).max() > 0


def test_solver_really_solves_the_poisson_equation():
    p = ocean.SIZES["small"]
    psi, zeta, _ = ocean.reference(p)
    h2 = ocean._h(p.grid) ** 2
    lap = (psi[2:, 1:-1] + psi[:-2, 1:-1] + psi[1:-1, 2:] + psi[1:-1, :-2] - 4 * psi[1:-1, 1:-1]) / h2
    assert np.abs(lap - zeta[1:-1, 1:-1]).max() < 1e-3 * np.abs(zeta).max()


def test_check_refuses_a_different_field():
    p = ocean.SIZES["small"]
    psi, zeta, its = ocean.reference(p)
    psi = psi.copy()
    psi[5, 5] *= 1.001
    with pytest.raises(AssertionError):
        ocean.check((psi, zeta, its), ocean.reference(p))


@pytest.mark.parametrize("processes", [1, 2, 4])
@pytest.mark.parametrize("placement", ["paper", "shared"])
def test_trace_invariants(processes, placement):
    g = generated("ocean", processes, placement=placement)
    accesses = check_trace_invariants(g)
    assert writes_outside_own_slice(accesses) == 0  # every process writes its own band
    if processes > 1:
        # Remote accesses are reads of the neighbours' edge rows, and of the reduction slots.
        bands = ocean.bands(ocean.SIZES["small"].grid, processes)
        for p, mine in enumerate(accesses):
            neighbours = {q for q in (p - 1, p + 1) if 0 <= q < processes}
            allowed = [
                r
                for r in g.machine.regions
                if not r.local
                and (
                    r.name.startswith("reduction")
                    or (
                        r.owner in neighbours
                        and "[" in r.name
                        and int(r.name.split("[")[1][:-1]) in (bands[r.owner].start, bands[r.owner].stop - 1)
                    )
                )
            ]
            remote = [x for x in mine if x[3] != p]
            assert remote and not any(write for write, *_ in remote)
            assert all(any(r.base <= addr < r.base + r.nbytes for r in allowed) for _, addr, _, _ in remote)


def test_paper_placement_shares_band_edges_only():
    g = generated("ocean", 4)
    bands = ocean.bands(ocean.SIZES["small"].grid, 4)
    edges = {r for b in bands for r in (b.start, b.stop - 1)}
    for r in g.machine.regions:
        if r.name.startswith("psi["):
            row = int(r.name[4:-1])
            assert r.local == (row not in edges), r.name
    shared = generated("ocean", 4, placement="shared")
    assert not any(r.local for r in shared.machine.regions)
    # 4 rows a band: 2 of them edges, so at least twice the home accesses when all are shared.
    assert shared.machine.summary()["home_accesses"] > 1.9 * g.machine.summary()["home_accesses"]
