"""Barnes-Hut as a trace generator: tree forces close to the direct O(n^2) sum (equal to it when
no cell is accepted), the same physics for every process count, and sound traces."""

import dataclasses

import numpy as np
import pytest
from support.splash2_checks import SLICE_BYTES, check_trace_invariants, generated

from numavia.instrument import Machine
from numavia.splash2 import barnes, generate


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_forces_close_to_direct_sum(processes):
    g = generated("barnes", processes)
    assert g.error < 0.1  # relative RMS, theta = 1 (the paper's setting)
    exact = barnes.direct_accelerations(g.result["acc_at"], g.result["mass"], barnes.SIZES["small"].eps)
    cosine = (
        np.sum(exact * g.result["acc"], axis=1)
        / np.linalg.norm(exact, axis=1)
        / np.linalg.norm(g.result["acc"], axis=1)
    )
    assert np.median(cosine) > 0.99


def test_without_accepted_cells_the_tree_is_the_direct_sum():
    p = dataclasses.replace(barnes.SIZES["small"], theta=0.0, bodies=128, steps=1)
    g = generate("barnes", p, 2, slice_bytes=SLICE_BYTES)
    exact = barnes.direct_accelerations(g.result["acc_at"], g.result["mass"], p.eps)
    assert np.allclose(g.result["acc"], exact, rtol=1e-11, atol=0)
    assert g.info["interactions"] == 128 * 127


def test_check_refuses_wrong_forces():
    p = barnes.SIZES["small"]
    result = dict(generated("barnes", 1).result)
    result["acc"] = result["acc"] * 1.3
    with pytest.raises(AssertionError):
        barnes.check(result, p)


def test_same_physics_for_every_process_count():
    # Equal up to rounding: the order in which bodies enter a leaf (so the order of its sums)
    # depends on the interleaving of the processes' insertions.
    runs = [generated("barnes", n) for n in (1, 2, 4)]
    for g in runs[1:]:
        assert np.allclose(g.result["pos"], runs[0].result["pos"], rtol=1e-12, atol=1e-14)
        assert np.allclose(g.result["acc"], runs[0].result["acc"], rtol=1e-9, atol=0)
        assert g.info["tree_nodes"] == runs[0].info["tree_nodes"]  # the octree is unique


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_trace_invariants(processes):
    g = generated("barnes", processes)
    check_trace_invariants(g)
    assert not any(r.local for r in g.machine.regions)  # the paper kept Barnes all shared
    if processes > 1:
        s = g.machine.summary()
        assert s["remote_accesses"] > s["home_accesses"] * 0.3


def test_cost_zones_balance_the_work():
    g = generated("barnes", 4)
    zones = g.info["zone_sizes"]
    assert zones[0] == [64, 64, 64, 64]  # first step: equal counts
    assert sorted(zones[1]) != [64, 64, 64, 64] and sum(zones[1]) == 256
    ops = [s["ops"] for s in g.machine.summary()["per_process"]]
    assert max(ops) < 1.3 * min(ops)


def test_bodies_are_partitioned_equally_by_index():
    m = Machine(4, SLICE_BYTES)
    barnes.run(dataclasses.replace(barnes.SIZES["small"], steps=1), m)
    bodies = {r.owner: r.nbytes for r in m.regions if r.name.startswith("bodies")}
    assert bodies == {p: 64 * barnes.RECORD_BYTES for p in range(4)}
