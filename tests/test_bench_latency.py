"""The latency benchmark (Table 1) on a 2-node ring: every row measured by the card's counter,
and the relations the design guarantees hold (a hit is cheaper than a miss; NUMA never hits)."""

import pytest

from numavia.bench import latency

pytestmark = pytest.mark.slow


def test_latency_table_on_two_nodes(tmp_path):
    figures = latency.run(2, log=lambda m: None, out=tmp_path / "runs")
    rows = {r["name"]: r for r in figures["rows"]}
    miss = rows["remote read, miss, 1 hop"]
    hit = rows["remote read, hit in the network cache"]
    local = rows["local shared read"]
    assert 0 < local["ncc_cycles"] < miss["ncc_cycles"]
    assert hit["ncc_cycles"] * 4 < miss["ncc_cycles"]  # the network cache at work: no round trip
    assert hit["numa_cycles"] >= miss["numa_cycles"] * 0.9  # NUMA mode: every read goes home
    assert rows["remote write, hit (ONLY_DIRTY)"]["ncc_cycles"] < rows["remote write, miss, no sharers"]["ncc_cycles"]
    recall = rows["local shared write, recalling a remote copy"]
    assert recall["ncc_cycles"] > rows["local shared write"]["ncc_cycles"] + 20  # a purge's round trip
    assert recall["numa_cycles"] is None  # NUMA mode never leaves a copy to recall
    # A line read once is not cached (the allocation filter): its home's write recalls nothing.
    once = rows["local shared write after a remote read"]["ncc_cycles"]
    assert once < rows["local shared write"]["ncc_cycles"] + 20 < recall["ncc_cycles"]
    second = rows["remote read, second miss (caches the line), 1 hop"]
    assert second["ncc_cycles"] > hit["ncc_cycles"] * 5 and second["numa_cycles"] is None
    # The home wrote the line between the first two misses (SHOWN cleared): the second is a miss
    # that caches nothing (test_sci_transitions.py checks the states).
    rewritten = rows["remote read, second miss after its home wrote the line (not cached), 1 hop"]
    assert rewritten["ncc_cycles"] > hit["ncc_cycles"] * 5 and rewritten["numa_cycles"] is None
    assert miss["ncc_ns"] == miss["ncc_cycles"] * 10  # 100 MHz card clock
    text = latency.report(figures, tmp_path)
    assert "remote read, miss, 1 hop" in text
    for suffix in ("md", "csv", "json", "png"):
        assert (tmp_path / f"latency.{suffix}").stat().st_size > 0
