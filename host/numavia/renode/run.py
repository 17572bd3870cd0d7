"""Running the generated ring: build the co-simulated card with CMake, then ``renode-test``.

Renode cannot be installed on every machine (it is not a Debian or PyPI package), so each tool
is looked for first and a missing one is reported in one line before anything is built.

The card model does not depend on the number of nodes, so it is built once per content (card
Verilog, generated top and header, model source, CMake project, integration library, Verilator)
in the build cache, and each node of a ring gets its own copy of the library.
"""

import os
import shutil
import site
import subprocess
from pathlib import Path

from numavia.base import buildcache

from . import ROBOT_FILE
from .cosim import COSIM_PROJECT_DIR, HEADER_FILE, WRAPPER_FILE
from .script import CARD_MODEL_FILE
from .soc import RenodeError

INTEGRATION_MARKER = "integration-library.cmake"
#: The CMake project's target, and the library it makes.
MODEL_TARGET = "Vnumavia_card"
MODEL_LIBRARY = f"lib{MODEL_TARGET}.so"


def find_integration_library(renode_dir):
    """The folder of Renode's co-simulation integration library under ``renode_dir``."""
    if not renode_dir:
        raise RenodeError(
            "Renode's co-simulation integration library is needed: pass --renode-dir "
            "(Renode's root folder) or set RENODE_ROOT"
        )
    root = Path(renode_dir)
    if not root.is_dir():
        raise RenodeError(f"--renode-dir {root} is not a folder")
    found = sorted(root.rglob(INTEGRATION_MARKER))
    if len(found) != 1:
        raise RenodeError(
            f"{root} holds {len(found)} Renode integration libraries ({INTEGRATION_MARKER}); "
            f"expected one: is it Renode's root folder?"
        )
    return found[0].parent


def require_tools(renode_dir):
    """Everything a run needs, checked before any build: returns Renode's root folder."""
    for tool, why in (
        ("renode-test", "Renode's test runner (install Renode from https://renode.io)"),
        ("renode", "Renode itself (install it from https://renode.io)"),
        ("cmake", "to build the co-simulated card (run `make setup`)"),
        ("verilator", "to verilate the card (run `make setup`)"),
    ):
        if shutil.which(tool) is None:
            raise RenodeError(f"{tool} not found on PATH: it is {why}")
    root = renode_dir or os.environ.get("RENODE_ROOT")
    find_integration_library(root)
    return Path(root).resolve()


def _step(cmd, log_path, what):
    with open(log_path, "w") as log_file:
        code = subprocess.run([str(c) for c in cmd], stdout=log_file, stderr=subprocess.STDOUT).returncode
    if code:
        raise RenodeError(f"{what} failed (exit status {code}; log: {log_path})")


def build_card_model(out_dir, renode_dir, card_verilog, nodes, log):
    """Build (or reuse) the card model, then copy it to every node's file in ``out_dir``."""
    cosim_dir = Path(out_dir).resolve() / "cosim"
    integration = find_integration_library(renode_dir)
    inputs = [
        cosim_dir / WRAPPER_FILE,
        cosim_dir / HEADER_FILE,
        Path(card_verilog),
        *buildcache.source_files(COSIM_PROJECT_DIR, ("*.cpp", "CMakeLists.txt")),
    ]
    key = buildcache.digest(inputs, params={"integration": str(integration), "verilator": _verilator_version()})

    def produce(folder):
        log("building the co-simulated card (Verilator and an optimised compile: many minutes on two cores)")
        _step(
            [
                "cmake",
                "-S",
                COSIM_PROJECT_DIR,
                "-B",
                folder / "build",
                f"-DUSER_RENODE_DIR={Path(renode_dir).resolve()}",
                f"-DNUMAVIA_COSIM_DIR={cosim_dir}",
            ],
            folder / "cmake-configure.log",
            "CMake configuration",
        )
        _step(
            ["cmake", "--build", folder / "build", "--target", MODEL_TARGET, "-j", str(os.cpu_count() or 2)],
            folder / "cmake-build.log",
            "the co-simulated card's build",
        )
        shutil.copyfile(folder / "build" / MODEL_LIBRARY, folder / MODEL_LIBRARY)
        shutil.rmtree(folder / "build")

    model = buildcache.cached("renode-card", key, produce, log=log) / MODEL_LIBRARY
    for node in range(nodes):
        target = Path(out_dir) / CARD_MODEL_FILE.format(node=node)
        target.parent.mkdir(parents=True, exist_ok=True)
        # A new file, renamed into place: a Renode still running the old one keeps it.
        partial = target.with_suffix(".partial")
        shutil.copyfile(model, partial)
        os.replace(partial, target)
    log(f"card model {model} copied for {nodes} node(s)")


def _verilator_version():
    return subprocess.run(["verilator", "--version"], capture_output=True, text=True).stdout.strip()


def host_site_folders():
    """``NUMAVIA_SITE`` for ``renode-test``: the site folders of this Python environment, which
    the generated keyword library adds (with their ``.pth`` files) to import ``numavia``."""
    return os.pathsep.join(site.getsitepackages())


def run_tests(out_dir, log):
    out_dir = Path(out_dir).resolve()
    log(f"running {ROBOT_FILE} with renode-test")
    env = dict(os.environ, NUMAVIA_SITE=host_site_folders())
    code = subprocess.run(["renode-test", str(out_dir / ROBOT_FILE)], cwd=out_dir, env=env).returncode
    if code:
        raise RenodeError(f"renode-test reported failures (exit status {code}); results in {out_dir}")
