"""Access traces: the file format, and their replay on the card ring with barriers."""

import pytest

from numavia.base import trace
from numavia.soc import card_bench as cb


def test_round_trip(tmp_path):
    records = [trace.write_access(0x40, 7, words=4, gap=10), trace.barrier(3, gap=2), trace.read_access(0x80)]
    assert trace.write_trace(tmp_path / "t", 5, records) == 3
    assert trace.read_trace(tmp_path / "t") == (5, records)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "shorter"),
        (b"XXXX" + bytes(12), "not a version"),
        (trace.HEADER.pack(trace.MAGIC, trace.VERSION, 0, 2, 0) + bytes(16), "2 records announced"),
        (trace.HEADER.pack(trace.MAGIC, trace.VERSION, 0, 1, 0) + trace.RECORD.pack(9, 1, 0, 0, 0, 0), "unknown kind"),
    ],
)
def test_malformed_traces_are_refused(tmp_path, content, message):
    (tmp_path / "bad").write_bytes(content)
    with pytest.raises(trace.TraceError, match=message):
        trace.read_trace(tmp_path / "bad")


@pytest.mark.parametrize(
    "record, message",
    [
        (trace.read_access(0x41), "word aligned"),
        (trace.read_access(0x40, words=65), "1..64"),
    ],
)
def test_bad_records_are_refused(record, message):
    with pytest.raises(trace.TraceError, match=message):
        record.pack()


@pytest.mark.slow
def test_replay_honours_barriers(tmp_path):
    config = cb.bench_card_config()
    amap = config.address_map()
    a = 0 * amap.slice_bytes + 0x100  # node 0's slice
    b = 1 * amap.slice_bytes + 0x200  # node 1's slice
    trace.write_trace(
        tmp_path / "node0.trace", 0, [trace.write_access(a, 0x11), trace.barrier(0), trace.read_access(b)]
    )
    trace.write_trace(
        tmp_path / "node1.trace",
        1,
        [trace.write_access(b, 0x22, gap=5000), trace.barrier(0), trace.read_access(a, words=4)],
    )
    run = cb.run_bench(cb.build_bench(config, log=lambda m: None), tmp_path / "run", nodes=2, trace_dir=tmp_path)
    assert run.returncode == 0, run.stderr
    by_node = {n: [x for x in run.accesses if x.node == n] for n in (0, 1)}
    write_a, read_b = by_node[0]
    write_b, read_a = by_node[1]
    # Both reads come after both writes (the barrier), and see them.
    assert max(write_a.completed, write_b.completed) <= min(read_a.issued, read_b.issued)
    assert (read_b.value, read_a.value) == (0x22, 0x11)
    stats = {t["node"]: t for t in run.state["trace"]}
    assert stats[0]["barrier"] >= 4000 and stats[1]["compute"] == 5000
    assert stats[0]["accesses"] == stats[1]["accesses"] == 2 and stats[0]["errors"] == 0
