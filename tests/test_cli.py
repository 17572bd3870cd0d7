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
    [],
])
def test_bad_arguments_exit_2_with_one_line(args):
    result = numavia(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], result.stderr
