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


@pytest.mark.parametrize("command", ["sim", "firmware"])
def test_every_command_has_help(command):
    result = numavia(command, "--help")
    assert result.returncode == 0 and "usage:" in result.stdout


def test_version():
    result = numavia("--version")
    assert result.returncode == 0 and result.stdout.startswith("numavia ")


@pytest.mark.parametrize("args", [
    ["--no-such-option"],
    ["no-such-command"],
    ["sim", "--nodes", "zero"],
    ["sim", "--nodes", "0"],
    ["sim", "--cpu-variant", "huge"],
    ["bench", "coherence", "--ring-drop", "1.5"],
    ["bench", "coherence", "--flip-rate", "-1e-4"],
    ["bench", "coherence", "--ring-duplicate", "often"],
    [],
])
def test_bad_arguments_exit_2_with_one_line(args):
    result = numavia(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], result.stderr


@pytest.mark.parametrize("command", [["bench", "stream"], ["bench", "shm"], ["bench", "latency"], ["demo"]])
def test_a_file_as_output_folder_is_one_line_error(tmp_path, command):
    (tmp_path / "taken").write_text("")
    result = subprocess.run([sys.executable, "-m", "numavia.cli", *command, "--out", str(tmp_path / "taken")],
                            capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "is a file" in lines[0], result.stderr


def test_output_folder_is_created_before_any_work(tmp_path):
    from numavia.cli import _results_folder
    deep = tmp_path / "new" / "deeper"
    assert _results_folder(str(deep)) == deep and deep.is_dir()


@pytest.mark.parametrize("command", [["bench", "coherence"], ["bench", "via"], ["bench", "pushpull"]])
def test_an_output_folder_that_cannot_be_created_is_one_line_error(tmp_path, command):
    (tmp_path / "taken").write_text("")
    result = subprocess.run([sys.executable, "-m", "numavia.cli", *command, "--out", str(tmp_path / "taken" / "sub")],
                            capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "cannot create the output folder" in lines[0], result.stderr



