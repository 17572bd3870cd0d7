"""The harness's links, each compiled on its own with plain variables for the node ports
(tests/cpp/test_<model>.cpp): the Ethernet ports and switch (soc/verilator/gmii_link.hpp:
forwarding by MAC, delay, gaps, loss, corruption, duplication, reordering, determinism), the SCI
ring link (soc/verilator/ring_link.hpp: delay, bit flips, lost and duplicated packets,
determinism), the channels between processes (soc/verilator/arena.hpp: a producer and a consumer
process over shared memory) and the node console (soc/verilator/console.hpp: input from a socket
or a descriptor, output to the socket)."""

import subprocess

import pytest

from numavia.base.paths import REPO_ROOT

HARNESS = REPO_ROOT / "soc" / "verilator"
UNIT_TESTS = sorted((REPO_ROOT / "tests" / "cpp").glob("test_*.cpp"))


def verilator_include():
    root = subprocess.run(["verilator", "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True)
    return f"{root.stdout.strip()}/include"


@pytest.mark.parametrize("source", UNIT_TESTS, ids=[p.stem for p in UNIT_TESTS])
def test_link_model(tmp_path, source):
    binary = tmp_path / source.stem
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Werror",
            "-fsanitize=address,undefined",
            f"-I{verilator_include()}",
            f"-I{HARNESS}",
            str(source),
            "-o",
            str(binary),
        ],
        check=True,
    )
    result = subprocess.run([str(binary)], cwd=tmp_path, capture_output=True, text=True)  # files it writes stay there
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "0 failures"
