"""``numavia bench shm``: the sweep's traces, its limits, and a run on the RTL."""

import pytest

from numavia.base import trace
from numavia.base.errors import NumaviaError
from numavia.bench import shm


def test_messages_are_line_bursts_on_fresh_lines():
    assert shm.bursts(0x1000, 4) == [(0x1000, 1)]
    assert shm.bursts(0x1000, 136) == [(0x1000, 16), (0x1040, 16), (0x1080, 2)]
    records, segments, used = shm.sweep_trace([4, 128], 0x4_0000)
    assert [(s, op) for s, op, _, _ in segments] == [(s, op) for s in (4, 128) for op in shm.OPS]
    addrs = {}
    for size, op, first, count in segments:
        part = records[first : first + count]
        assert all((r.kind == trace.Kind.WRITE) == (op == "store") for r in part)
        assert sum(4 * r.words for r in part) == size
        addrs[size, op] = {r.addr for r in part}
    for size in (4, 128):
        assert addrs[size, "load"] == addrs[size, "load again"] == addrs[size, "load a third time"]
        assert not addrs[size, "load"] & addrs[size, "store"]
    assert not addrs[4, "load"] & addrs[128, "load"] and used == 2 * 64 + 2 * 128


def test_limits_are_clear_errors():
    with pytest.raises(NumaviaError, match="at least 4"):
        shm.measure(2)
    with pytest.raises(NumaviaError, match="slice"):
        shm.measure(1 << 20)


@pytest.mark.slow
def test_sweep_on_the_rtl(tmp_path):
    figures = shm.measure(4096, log=lambda m: None, run_root=tmp_path / "runs")
    by = {(r["mode"], r["op"], r["size"]): r for r in figures["rows"]}
    for size in (4, 4096):
        # The allocation filter caches a line at its second miss: a third load of the same lines is
        # a network-cache hit in NCC-NUMA mode, well under the trip around the ring it is in NUMA
        # mode (the trace player's own cycles are in both); the second is a miss in both modes.
        third = "load a third time"
        assert by["ncc", third, size]["cycles"] < by["ncc", "load", size]["cycles"]
        assert by["ncc", third, size]["cycles"] * 3 < by["numa", third, size]["cycles"] * 2
        assert by["ncc", "load again", size]["cycles"] * 3 > by["ncc", "load", size]["cycles"] * 2
        assert by["numa", "load again", size]["cycles"] * 3 > by["numa", "load", size]["cycles"] * 2
    assert by["ncc", "load", 4096]["cycles"] > by["ncc", "load", 64]["cycles"] * 32  # line after line
    shm.report(figures, tmp_path)
    for name in ("shm.md", "shm.csv", "shm.json", "shm.png"):
        assert (tmp_path / name).stat().st_size > 0
