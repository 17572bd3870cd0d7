"""The build cache's keys (``numavia.base.buildcache``): entries named by their inputs, and the
guard that keeps a process from naming an entry after sources it did not load."""

import pytest

from numavia.base import buildcache
from numavia.base.errors import NumaviaError
from numavia.gateware import build as gateware_build


@pytest.fixture
def module_files(tmp_path):
    files = [tmp_path / "a.py", tmp_path / "b.py"]
    for f in files:
        f.write_text(f"# {f.name}\n")
    return files


def test_unchanged_sources_are_handed_out(module_files):
    loaded = buildcache.SourcesAsLoaded(lambda: list(module_files), "test")
    assert loaded.files() == module_files


def test_a_source_edited_after_loading_names_no_cache_entry(module_files):
    loaded = buildcache.SourcesAsLoaded(lambda: list(module_files), "test")
    module_files[1].write_text("# b.py, edited\n")
    with pytest.raises(NumaviaError, match="test sources changed since this process loaded them: restart"):
        loaded.files()


def test_a_source_added_after_loading_names_no_cache_entry(module_files, tmp_path):
    listing = list(module_files)
    loaded = buildcache.SourcesAsLoaded(lambda: list(listing), "test")
    listing.append(tmp_path / "c.py")
    listing[-1].write_text("# new\n")
    with pytest.raises(NumaviaError, match="changed since"):
        loaded.files()


def test_the_cards_sources_are_those_on_disk_in_an_unedited_tree():
    files = gateware_build.sources()
    assert any(f.name == "sequencer.py" for f in files) and any(f.suffix == ".uasm" for f in files)
    assert buildcache.digest(files) == buildcache.digest(gateware_build._source_files())


def test_the_cards_sources_are_the_base_modules_its_gateware_imports():
    names = {f.relative_to(gateware_build.BASE_DIR).as_posix() for f in gateware_build.sources() if "base" in f.parts}
    # via_att imports bytestruct; the microcode package brings its __init__ and its .uasm.
    assert {"via_att.py", "bytestruct.py", "microcode/__init__.py", "microcode/isa.py", "microcode/sci.uasm"} <= names
    # Definitions only the firmware, the host or the build use are not the card's.
    assert not {"pushpull_format.py", "codegen.py", "trace.py", "microcode/assembler.py"} & names


def test_imported_sources_follow_absolute_relative_and_package_imports(tmp_path):
    pkg = tmp_path / "lib"
    (pkg / "sub").mkdir(parents=True)
    for name, text in {
        "__init__.py": "",
        "a.py": "from lib import b\n",
        "b.py": "from .sub import c\n",
        "unused.py": "",
        "sub/__init__.py": "",
        "sub/c.py": "from ..d import X\n",
        "sub/table.dat": "data",
        "d.py": "X = 1\n",
    }.items():
        (pkg / name).write_text(text)
    user = tmp_path / "user.py"
    user.write_text("import os\nfrom lib.a import thing\nfrom .local import y\n")
    files = buildcache.imported_sources([user], pkg, "lib", ("*.dat",))
    assert {f.relative_to(pkg).as_posix() for f in files} == {
        "__init__.py",
        "a.py",
        "b.py",
        "sub/__init__.py",
        "sub/c.py",
        "sub/table.dat",
        "d.py",
    }


def test_cached_builds_an_entry_once_and_never_leaves_a_half_made_one(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMAVIA_BUILD_DIR", str(tmp_path))
    calls = []

    def produce(folder):
        calls.append(folder)
        (folder / "out").write_text("made")

    first = buildcache.cached("kind", "key1", produce)
    assert buildcache.cached("kind", "key1", produce) == first
    assert len(calls) == 1 and (first / "out").read_text() == "made"

    def fails(folder):
        (folder / "out").write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        buildcache.cached("kind", "key2", fails)
    assert not (tmp_path / "kind" / "key2").exists()
    assert buildcache.cached("kind", "key2", produce).joinpath("out").read_text() == "made"
