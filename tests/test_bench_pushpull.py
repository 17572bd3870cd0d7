"""``numavia bench pushpull``: arguments, and a CI-sized sweep that writes its four result files."""

import csv
import json
import subprocess
import sys

import pytest

from numavia.bench.pushpull import sizes


def numavia(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "numavia.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_help():
    result = numavia("bench", "pushpull", "--help")
    assert result.returncode == 0 and "usage:" in result.stdout and "--thresholds" in result.stdout
    assert "pushpull" in numavia("bench", "--help").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "pushpull", "--schemes", "original,eager"],
        ["bench", "pushpull", "--thresholds", "4096"],
        ["bench", "pushpull", "--thresholds", "64,lots"],
        ["bench", "pushpull", "--min-size", "8k", "--max-size", "4k"],
        ["bench", "pushpull", "--max-size", "2Mi"],
        ["bench", "pushpull", "--baselines", "read"],
        ["bench", "pushpull", "--mtu", "20"],
        ["bench", "pushpull", "--eth-delay", "3"],
        ["bench", "pushpull", "--iterations", "0"],
        ["bench", "pushpull", "--warmup", "-1"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args):
    result = numavia(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], result.stderr


def test_out_folder_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    result = numavia("bench", "pushpull", "--out", str(tmp_path / "f"))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "is a file" in lines[0], result.stderr


def test_sizes_include_every_threshold_edge():
    assert sizes(1, 1024, [100]) == [1, 2, 4, 8, 16, 32, 64, 99, 100, 101, 128, 256, 512, 1024]
    assert sizes(0, 4, [0]) == [0, 1, 2, 4]


@pytest.mark.slow
def test_smoke_sweep_writes_csv_summary_json_and_plot(tmp_path):
    out = tmp_path / "results"
    result = numavia(
        "bench",
        "pushpull",
        "--thresholds",
        "64",
        "--min-size",
        "1",
        "--max-size",
        "128",
        "--iterations",
        "2",
        "--warmup",
        "1",
        "--baselines",
        "send",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "pushpull_bench.csv")))
    pp = [r for r in rows if r["kind"] == "pushpull"]
    assert {r["scheme"] for r in pp} == {"original", "advanced"}
    assert sorted({int(r["size"]) for r in pp}) == [1, 2, 4, 8, 16, 32, 63, 64, 65, 128]
    assert {r["scheme"] for r in rows if r["kind"] == "baseline"} == {"send"}
    assert {r["warmup"] for r in rows} == {"1"}
    for r in pp:
        assert float(r["pingpong_us"]) > 1 and float(r["one_way_us"]) > 1 and int(r["cycles"]) > 0
        assert abs(float(r["bandwidth_MBps"]) - int(r["size"]) / float(r["pingpong_us"])) < 0.01
        # Only messages past bytes_to_push are pulled; the original translates every message.
        assert float(r["pulls_per_msg"]) == (1.0 if int(r["size"]) > 64 else 0.0)
        if r["scheme"] == "original":
            assert float(r["translated_pages_per_msg"]) >= 1
    # The last half round trip step by step, from the cards' stamps, wherever nothing was pulled: a
    # push is a minimum frame like the plain send of the same bytes, so their wire steps agree.
    steps = ("cpu_post_cycles", "card_tx_cycles", "wire_cycles", "card_rx_cycles", "completion_seen_cycles")
    wire = {int(r["size"]): int(r["wire_cycles"]) for r in rows if r["kind"] == "baseline"}
    for r in pp:
        if int(r["size"]) > 64:
            assert all(r[f] == "" for f in steps)
        else:
            assert all(int(r[f]) > 0 for f in steps)
            if int(r["size"]) <= 4:
                assert abs(int(r["wire_cycles"]) - wire[int(r["size"])]) <= 16
    summary = (out / "pushpull_bench.md").read_text()
    assert "numavia bench pushpull --thresholds 64" in summary and "Advanced vs original" in summary
    assert "## Latency breakdown" in summary and "| advanced @64, 1 B |" in summary
    assert "after 1 untimed warm-up round trip at each point" in summary
    data = json.loads((out / "pushpull_bench.json").read_text())
    assert data["config"]["clock_hz"] == 100_000_000 and len(data["figures"]["gains"]) == len(pp) // 2
    assert data["command"].startswith("numavia bench pushpull --thresholds 64")
    assert (out / "pushpull_bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "bytes_to_push" in result.stderr  # progress lines
