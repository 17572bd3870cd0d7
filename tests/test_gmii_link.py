"""The harness's Ethernet switch (soc/verilator/gmii_link.hpp), compiled on its own with plain
variables for the node ports: forwarding by MAC, delay, gaps, loss, corruption, determinism."""

import subprocess

from numavia.buildcache import REPO_ROOT

TEST = REPO_ROOT / "tests" / "cpp" / "test_gmii_link.cpp"
HARNESS = REPO_ROOT / "soc" / "verilator"


def verilator_include():
    root = subprocess.run(["verilator", "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True)
    return f"{root.stdout.strip()}/include"


def test_gmii_switch(tmp_path):
    binary = tmp_path / "test_gmii_link"
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-fsanitize=address,undefined",
                    f"-I{verilator_include()}", f"-I{HARNESS}", str(TEST), "-o", str(binary)], check=True)
    result = subprocess.run([str(binary)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "0 failures"
