"""SPLASH-2 LU as a trace generator: a correct factorisation for every process count, blocks in
their owners' slices, and traces that obey the invariants."""

import numpy as np
import pytest
from support.splash2_checks import check_trace_invariants, generated, writes_outside_own_slice

from numavia.splash2 import lu


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_factorisation_is_correct(processes):
    g = generated("lu", processes)
    lower, upper = g.result
    a = lu.matrix(lu.SIZES["small"])
    assert np.allclose(lower @ upper, a, rtol=0, atol=1e-10 * np.abs(a).max())
    assert np.allclose(np.tril(lower, -1) + np.eye(len(a)), lower) and np.allclose(np.triu(upper), upper)
    assert g.error < 1e-12


def test_check_refuses_a_wrong_factorisation():
    p = lu.SIZES["small"]
    lower, upper = generated("lu", 1).result
    upper = upper.copy()
    upper[3, 5] += 1e-3
    with pytest.raises(AssertionError):
        lu.check((lower, upper), lu.reference(p))


@pytest.mark.parametrize("processes", [1, 2, 4])
def test_trace_invariants(processes):
    g = generated("lu", processes)
    accesses = check_trace_invariants(g)
    # Each process writes only its own blocks, which live in its node's slice.
    assert writes_outside_own_slice(accesses) == 0
    assert all(len(a) > 0 for a in accesses)
    if processes > 1:
        assert g.machine.summary()["remote_accesses"] > 0


def test_blocks_are_scattered_2d():
    assert lu.process_grid(4) == (2, 2) and lu.process_grid(8) == (2, 4) and lu.process_grid(2) == (1, 2)
    grid = lu.process_grid(4)
    owners = [[lu.owner(I, J, grid) for J in range(4)] for I in range(4)]
    assert owners[0] == [0, 1, 0, 1] and owners[1] == [2, 3, 2, 3] and owners[2] == owners[0]
    g = generated("lu", 4)
    blocks = [r for r in g.machine.regions if r.name.startswith("block")]
    assert len(blocks) == 64 and {r.owner for r in blocks} == {0, 1, 2, 3}
    assert all(sum(r.owner == p for r in blocks) == 16 for p in range(4))  # equal shares


def test_line_bursts_and_double_accesses_cover_the_same_bytes():
    line = check_trace_invariants(generated("lu", 2))
    double = check_trace_invariants(generated("lu", 2, access="double"), max_words=2)
    words = lambda acc: sum(w for a in acc for _, _, w, _ in a)
    assert words(line) == words(double)
    assert sum(map(len, double)) > 4 * sum(map(len, line))
    assert max(w for a in line for _, _, w, _ in a) == 16  # B = 8 doubles: a whole line
