"""The waveform option (support/waveforms.py, support/sim.py): a failing Amaranth simulation
leaves a VCD of the design's signals under the waveform folder, a passing one leaves none unless
every waveform is asked for. Runs pytest in-process on two small tests of a counter."""

import pytest

TESTS = """
from amaranth import Module, Signal
from amaranth.sim import Simulator

from support.sim import run_simulation


def simulate(expected):
    m = Module()
    probe_counter = Signal(8)
    m.d.sync += probe_counter.eq(probe_counter + 1)
    sim = Simulator(m)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await ctx.tick().repeat(5)
        assert ctx.get(probe_counter) == expected

    sim.add_testbench(bench)
    run_simulation(sim)


def test_counts_wrong():
    simulate(expected=99)


def test_counts_right():
    simulate(expected=5)
"""

FAILED_VCD = "test_counter.py-test_counts_wrong.vcd"
PASSED_VCD = "test_counter.py-test_counts_right.vcd"


def run_counter_tests(pytester, monkeypatch, *args, environment=None):
    monkeypatch.delenv("NUMAVIA_WAVEFORMS", raising=False)
    if environment is not None:
        monkeypatch.setenv("NUMAVIA_WAVEFORMS", environment)
    pytester.makepyfile(test_counter=TESTS)
    folder = pytester.path / "waves"
    result = pytester.runpytest_inprocess("-p", "support.waveforms", f"--waveform-dir={folder}", *args)
    return result, folder


@pytest.mark.parametrize("option, environment", [(["--waveforms"], None), ([], "1")])
def test_a_failing_simulation_leaves_a_vcd_of_its_design_and_a_passing_one_none(
    pytester, monkeypatch, option, environment
):
    result, folder = run_counter_tests(pytester, monkeypatch, *option, environment=environment)
    result.assert_outcomes(passed=1, failed=1)
    assert sorted(p.name for p in folder.iterdir()) == [FAILED_VCD]
    vcd = (folder / FAILED_VCD).read_text()
    assert "$enddefinitions" in vcd and "probe_counter" in vcd
    assert "#50000" in vcd, "the VCD does not reach the fifth clock edge (50 ns at 100 MHz)"


def test_all_keeps_the_waveforms_of_passing_tests_too(pytester, monkeypatch):
    result, folder = run_counter_tests(pytester, monkeypatch, "--waveforms=all")
    result.assert_outcomes(passed=1, failed=1)
    assert sorted(p.name for p in folder.iterdir()) == sorted([FAILED_VCD, PASSED_VCD])


def test_without_the_option_no_waveform_is_written(pytester, monkeypatch):
    result, folder = run_counter_tests(pytester, monkeypatch)
    result.assert_outcomes(passed=1, failed=1)
    assert not folder.exists()


def test_a_bad_environment_value_is_one_clear_error(pytester, monkeypatch):
    result, folder = run_counter_tests(pytester, monkeypatch, environment="sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*NUMAVIA_WAVEFORMS must be 1, failed or all, not 'sometimes'*"])
    assert not folder.exists()
