"""``numavia bench via``: arguments, and a CI-sized sweep that writes its three result files."""

import csv
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from numavia.base import params, regmap, via_mailbox
from numavia.bench import via as bench_via
from numavia.cli import make_parser
from numavia.demo import RDMA_SWEEP
from numavia.gateware.card import CardConfig
from numavia.soc import sim


def numavia(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "numavia.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_help():
    result = numavia("bench", "via", "--help")
    assert result.returncode == 0 and "usage:" in result.stdout and "--mtu" in result.stdout
    assert "via" in numavia("bench", "--help").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["bench"],
        ["bench", "nope"],
        ["bench", "via", "--ops", "send,fly"],
        ["bench", "via", "--mtu", "20"],
        ["bench", "via", "--mtu", "big"],
        ["bench", "via", "--min-size", "-4"],
        ["bench", "via", "--max-size", "lots"],
        ["bench", "via", "--min-size", "8k", "--max-size", "4k"],
        ["bench", "via", "--max-size", "8Mi"],
        ["bench", "via", "--eth-delay", "3"],
        ["bench", "via", "--iterations", "0"],
        ["bench", "via", "--stream-vis", "0"],
        ["bench", "via", "--stream-vis", "9"],
        ["bench", "via", "--vis", "0"],
        ["bench", "via", "--vis", str(regmap.VI_CAPACITY + 1)],
        ["bench", "via", "--vis", "4", "--stream-vis", "5"],
        ["bench", "via", "--stream-depth", "0"],
        ["bench", "via", "--stream-depth", str(via_mailbox.BENCH_STREAM_DEPTH + 1)],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args):
    result = numavia(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], result.stderr


@pytest.mark.slow
def test_smoke_sweep_writes_csv_summary_and_plot(tmp_path):
    out = tmp_path / "results"
    result = numavia(
        "bench", "via", "--mtu", "1500", "--min-size", "4", "--max-size", "2k", "--iterations", "3", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "via_bench.csv")))
    assert {r["op"] for r in rows} == {"send", "write", "read", "send-stream", "write-stream"}
    assert sorted({int(r["size"]) for r in rows}) == [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    for r in rows:
        assert float(r["latency_us"]) > 0.5 and int(r["cycles"]) > 0
    # Latency grows with size; the smallest send is within the range the hardware allows.
    send = sorted((int(r["size"]), float(r["latency_us"])) for r in rows if r["op"] == "send")
    assert send[-1][1] > send[0][1] and send[0][1] < 30
    summary = (out / "via_bench.md").read_text()
    assert "numavia bench via --mtu 1500" in summary and "VipPostRecv" in summary and "Streaming" in summary
    # Streams overlap messages: a 2 KiB stream beats the 2 KiB ping-pong's one-way bandwidth.
    bw = {r["op"]: float(r["bandwidth_MBps"]) for r in rows if r["size"] == "2048"}
    assert bw["send-stream"] > bw["send"]
    assert (out / "via_bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "MTU 1500" in result.stderr  # progress lines


@pytest.mark.slow
def test_streams_spread_over_several_vis(tmp_path):
    out = tmp_path / "results"
    args = (
        "--ops send-stream,write-stream --mtu 1500 --min-size 64 --max-size 64 --iterations 4 --stream-vis 3 "
        "--stream-depth 2"
    )
    result = numavia("bench", "via", *args.split(), "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {r["op"]: r for r in csv.DictReader(open(out / "via_bench.csv"))}
    # 48 sends each found a receive: 16 on each of the 3 VIs (one VI's queue holds 16).
    assert int(rows["send-stream"]["iterations"]) == 3 * 16
    assert int(rows["write-stream"]["iterations"]) == 4 * 4 * 3
    for r in rows.values():
        assert int(r["cycles"]) > 0 and float(r["latency_us"]) > 0
    config = json.loads((out / "via_bench.json").read_text())["config"]
    assert config["stream_vis"] == 3 and config["stream_depth"] == 2
    assert "2 messages in flight on each of 3 VIs" in (out / "via_bench.md").read_text()


def test_stream_message_counts_fill_every_vi_and_the_receives_they_have():
    mib = 1024 * 1024
    assert bench_via.messages_for("write-stream", 64, most=64) == 256
    assert bench_via.messages_for("write-stream", 64, most=64, vis=8) == 2048
    # A large message still goes on every VI, twice; a send stream stops at the receives posted.
    assert bench_via.messages_for("write-stream", mib, most=20, vis=8) == 16
    assert bench_via.messages_for("send-stream", 64, most=64, vis=3) == 3 * via_mailbox.BENCH_STREAM_RECEIVES


def test_the_command_line_defaults_are_the_sweep_options_defaults():
    """One set of defaults: `numavia bench via` without options sweeps what SweepOptions() says (the
    demo changes only what it names)."""
    defaults = bench_via.SweepOptions()
    assert bench_via.SweepOptions.from_args(make_parser().parse_args(["bench", "via"])) == defaults
    given = make_parser().parse_args(
        ["bench", "via", "--mtu", "9000", "--stream-vis", "2", "--stream-depth", "1", "--out", "x"]
    )
    assert bench_via.SweepOptions.from_args(given) == dataclasses.replace(
        defaults, mtu=(9000,), stream_vis=2, stream_depth=1, out=Path("x")
    )
    changed = {f.name for f in dataclasses.fields(defaults) if getattr(RDMA_SWEEP, f.name) != getattr(defaults, f.name)}
    assert changed == {"ops", "mtu", "iterations"}


def rows_of(mtu, op, points):
    return [{"mtu": mtu, "op": op, "size": size, "latency_us": us, "bandwidth_MBps": size / us} for size, us in points]


def test_latency_table_has_a_row_per_ping_pong_and_none_for_streams():
    rows = rows_of(1500, "write", [(4, 5.9), (4096, 49.5)]) + rows_of(1500, "send-stream", [(4, 3.0)])
    table = bench_via.latency_table(rows, bench_via.SweepOptions(mtu=(1500,), ops=("write", "send-stream")), 4)
    assert [line for line in table if line.startswith("| 1500")] == [
        "| 1500 | RDMA write | 5.90 | 82.7 at 4096 B | 12.5 us, 95.5 MB/s (RDMA, MTU 1514) |"
    ]
    # A sweep of streams only has no ping-pong to report: no empty table (the streams' own follows).
    assert bench_via.latency_table(rows, bench_via.SweepOptions(mtu=(1500,), ops=("send-stream",)), 4) == []


def test_results_go_through_the_one_writer(tmp_path):
    """Markdown (the summary), CSV (every point), JSON (figures, command, configuration) and PNG."""

    rows = [
        {
            **r,
            "iterations": 2,
            "cycles": 1000,
            "receiver_post_recv_cycles": 0.0,
            "initiator_polls_per_message": 1.5,
            **dict.fromkeys(bench_via.STEP_FIELDS),
        }
        for r in rows_of(1500, "send", [(4, 7.5), (64, 8.0)]) + rows_of(1500, "write", [(4, 5.9), (64, 6.4)])
    ]
    build = SimpleNamespace(
        soc_dir=Path("soc-x"), firmware=SimpleNamespace(kind="bare-metal", name="fw-y"), model=Path("model-z/obj/Vtop")
    )
    info = {"build": build, "config": "SimConfig(nodes=2)", "counters": [{"tx": 1}, {"tx": 2}], "wall_seconds": 3.0}
    options = bench_via.SweepOptions(out=tmp_path, mtu=(1500,), ops=("send", "write"), eth_delay=50, wake="cq")
    paths = bench_via.write_results(rows, info, options)
    assert [p.name for p in paths] == ["via_bench.md", "via_bench.csv", "via_bench.json", "via_bench.png"]
    assert list(csv.DictReader(open(tmp_path / "via_bench.csv")))[2] == {
        "mtu": "1500",
        "op": "write",
        "size": "4",
        "iterations": "2",
        "cycles": "1000",
        "latency_us": "5.9000",
        "bandwidth_MBps": "0.6780",
        "receiver_post_recv_cycles": "0.0000",
        "initiator_polls_per_message": "1.5000",
        **dict.fromkeys(bench_via.STEP_FIELDS, ""),
    }
    data = json.loads((tmp_path / "via_bench.json").read_text())
    assert data["command"].startswith("numavia") and data["config"]["eth_delay_cycles"] == 50
    assert data["config"]["wake"] == "cq"
    assert data["config"]["builds"]["model"] == "model-z" and data["figures"]["counters"][1] == {"tx": 2}
    md = (tmp_path / "via_bench.md").read_text()
    assert "sleeps on its receive queue's completion queue" in md
    assert md.startswith("# VIA engine benchmark") and "RDMA write vs send/receive" in md and "Command: `numavia" in md
    assert (tmp_path / "via_bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


STAMPS = dict(STAMP_SQ_DOORBELL=0, STAMP_TX_DATA=0, STAMP_RX_DATA=0, STAMP_RX_WRITTEN=0, STAMP_RX_COMPLETION=0)


def test_breakdown_splits_the_half_round_trip_into_steps_that_add_up():
    responder = {**STAMPS, "STAMP_SQ_DOORBELL": 1_000, "STAMP_TX_DATA": 1_090}
    initiator = {**STAMPS, "STAMP_RX_DATA": 1_200, "STAMP_RX_WRITTEN": 1_230, "STAMP_RX_COMPLETION": 1_260}
    steps = bench_via.breakdown("write", 1_300, 800, initiator, responder)
    assert steps == {
        "cpu_post_cycles": 200,
        "card_tx_cycles": 90,
        "wire_cycles": 110,
        "card_rx_cycles": 30,
        "completion_seen_cycles": 70,
    }
    # A send is received when its receive descriptor is DONE.
    assert bench_via.breakdown("send", 1_300, 800, initiator, responder)["card_rx_cycles"] == 60
    # The counters' low words wrap: a step across the wrap is still its length.
    wrapped = {k: (v - 1_000) & 0xFFFF_FFFF for k, v in responder.items()}
    later = {k: (v - 1_000) & 0xFFFF_FFFF for k, v in initiator.items()}
    assert bench_via.breakdown("write", 300, (800 - 1_000) & 0xFFFF_FFFF, later, wrapped) == steps


def test_breakdown_refuses_stamps_out_of_order():
    responder = {**STAMPS, "STAMP_SQ_DOORBELL": 1_000, "STAMP_TX_DATA": 900}  # sent before it was posted
    with pytest.raises(bench_via.BenchError, match="out of order"):
        bench_via.breakdown(
            "write", 2_000, 800, {**STAMPS, "STAMP_RX_DATA": 1_200, "STAMP_RX_WRITTEN": 1_300}, responder
        )


def breakdown_row(op, cpu):
    return {
        "mtu": 1500,
        "op": op,
        "size": 4,
        "latency_us": 6.0,
        "bandwidth_MBps": 0.7,
        **dict.fromkeys(bench_via.STEP_FIELDS, 100),
        "cpu_post_cycles": cpu,
    }


def test_baseline_breakdown_is_reported_and_plotted_beside_this_run(tmp_path):
    before = tmp_path / "before.json"
    before.write_text(json.dumps({"figures": {"rows": [breakdown_row("write", 300), {"op": "read", "mtu": 1500}]}}))
    baseline = bench_via.load_baseline(before)
    options = bench_via.SweepOptions(mtu=(1500,), ops=("write",))
    rows = [breakdown_row("write", 20)]
    table = bench_via.breakdown_table(rows, baseline, options)
    assert [line for line in table if line.startswith("| RDMA write")] == [
        "| RDMA write, 4 B, baseline (MTU 1500) | 300 | 100 | 100 | 100 | 100 | 7.00 | 6.00 |",
        "| RDMA write, 4 B, this run (MTU 1500) | 20 | 100 | 100 | 100 | 100 | 4.20 | 6.00 |",
    ]
    bench_via.plot(rows, tmp_path / "plot.png", options, baseline)
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_baseline_without_a_breakdown_is_refused_with_one_line(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"figures": {"rows": [{"op": "write", "mtu": 1500, "size": 4}]}}))
    for path, reason in ((old, "no latency breakdown"), (tmp_path / "missing.json", "not a via_bench.json")):
        result = numavia("bench", "via", "--baseline", str(path))
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and reason in lines[0], result.stderr


def test_the_wait_for_the_responders_receives_counts_card_time_not_wall_time(monkeypatch):
    """However slowly the machine simulates (a 256-VI agent writes its slots' descriptors for
    minutes of wall time before its first receive), the wait gives up only after
    RECEIVE_STALL_SECONDS of the responder's card time without a new receive."""
    monkeypatch.setattr(bench_via.time, "sleep", lambda seconds: None)
    bench = object.__new__(bench_via.Bench)
    bench.freq = 100_000_000
    stall = int(bench.freq * bench_via.RECEIVE_STALL_SECONDS)
    # A long start (most of the stall's card time, over many polls), then one receive a stall apart.
    card = iter([0, *range(0, stall, stall // 50), *(k * stall for k in range(1, 6))])
    posts = iter([0] * 50 + list(range(1, 6)))
    bench._responder_cycles = lambda: next(card)
    bench._receives_posted = lambda vis: next(posts)
    bench._wait_receives(5, 2, [])
    # Stuck after the first: given up once the card ran a stall past it, and not before.
    card = iter([0, 10, stall // 2, stall + 10, stall + 11, 2 * stall + 11])
    posts = iter([1, 1, 1, 1])
    bench._responder_cycles = lambda: next(card)
    bench._receives_posted = lambda vis: next(posts)
    with pytest.raises(
        bench_via.BenchError,
        match=rf"^the responder's agent did not post its receives \(1 of 5; none for {stall + 1:,} card cycles\)$",
    ):
        bench._wait_receives(5, 2, [])


def test_the_simulated_cards_carry_the_vis_asked_for():
    """`--vis` reaches the card every node builds, and the SoC's cache key, so a ring of 64-VI cards
    is built apart from the default one; out of the register map's range it is refused."""
    config = sim.SimConfig(via_vis=regmap.VI_CAPACITY)
    assert config.card_config().via_vis == regmap.VI_CAPACITY
    assert sim.soc_key(config) != sim.soc_key(sim.SimConfig())
    # Host memory grows with the VIs where they need more than the default (a power of two) ...
    assert sim.SimConfig().host_mem_size == sim.SimConfig(via_vis=64).host_mem_size == params.HOST_MEM_SIZE
    assert config.host_mem_size == config.card_config().host_mem_size == 2 * params.HOST_MEM_SIZE
    assert regmap.VI_CAPACITY * sim.HOST_MEM_PER_VI <= config.host_mem_size
    # ... unless given; so do the memory handles, one a VI at least.
    assert sim.SimConfig(via_vis=regmap.VI_CAPACITY, host_mem_size=0x10_0000).host_mem_size == 0x10_0000
    assert config.card_config().via_att_regions == regmap.VI_CAPACITY
    assert sim.SimConfig().card_config().via_att_regions == CardConfig.via_att_regions
    for vis in (0, regmap.VI_CAPACITY + 1):
        with pytest.raises(sim.SimError, match=rf"--vis must be 1..{regmap.VI_CAPACITY}, not {vis}"):
            sim.SimConfig(via_vis=vis)
