"""`make firmware-zephyr` (firmware/zephyr/build.sh): what it needs, generates and hands to west.

CI has no Zephyr tree, so west is a recording stand-in on PATH and ZEPHYR_BASE a folder holding
only the board files the script reads; what is checked is the script's own work: the generated
headers, the overlay for the SoC's csr.json against that board, and the arguments. The build
against a real tree is tests/test_zephyr_image.py (run where ZEPHYR_BASE is set).
"""

import json
import os
import subprocess

import pytest

import numavia
from numavia.base.paths import REPO_ROOT
from numavia.soc import zephyr_overlay

BUILD_SH = REPO_ROOT / "firmware" / "zephyr" / "build.sh"
BOARD_DTS = (
    "#include <riscv32-litex-vexriscv.dtsi>\n/ {\n\tram0: memory@40000000 {\n\t};\n};\n"
    '&ctrl0 {\n\tstatus = "okay";\n};\n&uart0 {\n\tstatus = "okay";\n};\n&gpio_in {\n\tstatus = "okay";\n};\n'
)
DTSI = (
    "/ {\n\tcpus {\n\t\tcpu0: cpu@0 {\n\t\t};\n\t};\n\tsoc {\n\t\tctrl0: soc_controller@e0000000 {\n\t\t};\n"
    "\t\tuart0: serial@e0001800 {\n\t\t};\n\t\ttimer0: timer@e0002800 {\n\t\t};\n"
    "\t\tgpio_in: gpio@e0006000 {\n\t\t};\n\t};\n};\n"
)


def run(env_updates, *args):
    env = {k: v for k, v in os.environ.items() if k != "ZEPHYR_BASE"}
    env.update(env_updates)
    return subprocess.run(["bash", str(BUILD_SH), *args], env=env, capture_output=True, text=True)


def test_without_a_zephyr_tree_it_stops_with_one_line():
    result = run({"PATH": "/usr/bin:/bin"})  # no west either
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Zephyr tree found" in lines[0]


def test_a_zephyr_base_that_is_not_a_folder_is_one_line(tmp_path):
    result = run({"ZEPHYR_BASE": str(tmp_path / "nowhere")})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"numavia: ZEPHYR_BASE={tmp_path / 'nowhere'} is not a folder"]


@pytest.fixture(scope="module")
def csr_json():
    from numavia.soc import sim

    return sim.build_soc(sim.SimConfig(), log=lambda message: None) / "csr.json"


@pytest.fixture
def fake_zephyr(tmp_path):
    """A ZEPHYR_BASE with the litex_vexriscv board file, and a west that records its arguments."""
    board = tmp_path / "zephyr" / "boards" / "enjoydigital" / "litex_vexriscv"
    board.mkdir(parents=True)
    (board / "litex_vexriscv.dts").write_text(BOARD_DTS)
    (tmp_path / "zephyr" / "dts" / "riscv").mkdir(parents=True)
    (tmp_path / "zephyr" / "dts" / "riscv" / "riscv32-litex-vexriscv.dtsi").write_text(DTSI)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    west = bin_dir / "west"
    west.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path / "west.args"}\n')
    west.chmod(0o755)
    return {
        "ZEPHYR_BASE": str(tmp_path / "zephyr"),
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "NUMAVIA_BUILD_DIR": str(tmp_path / "build"),
    }


def test_it_generates_headers_and_overlay_then_runs_west_build(fake_zephyr, csr_json, tmp_path):
    result = run({**fake_zephyr, "NUMAVIA_CSR_JSON": str(csr_json)})
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "west.args").read_text().splitlines()
    assert args[:6] == ["build", "-p", "auto", "-b", "litex_vexriscv", "-d"]
    assert args[7] == str(REPO_ROOT / "firmware" / "zephyr" / "app")
    defines = dict(a[2:].split("=", 1) for a in args[9:] if a.startswith("-D"))
    out = tmp_path / "build" / "zephyr"

    generated = out / "generated"
    assert defines["NUMAVIA_GENERATED_DIR"] == str(generated)
    assert (generated / "numavia_regs.h").exists() and (generated / "numavia_ucode.h").exists()

    overlay = out / "numavia_node.overlay"
    assert defines["EXTRA_DTC_OVERLAY_FILE"] == str(overlay)
    csr = json.loads(csr_json.read_text())
    # Disabled: what this Zephyr tree's board enables and the SoC lacks.
    tree = zephyr_overlay.read_tree(fake_zephyr["ZEPHYR_BASE"])
    assert tree.enabled == ("ctrl0", "gpio_in", "uart0")
    expected = zephyr_overlay.overlay(csr, source="csr.json", tree=tree)
    assert overlay.read_text() == expected
    assert '&gpio_in {\n\tstatus = "disabled";' in expected

    assert defines["EXTRA_CONF_FILE"].split(";") == [str(out / "numavia_node.conf")]
    assert (out / "numavia_node.conf").read_text() == zephyr_overlay.kconfig_fragment(csr, tree)
    assert defines["CONFIG_NUMAVIA_FW_VERSION"] == f'"{numavia.__version__}"'


def test_shell_option_adds_the_shell_configuration(fake_zephyr, csr_json, tmp_path):
    result = run({**fake_zephyr, "NUMAVIA_CSR_JSON": str(csr_json)}, "--shell", "--", "-DEXTRA=1")
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "west.args").read_text().splitlines()
    conf = next(a for a in args if a.startswith("-DEXTRA_CONF_FILE=")).split("=", 1)[1].split(";")
    assert conf[-1] == str(REPO_ROOT / "firmware" / "zephyr" / "app" / "shell.conf")
    assert args[-1] == "-DEXTRA=1"
    assert args[6] == str(tmp_path / "build" / "zephyr-shell" / "app")  # its own build folder


def test_out_option_and_bad_options(fake_zephyr, csr_json, tmp_path):
    result = run({**fake_zephyr, "NUMAVIA_CSR_JSON": str(csr_json)}, "--out", str(tmp_path / "elsewhere"))
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "west.args").read_text().splitlines()
    assert args[6] == str(tmp_path / "elsewhere" / "app")
    assert (tmp_path / "elsewhere" / "numavia_node.overlay").exists()
    result = run(fake_zephyr, "--bogus")
    assert result.returncode == 2 and "unknown option --bogus" in result.stderr
    result = run(fake_zephyr, "--out")
    assert result.returncode == 2 and "--out needs a folder" in result.stderr
