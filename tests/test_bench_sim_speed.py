"""``numavia bench sim-speed``: its argument checks, and short runs of both models in one and in
two processes, whose figures must agree with the runs' own cycle counts and times."""

import json
import subprocess
import sys

import pytest

from numavia.bench import sim_speed

CLI = [sys.executable, "-m", "numavia.cli"]


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--nodes", "0"], "at least 1"),
        (["--nodes", "65"], "at most 64"),
        (["--procs", "two"], "not a valid process count"),
        (["--cycles", "x"], "--cycles"),
        (["--card-accesses", "-1"], "--card-accesses"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args, reason):
    proc = subprocess.run(CLI + ["bench", "sim-speed", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and reason in proc.stderr.splitlines()[-1]


@pytest.mark.slow
def test_rows_for_each_ring_and_spread_with_consistent_figures(tmp_path):
    cycles = 20_000
    figures = sim_speed.measure(
        (2, 3), (1, 2), cycles=cycles, card_accesses=50, log=lambda m: None, run_root=tmp_path / "runs"
    )
    got = [(r["model"], r["nodes"], r["procs"]) for r in figures["rows"]]
    assert got == [(kind, n, p) for kind in ("node", "card") for n in (2, 3) for p in (1, 2)]
    for r in figures["rows"]:
        if r["model"] == "node":
            assert r["cycles"] == cycles
        assert r["wall_seconds"] > 0 and r["cpu_seconds"] > 0
        assert r["node_cycles_per_second"] == pytest.approx(r["cycles"] * r["nodes"] / r["wall_seconds"], rel=0.02)
        assert r["node_cycles_per_cpu_second"] == pytest.approx(r["cycles"] * r["nodes"] / r["cpu_seconds"], rel=0.02)
    # Every process of a run reports its processor time, and the run adds them up.
    run_dir = tmp_path / "runs" / "node-3-2"
    parts = [json.loads((run_dir / f"process{p}.json").read_text())["cpu_seconds"] for p in (0, 1)]
    assert json.loads((run_dir / "run.json").read_text())["cpu_seconds"] == pytest.approx(sum(parts), abs=0.002)
    sim_speed.report(figures, tmp_path)
    for name in ("sim_speed.md", "sim_speed.csv", "sim_speed.json", "sim_speed.png"):
        assert (tmp_path / name).stat().st_size > 0
