"""`make soak` (tests/soak.py) at CI size: its VIA parts run end to end on two full nodes (RTL +
firmware) over a switch that loses, corrupts, duplicates and reorders frames, and write their
report; the full sizes are the same code with bigger counts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import soak
from support.via_every_vi import LOAD_ROUNDS

from numavia.base import regmap
from numavia.base.errors import NumaviaError
from numavia.gateware.card import CardConfig

HERE = Path(__file__).resolve().parent
RATES = ["--eth-loss", "0.03", "--eth-corrupt", "0.02", "--eth-duplicate", "0.03", "--eth-reorder", "0.03"]


@pytest.mark.slow
def test_the_via_soaks_deliver_every_message_through_every_fault(tmp_path):
    mix = {(scheme, size) for scheme, size, _ in soak.PUSHPULL_MIX}
    messages = 2 * 2 * len(mix)  # two pairs, each: at least one run of every kind in the mix
    assert (
        soak.main(
            [
                "--parts",
                "via-pushpull,via-system",
                "--via-messages",
                str(messages),
                "--chunk",
                "2",
                "--jobs",
                "2",
                "--host-messages",
                "8",
                "--seed",
                "5",
                "--out",
                str(tmp_path),
                *RATES,
            ]
        )
        == 0
    )
    rows = json.loads((tmp_path / "soak.json").read_text())
    pushpull, host = rows
    assert pushpull["ok"] and host["ok"]
    assert (pushpull["operations"], host["operations"]) == (messages, 8)
    runs = pushpull["figures"]["runs"]
    assert sum(r["messages"] for r in runs) == messages
    assert {(r["scheme"], r["size"]) for r in runs} == mix
    assert all(r["received"] == r["messages"] and r["bad_bytes"] == 0 for r in runs)
    assert pushpull["figures"]["pairs_out_of_step"] == 0  # no frame taken twice or skipped, either way
    for row in rows:
        link = row["figures"]["link"]
        assert link["lost"] + link["corrupted"] + link["duplicated"] + link["reordered"] > 0, link
        assert row["violations"] == 0 and row["figures"]["throughput_MB_per_s"] > 0
    assert "| violations |" in (tmp_path / "soak.md").read_text()


@pytest.mark.slow
def test_the_every_vi_soak_checks_each_vi_of_the_default_card(tmp_path):
    """The part that runs the register map's 256 VIs in `make soak`, at the default card's VIs
    (the test suite runs the same check at the ECPIX-5's 64 in test_via_reliability)."""
    vis = CardConfig.via_vis
    args = ["--parts", "via-every-vi", "--every-vis", str(vis), "--seed", "23", "--out", str(tmp_path), *RATES]
    assert soak.main(args) == 0
    (row,) = json.loads((tmp_path / "soak.json").read_text())
    assert row["ok"] and row["violations"] == 0 and row["operations"] == 2 * LOAD_ROUNDS * vis
    assert row["figures"]["vis"] == vis
    c0, c1 = row["figures"]["counters"]
    assert c0["TX_ERRORS"] == 1 and c1["RX_PROTECTION"] >= 1  # VI 0's write into another tag's buffer
    link = row["figures"]["link"]
    assert link["lost"] > 0 and c0["RX_BAD_FCS"] + c1["RX_BAD_FCS"] == link["corrupted"], link


@pytest.mark.parametrize(
    "args,message",
    [
        (["--parts", "via-nowhere"], "unknown part(s): via-nowhere"),
        (["--eth-loss", "1.5"], "--eth-loss must be in [0, 1), not 1.5"),
        (["--chunk", "0"], "--chunk must be at least 1, not 0"),
        (["--every-vis", "0"], f"--every-vis must be 1..{regmap.VI_CAPACITY}, not 0"),
    ],
)
def test_bad_arguments_are_one_line_and_run_nothing(tmp_path, args, message):
    out = tmp_path / "soak"
    r = subprocess.run(
        [sys.executable, str(HERE / "soak.py"), *args, "--out", str(out)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].endswith(message)
    assert not out.exists()


def test_a_part_that_fails_is_reported_in_one_line_and_the_rest_still_run(tmp_path, monkeypatch, capsys):
    """The soak's own bookkeeping: a part that raises (a VI failed, a node stopped answering) is a
    failed row and one line on stderr; the other parts run and are reported."""

    def broken(*args):
        raise NumaviaError("node 1: BENCH timed out")

    monkeypatch.setattr(soak, "via_system_soak", broken)
    monkeypatch.setattr(
        soak,
        "via_wire_soak",
        lambda messages, seed, faults: {
            "part": "wire",
            "ok": True,
            "operations": messages,
            "faults injected": "0",
            "detected/recovered": "0",
            "violations": 0,
        },
    )
    assert soak.main(["--parts", "via-system,via-wire", "--wire-messages", "3", "--out", str(tmp_path)]) == 1
    failed, wire = json.loads((tmp_path / "soak.json").read_text())
    assert (failed["ok"], failed["error"]) == (False, "node 1: BENCH timed out") and wire["operations"] == 3
    assert (
        capsys.readouterr().err.strip().splitlines()[-1] == "soak: error: via-system (node 1: BENCH timed out) failed"
    )
