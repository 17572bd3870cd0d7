"""Board targets: pin constraints of the generated SoCs, the open-flow build judged from nextpnr's
report, and the build/flash commands' errors."""

import dataclasses
import json
import subprocess
import sys

import pytest

from numavia import logic_paths
from numavia.boards import flow
from numavia.boards.flow import BoardError, TOP, check_constraints

CONFIGS = [(name, config) for name in flow.BOARD_NAMES for config in flow.load_board(name).configs]


@pytest.fixture(scope="module", params=CONFIGS, ids=["-".join(c) for c in CONFIGS])
def generated(request):
    name, config = request.param
    board = flow.load_board(name)
    folder = flow.generate(board, config, log=lambda m: None)
    gateware = folder / "gateware"
    return board, config, folder, (gateware / f"{TOP}.v").read_text(), (gateware / f"{TOP}.lpf").read_text()


def test_every_port_has_one_pin_and_no_pin_is_shared(generated):
    board, config, _, verilog, lpf = generated
    sites = check_constraints(verilog, lpf)
    ports = flow.top_ports(verilog)
    assert sorted(sites) == sorted(ports)
    assert len(set(sites.values())) == len(sites)
    # What the board must bring out: its clock, the host's UART, and the Ethernet PHY when the
    # card has its VIA engine.
    for port in (board.clk_name, "serial_tx", "serial_rx"):
        assert port in sites
    via = board.configs[config]["card"].get("via", True)
    assert via == ("eth0_tx_ctl" in sites) == ("eth_clocks0_rx" in sites)


def test_ring_link_on_pins_where_the_board_has_them(generated):
    board, _, _, verilog, lpf = generated
    ports = flow.top_ports(verilog)
    ring = [p for p in ports if p.startswith("ring_")]
    if board.ring_pads is None:
        assert ring == []
    else:   # 16 data bits + frame + forwarded clock each way
        assert len([p for p in ring if p.startswith("ring_tx")]) == 18
        assert len([p for p in ring if p.startswith("ring_rx")]) == 18
        assert 'FREQUENCY PORT "ring_rx_clk"' in lpf


def test_firmware_is_in_the_rom(generated):
    _, _, folder, _, _ = generated
    rom = (folder / "gateware" / f"{TOP}_rom.init").read_text().split()
    assert any(int(word, 16) for word in rom)
    csr = json.loads((folder / "csr.json").read_text())
    assert "uart" in csr["csr_bases"]   # the firmware's console: the crossover UART


def test_the_soc_runs_at_its_configurations_clock(generated):
    board, config, folder, _, _ = generated
    csr = json.loads((folder / "csr.json").read_text())
    assert csr["constants"]["config_clock_frequency"] == board.sys_clk_freq_of(config)


def test_constraint_checker_finds_a_shared_pin_and_a_missing_one():
    verilog = "module numavia_board (\n input wire a,\n output wire [1:0] b\n);\nendmodule\n"
    good = 'LOCATE COMP "a" SITE "A1";\nLOCATE COMP "b[0]" SITE "B1";\nLOCATE COMP "b[1]" SITE "C1";\n'
    assert check_constraints(verilog, good) == {"a": "A1", "b[0]": "B1", "b[1]": "C1"}
    with pytest.raises(BoardError, match="pin B1 is used twice"):
        check_constraints(verilog, good.replace('"C1"', '"B1"'))
    with pytest.raises(BoardError, match="without a pin: b\\[1\\]"):
        check_constraints(verilog, good.replace('LOCATE COMP "b[1]" SITE "C1";\n', ""))


def test_unknown_board_and_configuration_are_one_line_errors():
    with pytest.raises(BoardError, match="unknown board"):
        flow.load_board("arty")
    with pytest.raises(BoardError, match="no configuration 'huge'"):
        flow.generate(flow.load_board("colorlight_i5"), "huge")


def test_a_configuration_out_of_range_is_a_one_line_error():
    board = flow.load_board("ecpix5")
    small_buffer = {"card": {"via_tx_buffer_bytes": 4096}, "soc": board.configs[board.default_config]["soc"]}
    board = dataclasses.replace(board, configs={"small_buffer": small_buffer}, default_config="small_buffer")
    with pytest.raises(BoardError, match=r"^ecpix5 configuration 'small_buffer': tx_buffer_bytes must hold "
                                         r"two frames of the largest MTU \(18028 bytes\)$"):
        flow.generate(board, log=lambda m: None)


def _numavia(*args):
    return subprocess.run([sys.executable, "-m", "numavia.cli", *args], capture_output=True, text=True)


def test_flash_without_a_bitstream_or_cable_fails_in_one_line(tmp_path):
    result = _numavia("flash", "--board", "ecpix5", "--bitstream", str(tmp_path / "none.bit"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("numavia: error: no bitstream at")
    bit = tmp_path / "empty.bit"
    bit.write_bytes(b"")
    result = _numavia("flash", "--board", "colorlight_i5", "--bitstream", str(bit), "--cable", "no-such-cable")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("numavia: error: openFPGALoader failed:")


def test_a_failing_tool_is_one_line_and_its_whole_output_stays_in_the_log(tmp_path):
    from numavia import synth
    script = "echo placing 1; echo placing 2; echo 'ERROR: no BELs remaining for DP16KD' >&2; exit 3"
    with pytest.raises(synth.SynthesisError, match=r"^sh failed: ERROR: no BELs remaining for DP16KD$"):
        synth._run(["sh", "-c", script], tmp_path, "tool.log")
    assert (tmp_path / "tool.log").read_text().splitlines() == [
        "placing 1", "placing 2", "ERROR: no BELs remaining for DP16KD"]


def test_a_missed_clock_fails_naming_it_and_how_to_find_its_paths():
    met = {"achieved_mhz": 80.0, "target_mhz": 75.0, "met": True}
    missed = {"achieved_mhz": 30.7, "target_mhz": 75.0, "met": False}
    flow.check_timing({"board": "ecpix5", "clocks": {"sys": met}})
    with pytest.raises(BoardError) as e:
        flow.check_timing({"board": "ecpix5", "clocks": {"sys": missed, "eth_rx": met}})
    assert str(e.value) == ("timing not met on ecpix5: sys 30.7 MHz < 75.0 MHz "
                            "(`numavia build --board ecpix5 --synth-only` names the slowest paths)")
    with pytest.raises(BoardError, match="no clocks"):
        flow.check_timing({"board": "ecpix5", "clocks": {}})


def test_build_refuses_bare_and_compare_bare_together():
    result = _numavia("build", "--board", "colorlight_i5", "--bare", "--compare-bare")
    assert result.returncode == 1
    assert result.stderr.strip() == "numavia: error: --bare and --compare-bare exclude each other"
    result = _numavia("build", "--board", "colorlight_i5", "--synth-only", "--compare-bare")
    assert result.returncode == 1
    assert result.stderr.strip() == "numavia: error: --synth-only builds one SoC; leave out --compare-bare"


@pytest.mark.slow
def test_reduced_card_on_the_25f_builds_and_meets_timing():
    """Synthesis, place and route of the whole SoC with the reduced card on the Colorlight i5;
    timing judged from nextpnr's report (it runs with --timing-allow-fail, so its exit status
    says nothing about timing)."""
    board = flow.load_board("colorlight_i5")
    report = flow.build(board, log=lambda m: None)   # the same cache entry as `make bitstream`
    assert report["clocks"], "nextpnr analysed no clock"
    assert report["sys_clock"] is not None, "no clock constrained at the board's sys frequency"
    assert report["sys_clock"]["target_mhz"] == pytest.approx(board.sys_clk_freq_of(board.default_config) / 1e6, abs=0.5)
    for name, clock in report["clocks"].items():
        assert clock["achieved_mhz"] >= clock["target_mhz"], f"{name} misses timing"
    flow.check_timing(report)
    assert 0 < report["luts"] <= report["luts_available"]
    assert 0 < report["brams"] <= report["brams_available"]
    # The netlist's estimated slowest path (what `numavia build --synth-only` prints) agrees with
    # nextpnr's routed Fmax within the nominal model's reach.
    netlist = flow.synthesise(board, log=lambda m: None) / f"{TOP}.json"
    sys_paths = [p for p in logic_paths.worst_paths(logic_paths.load(netlist), 1) if p.clock_source == "EHXPLLL.CLKOP"]
    assert sys_paths, "no path of the sys clock (the PLL's output) estimated"
    assert 0.5 < report["sys_clock"]["achieved_mhz"] / sys_paths[0].mhz < 2
