"""The one-command set-up: a second run changes nothing; a missing prerequisite is one line."""

import os
import subprocess

from numavia.base.paths import REPO_ROOT

SETUP = REPO_ROOT / ".ci" / "setup.sh"


def test_second_run_changes_nothing():
    first = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, cwd=REPO_ROOT)
    assert first.returncode == 0, first.stderr
    stamp = REPO_ROOT / ".venv" / ".numavia-setup"
    before = stamp.stat().st_mtime_ns
    result = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert "Debian packages present" in result.stdout
    assert "Python environment up to date" in result.stdout
    assert stamp.stat().st_mtime_ns == before


def test_wrong_python_fails_with_one_line():
    env = {**os.environ, "PYTHON": "/bin/false"}
    result = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("setup: Python 3.11 is required")
