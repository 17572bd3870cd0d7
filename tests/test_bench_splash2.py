"""numavia bench splash2: the command line, trace caching, and (slow) small kernels replayed on
rings of RTL cards, with the replay's own figures checked against the traces."""

import dataclasses
import subprocess
import sys

import pytest

from numavia.base import codegen, trace
from numavia.bench import splash2
from numavia.soc import card_bench as cb
from numavia.splash2 import traces

SMALL_SLICE = cb.bench_card_config().slice_bytes  # the bench card the coherence tests build


def numavia(*args):
    return subprocess.run([sys.executable, "-m", "numavia.cli", *args], capture_output=True, text=True)


def test_help_names_the_tables():
    result = numavia("bench", "splash2", "--help")
    assert result.returncode == 0
    for text in ("--kernels", "--nodes", "--modes", "--size", "--out", "Table 5", "Table 4", "Table 3"):
        assert text in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--nodes", "3"],
        ["--nodes", "two"],
        ["--nodes", "2,2"],
        ["--kernels", "water"],
        ["--modes", "ccnuma"],
        ["--size", "huge"],
        ["--ways", "3"],
        ["--placement", "everywhere"],
        ["--access", "byte"],
        ["--cache-at", "third"],
        ["--ns-per-op", "0"],
        ["--line-bytes", "48"],
        ["--line-bytes", "128"],
        ["--line-bytes", "32,32"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args):
    result = numavia("bench", "splash2", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], result.stderr


def test_a_file_as_results_folder_is_one_line_error(tmp_path):
    (tmp_path / "taken").write_text("")
    result = numavia("bench", "splash2", "--size", "small", "--out", str(tmp_path / "taken"))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a file" in lines[0], result.stderr


def test_traces_are_cached_by_kernel_size_processes_and_placement(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMAVIA_BUILD_DIR", str(tmp_path))
    made = []
    first = traces.traces("fft", "small", 2, slice_bytes=SMALL_SLICE, log=made.append)
    again = traces.traces("fft", "small", 2, slice_bytes=SMALL_SLICE, log=made.append)
    other = traces.traces("fft", "small", 2, placement="shared", slice_bytes=SMALL_SLICE, log=made.append)
    assert first == again != other and first.parent == tmp_path / "splash2"
    assert sum("computing" in m for m in made) == 2
    summary = traces.summary(first)
    for p in range(2):
        node, records = trace.read_trace(first / f"node{p}.trace")
        assert node == p and len(records) == summary["records"][p]
    assert summary["check_error"] < 1e-9 and summary["processes"] == 2


def test_ways_keep_the_capacity():
    config = splash2.splash_card_config()
    for ways in (1, 2, 4):
        c = splash2.with_ways(config, ways)
        assert c.cache_ways == ways and c.cache_sets * ways == splash2.CACHE_LINES
        assert c.slice_bytes == config.slice_bytes


def test_line_sizes_keep_the_capacity_and_the_ways():
    config = splash2.splash_card_config(ways=1)
    for line_bytes in (16, 32, 64):
        c = splash2.with_line_bytes(config, line_bytes)
        assert (c.line_bytes, c.cache_ways) == (line_bytes, 1)
        assert c.cache_sets * line_bytes == splash2.CACHE_LINES * 64
    with pytest.raises(ValueError, match="line_bytes must be"):
        splash2.with_line_bytes(config, 128)


@pytest.mark.slow
def test_replayed_accesses_match_the_trace_and_numa_never_hits(tmp_path):
    """A small kernel on 2 RTL cards, both modes: every access of the trace is replayed, the
    cards count them, and with the network cache off no access hits it. With it on, every
    remote access is a hit or a miss, and Ocean's boundary lines, rewritten by their home between
    two reads, are read without caching (the allocation filter); with the filter switched off
    (``cache_first_miss``, the bench's ``--cache-first-miss``), every miss caches."""
    config = cb.bench_card_config()
    folder = traces.traces("ocean", "small", 2, slice_bytes=config.slice_bytes)
    summary = traces.summary(folder)
    binary = cb.build_bench(config, log=lambda m: None)
    for numa, first_miss in ((False, False), (False, True), (True, False)):
        run = cb.run_bench(
            binary,
            tmp_path / f"numa{numa}-{first_miss}",
            nodes=2,
            trace_dir=folder,
            numa=numa,
            cache_first_miss=first_miss,
            log_accesses=False,
        )
        assert run.returncode == 0, run.stderr
        counted = [n["counters"] for n in run.state["nodes"]]
        cache_hits = [c["LAC_CACHE_READ_HITS"] + c["LAC_CACHE_WRITE_HITS"] for c in counted]
        for t, counters, hits in zip(run.state["trace"], counted, cache_hits):
            expected = summary["records"][t["node"]] - summary["barriers"]
            assert t["errors"] == 0 and t["accesses"] == expected
            assert counters["LAC_ACCESSES"] == expected  # one line access per record
            assert counters["RAC_PROTOCOL_ERRORS"] == 0
            if numa:
                assert hits == 0 and counters["RAC_MIXED_MODE"] == 0
        misses = sum(c["LAC_READ_MISSES"] + c["LAC_WRITE_MISSES"] for c in counted)
        if numa:
            # NUMA: remote = misses, home = hits, exactly what the trace says.
            assert misses == summary["remote_accesses"]
        else:
            # Misses also count the home's own writes that recall a copy, hence at least.
            assert sum(cache_hits) + misses >= summary["remote_accesses"]
            read_once = sum(c["LAC_READ_ONCE"] for c in counted)
            assert read_once == 0 if first_miss else read_once > 0


@pytest.mark.slow
def test_small_benchmark_writes_the_tables(tmp_path):
    config = cb.bench_card_config(cache_sets=8, cache_ways=1)  # direct-mapped, as Table 3
    log = []
    figures = splash2.run(
        ["fft", "ocean"],
        nodes=[2],
        size="small",
        ways=[1],
        line_sizes=[32, 64],
        config=config,
        cache_replays=False,
        log=log.append,
    )
    assert figures["nodes"] == [1, 2]  # the 1-node base is always run
    assert any("replaying" in m for m in log)
    for kernel in ("fft", "ocean"):
        for mode in ("ncc", "numa"):
            base, two = splash2.find(figures, kernel, mode, 1), splash2.find(figures, kernel, mode, 2)
            assert base["cycles"] > 0 and two["cycles"] > 0
            assert splash2.speedup(figures, kernel, mode, 2) == base["cycles"] / two["cycles"]
            for t in two["per_node"]:  # the node's time is its compute, memory and barrier waits
                assert t["compute"] + t["memory"] + t["barrier"] <= t["finished"] <= two["cycles"]
                assert t["finished"] - (t["compute"] + t["memory"] + t["barrier"]) <= 2 * t["accesses"]
        # One node has no remote lines: both modes behave alike, to the cycle.
        assert splash2.find(figures, kernel, "ncc", 1)["cycles"] == splash2.find(figures, kernel, "numa", 1)["cycles"]
        numa = splash2.find(figures, kernel, "numa", 2)
        assert splash2.counter_ratio(numa) == pytest.approx(figures["traces"][kernel][2]["remote_per_home"])
        # Table 3: the same trace on a card of 32-byte lines, twice the sets (equal capacity), and the
        # card cuts each 16-word access into two line accesses.
        short = splash2.find(figures, kernel, "ncc", 2, 1, 32)
        assert (short["line_bytes"], short["sets"], short["ways"]) == (32, 16, 1)
        line_accesses = lambda r: sum(c["LAC_ACCESSES"] for c in r["counters"])
        assert line_accesses(short) > line_accesses(splash2.find(figures, kernel, "ncc", 2))
        assert splash2.speedup(figures, kernel, "ncc", 2, 1, 32) == base_ncc_cycles(figures, kernel) / short["cycles"]
    text = splash2.report(figures, tmp_path)
    for name in ("splash2_table5", "splash2_table3", "splash2_table6", "splash2_time"):
        for suffix in ("md", "csv", "json"):
            assert (tmp_path / f"{name}.{suffix}").stat().st_size > 0
    for png in ("splash2_time.png", "splash2_speedup.png"):
        assert (tmp_path / png).stat().st_size > 0
    assert "FFT" in text and "Ocean" in text
    table3 = (tmp_path / "splash2_table3.md").read_text()
    assert "32 B (16 sets)" in table3 and "64 B (8 sets)" in table3


def base_ncc_cycles(figures, kernel):
    return splash2.find(figures, kernel, "ncc", 1)["cycles"]


def test_replays_are_cached_by_the_bench_and_the_microcode_the_cards_load(monkeypatch):
    """The control store is loaded at run time, so the bench binary's key does not cover it."""
    binary, traces = "build/simulator/k1/Vnumavia_card", "build/splash2/fft-paper-p2"
    before = splash2.replay_key(binary, traces, numa=False)
    assert splash2.replay_key(binary, traces, numa=False) == before
    assert splash2.replay_key(binary, traces, numa=True) != before
    assert splash2.replay_key(binary, traces, numa=False, cache_first_miss=True) != before
    # Another card (the gateware, the harness): the bench's build key, its folder's name.
    assert splash2.replay_key("build/simulator/k2/Vnumavia_card", traces, numa=False) != before
    program = codegen.microcode_program()
    changed = dataclasses.replace(program, words=[program.words[0] ^ 1, *program.words[1:]])
    monkeypatch.setattr(codegen, "microcode_program", lambda: changed)
    assert splash2.replay_key(binary, traces, numa=False) != before
