"""The firmware's VIA protocol manager, compiled for the host (ASan/UBSan) against a fake VIA block:
registration into the ATT, protection tags, CQs, VIs, connection set-up/tear-down, the mailbox."""

import subprocess

from numavia.base import codegen
from numavia.base.paths import REPO_ROOT


def test_via_manager_unit_tests(tmp_path):
    gen = tmp_path / "generated"
    codegen.write_all(gen)
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(REPO_ROOT / "firmware/tests"),
            f"BUILD_DIR={tmp_path}",
            f"GEN_DIR={gen}",
            str(tmp_path / "test_via"),
        ],
        check=True,
    )
    result = subprocess.run([str(tmp_path / "test_via")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    checks, failures = (int(w) for w in result.stdout.split()[::2][:2])
    assert failures == 0 and checks >= 150
