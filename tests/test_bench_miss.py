"""Where a remote read miss's cycles go: the coherence engine's phases on the real RTL (the host's
word leaves before the reply's data block is in; the home streams the line straight into its
reply), the whole miss on a 2-node RTL ring, and the command's argument errors."""

import pytest

from numavia.base.errors import NumaviaError
from numavia.bench import miss
from numavia.cli import main
from numavia.gateware.card import CardConfig
from numavia.gateware.memory_controller import READ_LATENCY

CONFIG = CardConfig(max_nodes=16, via=False)


def test_engine_phases_of_a_remote_read_miss():
    phases, after = miss.engine_phases(CONFIG)
    line_words = CONFIG.geometry().line_words
    assert set(phases) == {key for key, _ in miss.PHASES} - {"ring"}
    assert all(cycles > 0 for cycles in phases.values())
    # The host has its word (checked inside: word WORD of the reply) while the rest of the line
    # is still coming in: the reply's block takes line_words cycles behind its header.
    assert phases["complete"] < line_words
    # The home's line goes from memory into the reply at a word per cycle, no buffer copy first.
    assert phases["home_data"] <= line_words + READ_LATENCY + 2
    # The microcode alone does the same transaction, fetching its instructions: slower.
    alone, _ = miss.engine_phases(CONFIG, microcode_only=True)
    assert alone["request"] > phases["request"] and alone["home_reply"] > phases["home_reply"]
    # The next read of the line (checked inside: the next word) waits for the line fill, which
    # writes the whole line into the cache, then hits: a line's worth of cycles and more.
    assert line_words < after["reuse"] < 4 * line_words


@pytest.mark.slow
def test_miss_breakdown_on_a_two_node_ring(tmp_path):
    figures = miss.run((2,), config=CONFIG, log=lambda message: None)
    (ring,) = figures["rings"]
    assert ring["nodes"] == 2 and ring["phases"]["ring"] > 0
    assert sum(ring["phases"].values()) == ring["total"]
    text = miss.report(figures, tmp_path)
    assert "whole miss" in text
    for suffix in ("md", "csv", "json", "png"):
        assert (tmp_path / f"miss.{suffix}").stat().st_size > 0


@pytest.mark.parametrize("nodes", ["1", "2,2", "2,x", "65"])
def test_bad_ring_sizes_are_refused(nodes, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "miss", "--nodes", nodes])
    assert exit_info.value.code == 2
    assert "--nodes" in capsys.readouterr().err


def test_a_baseline_run_is_tabulated_and_plotted_beside(tmp_path):
    ring = {"nodes": 2, "total": 100, "phases": {key: 10 for key, _ in miss.PHASES} | {"ring": 50}}
    figures = {
        "rings": [ring],
        "clock_mhz": 100.0,
        "config": {},
        "word": miss.WORD,
        "reuse": 40,
        "microcode_only": False,
    }
    miss.report(figures, tmp_path / "before")
    baseline = miss.load_baseline(tmp_path / "before" / "miss.json")
    text = miss.report(dict(figures, baseline=baseline), tmp_path / "after")
    assert "2 nodes, baseline (cycles)" in text and "2 nodes (cycles)" in text
    assert (tmp_path / "after" / "miss.png").stat().st_size > 0


@pytest.mark.parametrize("content", ["not json", '{"figures": {"rings": [{"nodes": 2}]}}', "{}"])
def test_a_bad_baseline_is_refused(tmp_path, content):
    path = tmp_path / "miss.json"
    path.write_text(content)
    with pytest.raises(NumaviaError, match="not the miss.json"):
        miss.load_baseline(path)
    with pytest.raises(NumaviaError, match="not the miss.json"):
        miss.load_baseline(tmp_path / "missing.json")
