"""The kernels' instrumentation: placement, burst cutting, the compute cost model, barriers."""

import pytest

from numavia.base import trace
from numavia.instrument import LOCAL_ACCESS_OPS, CostModel, Machine, PlacementError

SLICE = 64 * 1024


def test_allocations_live_in_their_owners_slice():
    m = Machine(4, SLICE)
    a = m.alloc("a", 2, 100)
    b = m.alloc("b", 2, 10)
    c = m.alloc("c", 0, 8)
    # Line aligned, per node.
    assert a == 2 * SLICE and b == 2 * SLICE + 128 and c == 0
    assert m.home_of(a) == 2 and m.home_of(c) == 0
    with pytest.raises(PlacementError, match="full"):
        m.alloc("big", 1, SLICE + 1)
    with pytest.raises(PlacementError, match="no process"):
        m.alloc("x", 4, 8)


def test_runs_are_cut_at_lines_into_bursts():
    m = Machine(2, SLICE)
    base = m.alloc("a", 1, 256)
    rec = m.recorders[0]
    rec.read(base + 56, 80)  # 8 bytes in line 0, 64 in line 1, 8 in line 2
    rec.write(base, 4)
    assert [(r.kind, r.addr - base, r.words) for r in rec.records] == [
        (trace.Kind.READ, 56, 2),
        (trace.Kind.READ, 64, 16),
        (trace.Kind.READ, 128, 2),
        (trace.Kind.WRITE, 0, 1),
    ]
    assert rec.stats.remote_accesses == 4 and rec.stats.home_accesses == 0


def test_double_granularity_issues_one_access_per_double():
    m = Machine(1, SLICE, access="double")
    base = m.alloc("a", 0, 256)
    m.recorders[0].read(base, 64)
    assert [(r.addr - base, r.words) for r in m.recorders[0].records] == [(8 * i, 2) for i in range(8)]
    with pytest.raises(ValueError, match="granularity"):
        Machine(1, SLICE, access="byte")


def test_gaps_carry_compute_and_local_accesses():
    m = Machine(1, SLICE, CostModel(ns_per_op=2.5))
    shared = m.alloc("s", 0, 64)
    local = m.alloc("l", 0, 64, local=True)
    rec = m.recorders[0]
    rec.compute(10)  # 25 ns = 2.5 cycles
    rec.read(shared, 8)
    rec.compute(2)  # 0.5 cycle left over + 0.5: 1 cycle
    rec.read(local, 16)  # 2 doubles in host DRAM: no record, 2 * 4 ops
    rec.write(shared, 8)
    m.finish()
    gaps = [(r.kind, r.gap) for r in rec.records]
    local_cycles = 2 * LOCAL_ACCESS_OPS * 0.25
    assert gaps == [(trace.Kind.READ, 2), (trace.Kind.WRITE, int(0.5 + 0.5 + local_cycles)), (trace.Kind.BARRIER, 0)]
    assert rec.stats.local_accesses == 2 and rec.stats.home_accesses == 2


def test_misaligned_or_slice_crossing_accesses_are_refused():
    m = Machine(2, SLICE)
    m.alloc("a", 0, SLICE - 64)
    with pytest.raises(PlacementError, match="whole words"):
        m.recorders[0].read(2, 8)
    with pytest.raises(PlacementError, match="crosses a slice"):
        m.recorders[0].read(SLICE - 8, 16)


def test_barriers_are_common_and_numbered(tmp_path):
    m = Machine(3, SLICE)
    m.barrier()
    m.recorders[1].compute(40)
    m.finish()
    m.write_traces(tmp_path)
    for p in (0, 2):
        node, records = trace.read_trace(tmp_path / f"node{p}.trace")
        assert node == p and [(r.kind, r.addr) for r in records] == [(trace.Kind.BARRIER, 0), (trace.Kind.BARRIER, 1)]
    # Compute before a barrier is the barrier record's gap (the replay spends it, then arrives).
    _, records = trace.read_trace(tmp_path / "node1.trace")
    assert [(r.kind, r.gap) for r in records] == [(trace.Kind.BARRIER, 0), (trace.Kind.BARRIER, 10)]
    s = m.summary()
    assert s["home_accesses"] == 0 and s["barriers"] == 2
    assert (tmp_path / "summary.json").exists()
