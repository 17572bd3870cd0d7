"""Where Numavia's files are, in the source checkout and in an installed package.

The source tree keeps the Python packages in four folders (``host/numavia``, ``gateware``, ``soc``,
``boards``) and the non-Python sources the tools build from beside them (``firmware``, ``renode``).
A wheel puts everything under the one ``numavia`` package: the two source-only folders become data
folders of ``numavia/resources/``. ``LAYOUT`` is the single description of that mapping: setup.py
builds the wheel from it, the lookups below follow it, and :func:`source_name` maps an installed
file back to its place in the source tree, so build-cache keys are the same both ways.

This module imports nothing from numavia: setup.py loads it before the package is installed.
"""

from pathlib import Path

#: Folder of the source tree -> where an installed package has it (relative to site-packages).
LAYOUT = {
    "host/numavia": "numavia",
    "gateware": "numavia/gateware",
    "soc": "numavia/soc",
    "boards": "numavia/boards",
    "firmware": "numavia/resources/firmware",  # no Python: shipped whole, as package data
    "renode": "numavia/resources/renode",
}
#: Non-Python files the tools read at run time, as globs per source folder (shipped as package data).
DATA = {
    "host/numavia": ["base/microcode/*.uasm"],
    "soc": ["verilator/*"],
    "firmware": ["**/*"],
    "renode": ["**/*"],
}

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the ``numavia`` package
_CHECKOUT = PACKAGE_DIR.parents[1]
#: The source checkout the package runs from (``make setup``'s editable install), or None when
#: it is installed from a wheel.
REPO_ROOT = _CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() else None
_SITE = PACKAGE_DIR.parent


def source_dir(folder):
    """The source tree's ``folder`` (a key of ``LAYOUT``), in the checkout or the installed package."""
    return REPO_ROOT / folder if REPO_ROOT else _SITE / LAYOUT[folder]


def firmware_dir():
    """``firmware/``: the firmware core, the bare-metal build and the Zephyr module and application."""
    return source_dir("firmware")


def renode_dir():
    """``renode/``: the ring-link connector (C#) and the card's co-simulation CMake project."""
    return source_dir("renode")


def verilator_dir():
    """``soc/verilator/``: the C++ harness of the Verilator ring simulator."""
    return source_dir("soc") / "verilator"


def microcode_source():
    """The SCI protocol's microcode source."""
    return source_dir("host/numavia") / "base" / "microcode" / "sci.uasm"


def resources():
    """Every folder and file the functions above return (what an installed package must hold)."""
    return [firmware_dir(), renode_dir(), verilator_dir(), microcode_source()]


def source_name(path):
    """A file's name independent of where things are installed, for build-cache keys.

    Numavia's own files are named by their place in the source tree (``gateware/card.py``) whether
    they come from the checkout or an installed package; files of other installed distributions
    relative to their site-packages (``pythondata_cpu_vexriscv/verilog/...``); other files of the
    checkout relative to it. None for anything else.
    """
    path = Path(path).resolve()
    for folder, installed in sorted(LAYOUT.items(), key=lambda item: -len(item[1])):
        root = REPO_ROOT / folder if REPO_ROOT else _SITE / installed
        if path.is_relative_to(root):
            return str(Path(folder) / path.relative_to(root))
    if "site-packages" in path.parts:
        last = len(path.parts) - 1 - path.parts[::-1].index("site-packages")
        return str(Path(*path.parts[last + 1 :]))
    if REPO_ROOT and path.is_relative_to(REPO_ROOT):
        return str(path.relative_to(REPO_ROOT))
    return None
