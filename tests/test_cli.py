"""The numavia command line: help, version, argument errors."""

import subprocess
import sys

import pytest


def numavia(*args):
    return subprocess.run([sys.executable, "-m", "numavia.cli", *args], capture_output=True, text=True)


def test_help_lists_commands():
    result = numavia("--help")
    assert result.returncode == 0
    for command in ("sim", "firmware"):
        assert command in result.stdout


def test_version():
    result = numavia("--version")
    assert result.returncode == 0 and result.stdout.startswith("numavia ")


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-option"],
        ["no-such-command"],
        ["sim", "--nodes", "zero"],
        ["sim", "--nodes", "0"],
        ["sim", "--cpu-variant", "huge"],
        ["sim", "--cache-at", "third"],
        ["demo", "--cache-at", "never"],
        ["bench", "coherence", "--ring-drop", "1.5"],
        ["bench", "coherence", "--flip-rate", "-1e-4"],
        ["bench", "coherence", "--ring-duplicate", "often"],
        [],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args):
    result = numavia(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], result.stderr


@pytest.mark.parametrize("command", [["bench", "stream"], ["bench", "shm"], ["bench", "latency"], ["demo"]])
def test_a_file_as_output_folder_is_one_line_error(tmp_path, command):
    (tmp_path / "taken").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "numavia.cli", *command, "--out", str(tmp_path / "taken")],
        capture_output=True,
        text=True,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "is a file" in lines[0], result.stderr


def test_output_folder_is_created_before_any_work(tmp_path):
    from numavia.cli.common import results_folder

    deep = tmp_path / "new" / "deeper"
    assert results_folder(str(deep)) == deep and deep.is_dir()


@pytest.mark.parametrize("command", [["bench", "coherence"], ["bench", "via"], ["bench", "pushpull"]])
def test_an_output_folder_that_cannot_be_created_is_one_line_error(tmp_path, command):
    (tmp_path / "taken").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "numavia.cli", *command, "--out", str(tmp_path / "taken" / "sub")],
        capture_output=True,
        text=True,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "cannot create the output folder" in lines[0], result.stderr


@pytest.mark.parametrize(
    "args, reason",
    [
        (["sim", "--nodes", "100"], "--nodes: '100' is not a ring size (1..64)"),
        (["sim", "--nodes", "0"], "--nodes: '0' is not a ring size (1..64)"),
        (["sim", "--procs", "3"], "3 processes for 2 node(s): at most one per node"),
        (["sim", "--hostfile", "hosts"], "a hostfile needs --mpi"),
        (["sim", "--console", "0"], "--console goes with --serve"),
        (["demo", "--nodes", "1"], "--nodes: '1' is not a ring size (2..64)"),
        (["mem", "write", "0x40000000"], "write needs a VALUE"),
        (["build", "--board", "ecpix5", "--bare", "--compare-bare"], "--bare and --compare-bare exclude each other"),
        (["build", "--board", "ecpix5", "--synth-only", "--compare-bare"], "--synth-only builds one SoC"),
        (["renode", "--firmware", "5=zephyr"], "--firmware for node 5, but the ring's nodes are 0..1"),
        (["bench", "latency", "--nodes", "65"], "'65' is not a ring size (1..64)"),
        (["bench", "via", "--eth-delay", "15"], "--eth-delay must be at least 16 cycles"),
        (["bench", "via", "--pair", "0,2"], "--pair names two nodes of the ring (0..1), not [0, 2]"),
        (["bench", "via", "--nodes", "3", "--pair", "1"], "--pair names two nodes of the ring (0..2), not [1]"),
        (["bench", "via", "--nodes", "1"], "'1' is not a ring size (2..64)"),
        (["bench", "via", "--min-size", "8k", "--max-size", "4k"], "--min-size 8192 is larger than --max-size 4096"),
        (["bench", "pushpull", "--eth-delay", "15"], "--eth-delay must be at least 16 cycles"),
        (["bench", "pushpull", "--max-size", "2Mi"], "--max-size is at most 1Mi"),
        (["bench", "sim-speed", "--nodes", "65"], "--nodes: a ring holds at most 64 nodes"),
        (["bench", "sim-speed", "--procs", "0"], "--procs: every value must be at least 1"),
    ],
)
def test_values_rejected_after_parsing_are_bad_arguments_too(args, reason):
    """Checks that need more than one option (or the configuration) fail as argparse fails: one
    line naming the command, exit status 2, before any build."""
    result = numavia(*args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"numavia {args[0]}") and reason in lines[0], result.stderr
    assert "error:" in lines[0]


def test_bad_arguments_through_main_exit_2_and_failures_exit_1(tmp_path, monkeypatch, capsys):
    from numavia.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["sim", "--nodes", "100"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("numavia sim: error: argument --nodes:")
    monkeypatch.setenv("NUMAVIA_SESSION", str(tmp_path / "session.json"))
    assert main(["status"]) == 1  # a run-time failure: no simulation is running
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("numavia: error:"), err


@pytest.mark.parametrize(
    "command",
    [
        "sim",
        "firmware",
        "zephyr-overlay",
        "mem",
        "status",
        "console",
        "bench",
        "demo",
        "renode",
        "build",
        "paths",
        "flash",
        "bench latency",
        "bench miss",
        "bench local-side",
        "bench coherence",
        "bench protocol",
        "bench splash2",
        "bench stream",
        "bench shm",
        "bench via",
        "bench pushpull",
        "bench sim-speed",
        "bench boot",
        "bench pcie",
    ],
)
def test_every_command_and_benchmark_has_help(command):
    result = numavia(*command.split(), "--help")
    assert result.returncode == 0 and result.stdout.startswith(f"usage: numavia {command}")
