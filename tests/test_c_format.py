"""The C and C++ sources are formatted as .clang-format says: the same check as `make lint-c-format`
(file list in the Makefile), run when clang-format is installed (.ci/setup.sh installs it)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("clang-format") is None, reason="clang-format is not installed (make setup)")
def test_c_and_cpp_sources_are_formatted():
    result = subprocess.run(["make", "-s", "-C", str(REPO), "lint-c-format"], capture_output=True, text=True)
    unformatted = sorted(set(re.findall(r"^(\S+?):\d+:\d+: error:", result.stderr, re.M)))
    assert result.returncode == 0, (
        f"not formatted (run `make format-c`): {', '.join(unformatted) or result.stderr.strip()}"
    )
    assert re.search(r"lint-c: [1-9]\d* C/C\+\+ files formatted", result.stdout), result.stdout
