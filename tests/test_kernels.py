"""The demo's shared-memory kernels: partitioned results, data placement and their traces."""

from dataclasses import dataclass

import numpy as np
import pytest

from numavia.base import trace
from numavia.gateware.card import CardConfig
from numavia.instrument import Machine, PlacementError
from numavia.kernels import KERNELS, Jacobi, KernelError, MatMul, RowArrays, block_rows, write_traces
from numavia.kernels import record as record_kernel

AMAP = CardConfig().address_map()


def record(kernel, workers, nodes):
    """The result and each node's trace records."""
    result, machine = record_kernel(kernel, AMAP, workers, nodes)
    return result, {r.process: r.records for r in machine.recorders}


def row_arrays(workers, nodes=4):
    return RowArrays(Machine(nodes, AMAP.slice_bytes), workers)


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
    result, _ = record(kernel, workers, 4)
    assert np.allclose(result, kernel.reference())


def test_rows_live_in_their_owners_slice():
    arrays = row_arrays(4)
    arrays.allocate("x", 32, 16)
    arrays.allocate("y", 32, 16)
    for p in range(4):
        for r in arrays.rows("x", p):
            assert owner(arrays.row_address("x", r)) == owner(arrays.row_address("y", r)) == p
    assert arrays.row_address("y", 0) == arrays.row_address("x", 7) + 128  # packed after x's rows


def test_bad_shapes_are_refused():
    arrays = row_arrays(2)
    with pytest.raises(PlacementError, match="whole number"):
        arrays.allocate("odd", 4, 5)
    with pytest.raises(PlacementError, match="slice is full"):
        arrays.allocate("huge", 2, AMAP.slice_bytes // 8 * 2)
    with pytest.raises(PlacementError, match="workers on a"):
        row_arrays(5, nodes=4)


def test_every_node_meets_every_barrier_and_idle_nodes_only_barriers():
    _, records = record(Jacobi(sweeps=3), 2, 4)
    barriers = {n: [r.addr for r in recs if r.kind == trace.Kind.BARRIER] for n, recs in records.items()}
    assert all(b == [0, 1, 2, 3] for b in barriers.values())  # initialisation + 3 sweeps
    assert all(r.kind == trace.Kind.BARRIER for n in (2, 3) for r in records[n])


def test_one_worker_touches_only_its_own_slice_and_many_touch_remote_rows():
    for kernel in (Jacobi(), MatMul()):
        _, single = record(kernel, 1, 4)
        assert {owner(r.addr) for r in single[0] if r.kind != trace.Kind.BARRIER} == {0}
        _, shared = record(kernel, 4, 4)
        assert {owner(r.addr) for r in shared[1] if r.kind != trace.Kind.BARRIER} > {1}


def test_accesses_are_line_bursts_and_compute_lands_in_gaps():
    kernel = MatMul(n=16, cycles_per_madd=3)
    _, records = record(kernel, 2, 2)
    accesses = [r for r in records[0] if r.kind != trace.Kind.BARRIER]
    assert all(r.words == 16 and r.addr % 64 == 0 for r in accesses)
    rows = 8
    # Initialisation writes its rows of A and B; then per row of C: its A row and the 16 rows of B
    # read (2 lines each), the C row written. Compute: 16 x 16 multiply-adds x 3 cycles per row.
    assert len(accesses) == rows * (2 + 2) + rows * (2 + 16 * 2 + 2)
    total_gap = sum(r.gap for r in records[0])
    assert total_gap == rows * 16 * 16 * 3


def test_matmul_reads_all_of_b_for_every_row_jacobi_reads_halo_once_per_sweep():
    arrays = row_arrays(4)
    MatMul().record(arrays)
    b_lines = {arrays.row_address("B", k) + 64 * i for k in range(32) for i in range(4)}
    reads = [r.addr for r in arrays.machine.recorders[2].records if r.kind == trace.Kind.READ and r.addr in b_lines]
    assert len(reads) == 8 * len(b_lines)  # 8 rows of C, all of B each time
    arrays = row_arrays(4)
    Jacobi(sweeps=2).record(arrays)
    remote = [r for r in arrays.machine.recorders[1].records if r.kind == trace.Kind.READ and owner(r.addr) != 1]
    assert len(remote) == 2 * 2 * 4  # 2 halo rows x 2 sweeps x 4 lines


def test_a_wrong_result_is_caught(tmp_path):
    @dataclass(frozen=True)
    class Broken(Jacobi):
        def record(self, arrays):
            return super().record(arrays) + 1e-3

    with pytest.raises(KernelError, match="disagrees"):
        write_traces(Broken(), AMAP, 2, 2, tmp_path)
    counts = write_traces(Jacobi(), AMAP, 2, 3, tmp_path)
    assert sorted(counts) == [0, 1, 2] and counts[2] == 0
    assert trace.read_trace(tmp_path / "node1.trace")[0] == 1


def test_kernel_registry_names():
    assert set(KERNELS) == {"jacobi", "matmul"}
