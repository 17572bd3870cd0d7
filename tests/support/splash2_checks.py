"""Invariants every SPLASH-2 kernel's traces must satisfy (shared by the per-kernel tests)."""

import collections

from numavia.base import trace
from numavia.base.coherence import LINE_BYTES
from numavia.instrument import LOCAL_SPACE
from numavia.splash2 import generate, params_for

SLICE_BYTES = 1 << 20


def generated(kernel, processes, size="small", **kwargs):
    return generate(kernel, params_for(kernel, size), processes, slice_bytes=SLICE_BYTES, **kwargs)


def check_trace_invariants(g, max_words=LINE_BYTES // 4):
    """Addresses inside allocated shared regions of the ring's slices, word aligned, within one
    line; every process has the same barrier sequence. Returns the accesses per process as
    ``(write, address, words, home)``."""
    m = g.machine
    shared = [r for r in m.regions if not r.local]
    assert shared, "a kernel with no shared data"
    for r in shared:  # each region in its owner's slice
        assert m.home_of(r.base) == r.owner and m.home_of(r.base + r.nbytes - 1) == r.owner, r
    starts = sorted((r.base, r.base + r.nbytes) for r in shared)
    sequences, accesses = [], []
    for rec in m.recorders:
        barriers, mine = [], []
        for x in rec.records:
            if x.kind == trace.Kind.BARRIER:
                barriers.append(x.addr)
                continue
            assert x.addr < LOCAL_SPACE, "a local-memory access reached the trace"
            assert x.addr % 4 == 0 and 1 <= x.words <= max_words
            assert x.addr // LINE_BYTES == (x.addr + 4 * x.words - 1) // LINE_BYTES, "access crosses a line"
            home = x.addr // SLICE_BYTES
            assert 0 <= home < m.processes, f"{x.addr:#x} outside the ring's slices"
            assert _inside(starts, x.addr, 4 * x.words), f"{x.addr:#x} not in an allocated region"
            mine.append((x.kind == trace.Kind.WRITE, x.addr, x.words, home))
        sequences.append(barriers)
        accesses.append(mine)
    assert all(s == sequences[0] for s in sequences), "processes disagree on the barrier sequence"
    assert sequences[0] == list(range(len(sequences[0]))) and sequences[0], "barriers numbered 0, 1, ..."
    s = m.summary()
    assert s["home_accesses"] == sum(1 for p, a in enumerate(accesses) for x in a if x[3] == p)
    assert s["remote_accesses"] == sum(1 for p, a in enumerate(accesses) for x in a if x[3] != p)
    return accesses


def _inside(starts, addr, nbytes):
    import bisect

    i = bisect.bisect_right(starts, (addr, float("inf"))) - 1
    return i >= 0 and starts[i][0] <= addr and addr + nbytes <= starts[i][1]


def writes_outside_own_slice(accesses):
    return sum(1 for p, a in enumerate(accesses) for write, _, _, home in a if write and home != p)


def access_counts(accesses):
    return [collections.Counter(home for _, _, _, home in a) for a in accesses]
