"""Hostile input to the firmware core (mailbox commands from the host, management frames from
the network, microcode images): the libFuzzer target firmware/tests/fuzz_firmware.c, built with
clang and ASan/UBSan, runs a bounded number of inputs from a fixed seed, after replaying the
inputs that once crashed it (firmware/tests/fuzz_corpus/)."""

import subprocess

from numavia.base import codegen
from numavia.base.paths import REPO_ROOT

CORPUS = REPO_ROOT / "firmware/tests/fuzz_corpus"


def build(tmp_path):
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
            str(tmp_path / "fuzz_firmware"),
        ],
        check=True,
    )
    return tmp_path / "fuzz_firmware"


def test_firmware_fuzz_target(tmp_path):
    binary = build(tmp_path)
    crashes = sorted(CORPUS.glob("crash-*"))
    assert crashes, "the regression inputs are missing"
    replay = subprocess.run([str(binary)] + [str(c) for c in crashes], capture_output=True, text=True)
    assert replay.returncode == 0, replay.stderr[-3000:]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    run = subprocess.run(
        [
            str(binary),
            "-runs=60000",
            "-seed=1",
            "-max_len=4096",
            "-max_total_time=120",
            f"-artifact_prefix={tmp_path}/",
            str(corpus),
            str(CORPUS),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = sorted(p.name for p in tmp_path.glob("crash-*"))
    assert run.returncode == 0 and not found, f"{found}\n{run.stderr[-3000:]}"
    assert "Done 60000 runs" in run.stderr or "DONE" in run.stderr


def test_management_frame_longer_than_the_data_registers_is_read_safely(tmp_path):
    """Found by the fuzzer: MGMT_RX_STATUS.LENGTH (7 bits) can claim 127 bytes; the firmware read
    that many into a 64-byte buffer. The stored input must now run clean under ASan."""
    binary = build(tmp_path)
    result = subprocess.run([str(binary), str(CORPUS / "crash-mgmt-length-127")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
