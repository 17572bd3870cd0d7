"""The push-pull library's protocol (firmware/core/src/pushpull.c), compiled for the host
(ASan/UBSan): the plan at the bytes_to_push edges, every size class under both schemes, a receiver
that is not posted yet, credits, refusals; two endpoints joined by a minimal engine model that
checks every segment against the ATT the library wrote (firmware/tests/test_pushpull.c)."""

import subprocess

from numavia import codegen
from numavia.buildcache import REPO_ROOT


def test_pushpull_unit_tests(tmp_path):
    gen = tmp_path / "generated"
    codegen.write_all(gen)
    subprocess.run(["make", "-s", "-C", str(REPO_ROOT / "firmware/tests"), f"BUILD_DIR={tmp_path}",
                    f"GEN_DIR={gen}", str(tmp_path / "test_pushpull")], check=True)
    result = subprocess.run([str(tmp_path / "test_pushpull")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    checks, failures = (int(w) for w in result.stdout.split()[::2][:2])
    assert failures == 0 and checks >= 300
