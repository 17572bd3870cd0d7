"""SPLASH-2 FFT (six-step) as a trace generator: numpy.fft's answer for every process count,
rows in their owners' slices, twiddles in local memory under the paper's placement."""

import numpy as np
import pytest
from support.splash2_checks import check_trace_invariants, generated, writes_outside_own_slice

from numavia.splash2 import fft


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_transform_matches_numpy(processes):
    g = generated("fft", processes)
    assert np.allclose(g.result, np.fft.fft(fft.data(fft.SIZES["small"])), rtol=0, atol=1e-9)


def test_row_fft_is_a_real_fft():
    rng = np.random.default_rng(3)
    row = rng.standard_normal(32) + 1j * rng.standard_normal(32)
    roots = np.exp(-2j * np.pi * np.arange(16) / 32)
    assert np.allclose(fft.fft_row(row, roots), np.fft.fft(row))


def test_check_refuses_a_wrong_transform():
    p = fft.SIZES["small"]
    bad = fft.reference(p).copy()
    bad[7] += 1e-3
    with pytest.raises(AssertionError):
        fft.check(bad, fft.reference(p))


@pytest.mark.parametrize("processes", [1, 2, 4])
@pytest.mark.parametrize("placement", ["paper", "shared"])
def test_trace_invariants(processes, placement):
    g = generated("fft", processes, placement=placement)
    accesses = check_trace_invariants(g)
    assert writes_outside_own_slice(accesses) == 0  # transposes write their own rows
    barriers = [x for x in g.machine.recorders[0].records if x.kind == 2]
    assert len(barriers) == 6  # 3 transposes, 2 FFT phases, the end


def test_paper_placement_keeps_twiddles_local():
    paper, shared = generated("fft", 2, placement="paper"), generated("fft", 2, placement="shared")
    assert all(r.local for r in paper.machine.regions if r.name.startswith(("twiddle", "roots")))
    assert not any(r.local for r in shared.machine.regions if r.name.startswith(("twiddle", "roots")))
    ps, ss = paper.machine.summary(), shared.machine.summary()
    assert ps["home_accesses"] < ss["home_accesses"]
    assert sum(s["local_accesses"] for s in ps["per_process"]) > sum(s["local_accesses"] for s in ss["per_process"])


def test_transposes_read_every_other_process():
    accesses = check_trace_invariants(generated("fft", 4))
    for _p, mine in enumerate(accesses):
        homes_read = {home for write, _, _, home in mine if not write}
        assert homes_read == {0, 1, 2, 3}
