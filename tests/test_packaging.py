"""The wheel (setup.py, numavia.base.paths): it holds every package and every file the tools read,
and installed in a fresh virtual environment it runs and computes the checkout's cache keys.

The wheel is built from a copy of the checkout's files (tracked, or new and not ignored), so
nothing lying around in the worktree can stand in for a file the build leaves out. The fresh
environment has no system site-packages and gets numavia only from the wheel; the dependencies
come from this environment's site-packages, appended to its path by a .pth line (whose own .pth
files, the editable install's among them, Python does not run there). Building and installing
the wheel takes 8 s on an idle machine (pip fetches setuptools for the isolated build from its cache).
"""

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from numavia.base import buildcache, paths
from numavia.base.paths import REPO_ROOT

#: Computes the cache keys of the main build stages from wherever numavia is imported.
KEYS_SCRIPT = """
import json, numavia
from numavia.base import buildcache, paths
from numavia.boards import flow
from numavia.gateware import build as gateware_build
from numavia.soc import firmware, sim, simulator_build
print(json.dumps({"package": numavia.__file__, "repo": str(paths.REPO_ROOT), "keys": {
    "card": buildcache.digest(gateware_build.sources()),
    "soc": sim.soc_key(sim.SimConfig()),
    "firmware": buildcache.digest(firmware.bare_metal_sources()),
    "simulator": buildcache.digest(simulator_build.harness_sources()),
    "board": buildcache.digest(flow._inputs())}}))
"""


def run(cmd, **kwargs):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{cmd[:3]} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory):
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT)
    copy = tmp_path_factory.mktemp("source")
    for name in filter(None, listed.split("\0")):
        if (REPO_ROOT / name).is_file():  # a file deleted but not yet committed is listed too
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, copy / name)
    return copy


@pytest.fixture(scope="module")
def wheel(source_copy, tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", out, source_copy])
    (found,) = out.glob("numavia-*.whl")
    return found


@pytest.fixture(scope="module")
def wheel_names(wheel):
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh virtual environment with the wheel installed and this one's packages as dependencies."""
    folder = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", folder])
    python = folder / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel])
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder


def installed_name(source_file, root):
    """Where the source tree's file ``root/...`` is in the wheel."""
    relative = Path(source_file).relative_to(root)
    folder = next(f for f in paths.LAYOUT if relative.is_relative_to(f))
    return str(Path(paths.LAYOUT[folder]) / relative.relative_to(folder))


def files_under(path):
    """The files under ``path`` the tools read; dot files (editor and formatter settings) are not."""
    return (
        [path]
        if path.is_file()
        else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")]
    )


def test_the_wheel_holds_every_python_module_of_every_package_folder(source_copy, wheel_names):
    modules = [f for folder in paths.LAYOUT for f in (source_copy / folder).rglob("*.py")]
    assert len(modules) > 100
    missing = [installed_name(f, source_copy) for f in modules if installed_name(f, source_copy) not in wheel_names]
    assert not missing
    for package in ("numavia/base", "numavia/base/microcode", "numavia/gateware/pcie", "numavia/kernels"):
        assert f"{package}/__init__.py" in wheel_names


def test_the_wheel_holds_every_resource_paths_can_return(source_copy, wheel_names):
    resources = [source_copy / p.relative_to(REPO_ROOT) for p in paths.resources()]
    files = [f for r in resources for f in files_under(r)]
    assert any(f.name == "node_main.cpp" for f in files) and any(f.name == "sci.uasm" for f in files)
    missing = [installed_name(f, source_copy) for f in files if installed_name(f, source_copy) not in wheel_names]
    assert not missing


def test_the_installed_command_runs_from_the_wheel(venv, tmp_path):
    out = run([venv / "bin" / "numavia", "--help"], cwd=tmp_path)
    assert out.startswith("usage: numavia")
    version = run([venv / "bin" / "numavia", "--version"], cwd=tmp_path)
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert version.split()[-1] == project["version"]  # read from the installed wheel's metadata


def test_every_module_imports_from_the_install(venv, wheel_names, tmp_path):
    # A package's __main__ runs the program when imported: it is checked by running `numavia --help`.
    modules = sorted(
        n[:-3].replace("/", ".").removesuffix(".__init__")
        for n in wheel_names
        if n.endswith(".py") and not n.endswith("/__main__.py")
    )
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps({m: getattr(sys.modules[m], '__file__', None) for m in "
        f"{modules!r}"
        "}))"
    )
    files = json.loads(run([venv / "bin" / "python", "-c", script], cwd=tmp_path))
    site = venv.resolve()
    assert all(Path(f).resolve().is_relative_to(site) for f in files.values()), "a module came from elsewhere"


def test_the_install_finds_its_resources_and_makes_the_checkouts_cache_keys(venv, tmp_path):
    installed = json.loads(run([venv / "bin" / "python", "-c", KEYS_SCRIPT], cwd=tmp_path))
    checkout = json.loads(run([sys.executable, "-c", KEYS_SCRIPT], cwd=tmp_path))
    assert installed["repo"] == "None" and Path(installed["package"]).resolve().is_relative_to(venv.resolve())
    assert checkout["repo"] == str(REPO_ROOT)
    assert installed["keys"] == checkout["keys"]


def test_cache_keys_name_sources_by_their_place_in_the_source_tree(tmp_path):
    card = REPO_ROOT / "gateware" / "card.py"
    assert paths.source_name(card) == "gateware/card.py"
    assert paths.source_name(paths.microcode_source()) == "host/numavia/base/microcode/sci.uasm"
    # Another distribution's file is named from its site-packages, wherever that is.
    other = tmp_path / "lib" / "python3.11" / "site-packages" / "pkg" / "core.v"
    other.parent.mkdir(parents=True)
    other.write_text("module core; endmodule\n")
    assert paths.source_name(other) == "pkg/core.v"
    assert paths.source_name(tmp_path) is None


def test_build_outputs_are_named_by_their_bare_name(tmp_path, monkeypatch):
    """Where the build folder is does not change the keys made from its files."""
    keys = []
    for root in (tmp_path / "one", tmp_path / "two"):
        monkeypatch.setenv("NUMAVIA_BUILD_DIR", str(root))
        verilog = root / "soc" / "abc" / "numavia_node.v"
        verilog.parent.mkdir(parents=True)
        verilog.write_text("module numavia_node; endmodule\n")
        keys.append(buildcache.digest([verilog]))
    assert keys[0] == keys[1]
    verilog.write_text("module numavia_node(input a); endmodule\n")
    assert buildcache.digest([verilog]) != keys[1]
