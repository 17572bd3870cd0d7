"""A ring's results do not depend on how it is spread: the same seed gives bit-identical cycle
counts, memory contents, console logs, accesses and fault patterns in one process, in several
processes over shared memory, and in MPI ranks."""

import pytest
from support.ring_sim import build

from numavia.soc import card_bench as cb
from numavia.soc import sim
from numavia.soc.ring_launch import Spread

pytestmark = pytest.mark.slow

SPREADS = [Spread(procs=1), Spread(procs=2), Spread(procs=4), Spread(procs=2, mpi=True), Spread(procs=3, mpi=True)]
IDS = ["1-proc", "2-procs", "4-procs", "2-ranks", "3-ranks"]
HOW_RUN = ("wall_seconds", "sim_wall_seconds", "cpu_seconds", "processes", "mpi")  # the only fields that may differ


def _card_run(tmp_path, spread):
    config = cb.bench_card_config()
    run = cb.run_bench(
        cb.build_bench(config, log=lambda m: None),
        tmp_path,
        nodes=4,
        ops=400,
        seed=7,
        flip_rate=2e-3,
        ring_drop=2e-3,
        spread=spread,
    )
    assert run.returncode == 0, run.stderr
    state = {k: v for k, v in run.state.items() if k not in HOW_RUN}
    return state, [(a.node, a.addr, a.write, a.value, a.issued, a.completed) for a in run.accesses]


def test_card_ring_with_faults_is_the_same_however_spread(tmp_path):
    results = [_card_run(tmp_path / name, spread) for name, spread in zip(IDS, SPREADS)]
    state, accesses = results[0]
    assert state["ring_flips"] > 0 and state["ring_dropped"] > 0  # the faults were there to differ
    assert len(accesses) == 4 * 400
    for name, other in zip(IDS[1:], results[1:]):
        assert other == results[0], f"{name} differs from one process"


def _node_run(tmp_path, spread):
    code, summary = sim.run(build(3), tmp_path, spread, quiet=True, max_cycles=2_000_000)
    assert code == 0
    logs = [(tmp_path / f"node{i}.log").read_text() for i in range(3)]
    return summary["cycles"], summary["marker_cycles"], summary["ring_in"], logs


def test_full_nodes_boot_the_same_however_spread(tmp_path):
    spreads = [Spread(procs=1), Spread(procs=3), Spread(procs=2, mpi=True)]
    results = [_node_run(tmp_path / str(i), s) for i, s in enumerate(spreads)]
    assert all(c is not None for c in results[0][1])
    assert results[1] == results[0] and results[2] == results[0]
