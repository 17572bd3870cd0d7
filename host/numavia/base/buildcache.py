"""Build outputs cached under ``build/`` in folders named after a hash of their inputs.

Generated Verilog, Verilator models and firmware images are slow to make on two cores; anything
whose inputs (source files, parameters, tool versions) did not change is reused. Concurrent
builders (pytest-xdist workers) take a lock per entry, so each entry is built once.
"""

import ast
import fcntl
import hashlib
import json
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from numavia.base.errors import NumaviaError
from numavia.base.paths import REPO_ROOT, source_name


def build_root():
    env = os.environ.get("NUMAVIA_BUILD_DIR")
    if env:
        return Path(env).resolve()
    if REPO_ROOT:
        return REPO_ROOT / "build"
    return Path.cwd() / "build"


def source_files(directory, patterns=("*.py",)):
    """Every file matching ``patterns`` under ``directory``, sorted, caches excluded."""
    directory = Path(directory)
    files = set()
    for pattern in patterns:
        files.update(p for p in directory.rglob(pattern) if "__pycache__" not in p.parts)
    return sorted(files)


def imported_sources(files, package_dir, package, data_patterns=()):
    """The modules of ``package`` (its folder ``package_dir``) that ``files`` import, directly or
    through one another, each with the ``__init__.py`` of its packages and the files matching
    ``data_patterns`` beside them (what they may read), sorted.

    Read from the import statements, not from what a process happens to have imported, so that a
    key made of them is the same in every process: the card's Verilog depends on the definitions
    its gateware imports, not on every module of the base layer (push-pull's format, say).
    """
    package_dir = Path(package_dir)
    depth = len(package.split("."))
    found, todo = set(), [Path(f) for f in files]

    def module_files(dotted):  # a.b.c -> a/b/__init__.py, a/b/c.py or a/b/c/__init__.py, those that exist
        parts = dotted.split(".")[depth:]
        paths, at = [package_dir / "__init__.py"], package_dir
        for part in parts[:-1]:
            at = at / part
            paths.append(at / "__init__.py")
        if parts:
            paths += [(at / parts[-1]).with_suffix(".py"), at / parts[-1] / "__init__.py"]
        return [p for p in paths if p.is_file()]

    def absolute(node, path):  # an ImportFrom's module, relative ones resolved inside the package
        if not node.level:
            return node.module or ""
        if not path.resolve().is_relative_to(package_dir.resolve()):
            return ""  # another package's relative import: not ours
        parts = package.split(".") + list(path.resolve().parent.relative_to(package_dir.resolve()).parts)
        parts = parts[: len(parts) - node.level + 1]
        return ".".join(parts + ([node.module] if node.module else []))

    while todo:
        path = todo.pop()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = absolute(node, path)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                if name == package or name.startswith(package + "."):
                    for dependency in module_files(name):
                        if dependency not in found:
                            found.add(dependency)
                            todo.append(dependency)
    for folder in {p.parent for p in found}:
        for pattern in data_patterns:
            found.update(folder.glob(pattern))
    return sorted(found)


def digest(files=(), params=None, length=16):
    """Hash of the files' names and contents and a JSON-able parameter set.

    Names do not depend on where things are: sources by their place in the source tree (the
    checkout and an installed package give the same key), build outputs by their bare name (their
    folders are named by keys already).
    """
    h = hashlib.sha256()
    root = build_root()
    named = []
    for f in map(Path, files):
        name = None if f.resolve().is_relative_to(root) else source_name(f)
        named.append((Path(name or f.name), f.read_bytes()))
    for name, data in sorted(named):
        h.update(str(name).encode() + b"\0" + data + b"\0")
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()[:length]


class SourcesAsLoaded:
    """Python sources whose code this process has imported, as a cache key's input.

    A key is computed from the files on disk, but the output is made from the modules in memory:
    a long process that imported them before an edit would store the old code's output under the
    new code's key, and every later build would reuse it. So the files' digest is taken when the
    modules are loaded, and :meth:`files` refuses to name a cache entry once the files differ.
    """

    def __init__(self, list_files, what):
        self._list_files = list_files
        self._what = what
        self._loaded = digest(list_files())

    def files(self):
        """The files, unchanged since they were loaded (else :class:`NumaviaError`)."""
        files = self._list_files()
        if digest(files) != self._loaded:
            raise NumaviaError(
                f"the {self._what} sources changed since this process loaded them: "
                "restart it, so that what it builds matches its cache key"
            )
        return files


@contextmanager
def _locked(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def cached(kind, key, produce, *, log=None):
    """Return ``build/<kind>/<key>``, calling ``produce(folder)`` first if it is not complete yet.

    ``produce`` writes into a temporary folder that is renamed into place only when it returns,
    so an interrupted build never leaves a half-made entry behind.
    """
    root = build_root() / kind
    final = root / key
    stamp = final / ".complete"
    if stamp.exists():
        return final
    with _locked(root / f".{key}.lock"):
        if stamp.exists():
            return final
        tmp = root / f".{key}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        tmp.mkdir(parents=True)
        if log:
            log(f"building {kind}/{key}")
        started = time.monotonic()
        produce(tmp)
        tmp.rename(final)
        stamp.write_text(json.dumps({"seconds": round(time.monotonic() - started, 1)}))
    return final


def build_seconds(folder):
    """How long the entry ``folder`` took to build (None if unknown)."""
    try:
        return json.loads((Path(folder) / ".complete").read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return None
