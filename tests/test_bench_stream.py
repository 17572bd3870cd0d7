"""``numavia bench stream``: the traces it streams, its argument checks, and a run on the RTL."""

import subprocess
import sys

import pytest

from numavia.base import trace
from numavia.base.errors import NumaviaError
from numavia.bench import stream
from numavia.gateware.card import CardConfig

AMAP = CardConfig().address_map()
CLI = [sys.executable, "-m", "numavia.cli"]


def test_each_line_reads_its_sources_then_writes_its_destination():
    bases = stream.array_bases("remote", 128, AMAP)
    assert all(AMAP.slice_bytes <= b < 2 * AMAP.slice_bytes for b in bases.values())  # node 1's slice
    records, segments = stream.stream_trace(bases, 128, passes=2)
    assert [(k, p) for k, p, _, _ in segments] == [(k, p) for p in range(2) for k in stream.KERNELS]
    add = next(s for s in segments if s[0] == "add")
    got = [(r.kind, r.addr) for r in records[add[2] : add[2] + add[3]]]
    assert got == [
        (trace.Kind.READ, bases["a"]),
        (trace.Kind.READ, bases["b"]),
        (trace.Kind.WRITE, bases["c"]),
        (trace.Kind.READ, bases["a"] + 64),
        (trace.Kind.READ, bases["b"] + 64),
        (trace.Kind.WRITE, bases["c"] + 64),
    ]
    assert all(r.words == 16 for r in records[:-1]) and records[-1].kind == trace.Kind.BARRIER


def test_arrays_must_fit_and_be_whole_lines():
    with pytest.raises(NumaviaError, match="do not fit"):
        stream.array_bases("private", AMAP.private_bytes, AMAP)
    with pytest.raises(NumaviaError, match="multiple of 64"):
        stream.measure(100)


@pytest.mark.parametrize("args", [["--array-bytes", "-4"], ["--passes", "0"], ["--array-bytes", "lots"]])
def test_bad_arguments_exit_2_with_one_line(args):
    proc = subprocess.run(CLI + ["bench", "stream", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and "error:" in proc.stderr


@pytest.mark.slow
def test_stream_on_the_rtl_orders_the_memories(tmp_path):
    figures = stream.measure(1024, 2, log=lambda m: None, run_root=tmp_path / "runs")
    best = {(r["label"], r["kernel"]): r for r in figures["rows"]}
    for kernel in stream.KERNELS:
        private, home = best["private", kernel], best["home", kernel]
        ncc, numa = best["remote (NCC)", kernel], best["remote (NUMA)", kernel]
        # Every remote line crosses the ring in NUMA mode; the network cache keeps the arrays
        # after the first pass, so NCC-NUMA's best pass beats NUMA's.
        assert numa["best_MBps"] < home["best_MBps"] and numa["best_MBps"] < private["best_MBps"]
        assert ncc["best_MBps"] > numa["best_MBps"]
        assert 0 < private["best_MBps"] <= 4 * figures["clock_mhz"]  # a 32-bit port: a word a cycle at most
    # Copy runs first: its first pass finds the network cache cold.
    assert best["remote (NCC)", "copy"]["first_cycles"] > best["remote (NCC)", "copy"]["best_cycles"]
    stream.report(figures, tmp_path)
    for name in ("stream.md", "stream.csv", "stream.json", "stream.png"):
        assert (tmp_path / name).stat().st_size > 0
