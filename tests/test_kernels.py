"""The demo's shared-memory kernels: partitioned results, data placement and their traces."""

from dataclasses import dataclass

import numpy as np
import pytest

from numavia import trace
from numavia.gateware.card import CardConfig
from numavia.kernels import KERNELS, Jacobi, KernelError, MatMul, SharedArrays, TraceBuilder, block_rows, write_traces

AMAP = CardConfig().address_map()


def record(kernel, workers, nodes):
    arrays = SharedArrays(AMAP, workers)
    builder = TraceBuilder(arrays, nodes)
    return kernel.record(arrays, builder), arrays, builder


def owner(addr):
    return addr // AMAP.slice_bytes


def test_block_rows_cover_every_row_once():
    for rows, workers in ((32, 4), (30, 4), (5, 8), (7, 1)):
        parts = block_rows(rows, workers)
        assert [r for p in parts for r in p] == list(range(rows))
        assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("kernel", [Jacobi(), Jacobi(n=48, sweeps=2), MatMul(), MatMul(n=16, seed=3)])
@pytest.mark.parametrize("workers", [1, 3, 4])
def test_partitioned_kernels_match_their_reference(kernel, workers):
    result, _, _ = record(kernel, workers, 4)
    assert np.allclose(result, kernel.reference())


def test_rows_live_in_their_owners_slice():
    arrays = SharedArrays(AMAP, 4)
    arrays.allocate("x", 32, 16)
    arrays.allocate("y", 32, 16)
    for p in range(4):
        for r in arrays.rows("x", p):
            assert owner(arrays.row_address("x", r)) == owner(arrays.row_address("y", r)) == p
    assert arrays.row_address("y", 0) == arrays.row_address("x", 7) + 128   # packed after x's rows


def test_bad_shapes_are_refused():
    arrays = SharedArrays(AMAP, 2)
    with pytest.raises(ValueError, match="whole number"):
        arrays.allocate("odd", 4, 5)
    with pytest.raises(ValueError, match="does not fit"):
        arrays.allocate("huge", 2, AMAP.slice_bytes // 8 * 2)
    with pytest.raises(ValueError, match="workers on a"):
        TraceBuilder(SharedArrays(AMAP, 5), 4)


def test_every_node_meets_every_barrier_and_idle_nodes_only_barriers():
    _, _, builder = record(Jacobi(sweeps=3), 2, 4)
    barriers = {n: [r.addr for r in recs if r.kind == trace.Kind.BARRIER] for n, recs in builder.records.items()}
    assert all(b == [1, 2, 3, 4] for b in barriers.values())          # initialisation + 3 sweeps
    assert all(r.kind == trace.Kind.BARRIER for n in (2, 3) for r in builder.records[n])


def test_one_worker_touches_only_its_own_slice_and_many_touch_remote_rows():
    for kernel in (Jacobi(), MatMul()):
        _, _, single = record(kernel, 1, 4)
        assert {owner(r.addr) for r in single.records[0] if r.kind != trace.Kind.BARRIER} == {0}
        _, _, shared = record(kernel, 4, 4)
        assert {owner(r.addr) for r in shared.records[1] if r.kind != trace.Kind.BARRIER} > {1}


def test_accesses_are_line_bursts_and_compute_lands_in_gaps():
    kernel = MatMul(n=16, cycles_per_madd=3)
    _, _, builder = record(kernel, 2, 2)
    accesses = [r for r in builder.records[0] if r.kind != trace.Kind.BARRIER]
    assert all(r.words == 16 and r.addr % 64 == 0 for r in accesses)
    rows = 8
    # Initialisation writes its rows of A and B; then per row of C: its A row and the 16 rows of B
    # read (2 lines each), the C row written. Compute: 16 x 16 multiply-adds x 3 cycles per row.
    assert len(accesses) == rows * (2 + 2) + rows * (2 + 16 * 2 + 2)
    total_gap = sum(r.gap for r in builder.records[0])
    assert total_gap == rows * 16 * 16 * 3


def test_matmul_reads_all_of_b_for_every_row_jacobi_reads_halo_once_per_sweep():
    arrays = SharedArrays(AMAP, 4)
    builder = TraceBuilder(arrays, 4)
    MatMul().record(arrays, builder)
    b_lines = {arrays.row_address("B", k) + 64 * i for k in range(32) for i in range(4)}
    reads = [r.addr for r in builder.records[2] if r.kind == trace.Kind.READ and r.addr in b_lines]
    assert len(reads) == 8 * len(b_lines)                  # 8 rows of C, all of B each time
    arrays = SharedArrays(AMAP, 4)
    builder = TraceBuilder(arrays, 4)
    Jacobi(sweeps=2).record(arrays, builder)
    remote = [r for r in builder.records[1] if r.kind == trace.Kind.READ and owner(r.addr) != 1]
    assert len(remote) == 2 * 2 * 4                        # 2 halo rows x 2 sweeps x 4 lines


def test_a_wrong_result_is_caught(tmp_path):
    @dataclass(frozen=True)
    class Broken(Jacobi):
        def record(self, arrays, builder):
            return super().record(arrays, builder) + 1e-3
    with pytest.raises(KernelError, match="disagrees"):
        write_traces(Broken(), AMAP, 2, 2, tmp_path)
    counts = write_traces(Jacobi(), AMAP, 2, 3, tmp_path)
    assert sorted(counts) == [0, 1, 2] and counts[2] == 0
    assert trace.read_trace(tmp_path / "node1.trace")[0] == 1


def test_kernel_registry_names():
    assert set(KERNELS) == {"jacobi", "matmul"}
