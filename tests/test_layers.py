"""The package's import graph, read from the sources (nothing is imported): every module imports
only from its own layer or a lower one (base < gateware < soc/boards < host tools), imports sit at
module top (not in a function or class body), and no two modules import each other in a cycle."""

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from numavia.base.paths import LAYOUT

REPO = Path(__file__).resolve().parent.parent

# Imports allowed inside a function or class body, as (file, imported module): reason.
FUNCTION_IMPORT_ALLOWED: dict[tuple[str, str], str] = {
    (
        "host/numavia/cli/bench.py",
        "numavia.bench.pcie",
    ): "needs cocotbext-pcie, an optional extra: every other command must work without it",
}

LAYERS = ("base", "gateware", "soc/boards", "host tools")


def layer_of(module: str) -> int:
    """The layer index of a `numavia` module (0 = base ... 3 = host tools)."""
    for prefix, layer in (("numavia.base", 0), ("numavia.gateware", 1), ("numavia.soc", 2), ("numavia.boards", 2)):
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return 3


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported `numavia` module (the longest known prefix)
    where: str  # file:line
    nested: bool  # inside a function or class body
    on_import: bool  # runs on import (not under `if TYPE_CHECKING:` or `if __name__ == "__main__":`)


def package_modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every folder the package layout maps into `numavia`."""
    modules = {}
    for folder, installed in LAYOUT.items():
        package = installed.replace("/", ".")
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules.setdefault(".".join((package,) + parts), path)
    return modules


def _skipped_on_import(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` (read by type checkers only) or `if __name__ == "__main__":` (a
    script's entry point): the body does not run when the module is imported."""
    if isinstance(test, (ast.Name, ast.Attribute)):
        return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _import_statements(tree: ast.Module):
    """(node, nested, on_import) for every import statement in a module."""

    def walk(node, nested, on_import):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, nested, on_import
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            if isinstance(child, ast.If) and _skipped_on_import(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), inner, False)
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), inner, on_import)
            else:
                yield from walk(child, inner, on_import)

    yield from walk(tree, False, True)


def _known(name: str, modules) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(module: str, path: Path, modules, root: Path) -> list[Import]:
    """The `numavia` modules one source file imports, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node, nested, on_import in _import_statements(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import name` loads pkg.name when that is a module, else just pkg
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        where = f"{path.relative_to(root)}:{node.lineno}"
        for name in dict.fromkeys(names):
            target = _known(name, modules)
            if target is not None and target != module:
                found.append(Import(module, target, where, nested, on_import))
            elif target is None and nested:
                found.append(Import(module, name, where, nested, on_import))
    return found


def import_graph(root: Path) -> list[Import]:
    modules = package_modules(root)
    return [imp for module, path in modules.items() for imp in module_imports(module, path, modules, root)]


def upward_imports(imports: list[Import]) -> list[str]:
    return [
        f"{imp.where}: {imp.source} ({LAYERS[layer_of(imp.source)]}) imports {imp.target} "
        f"({LAYERS[layer_of(imp.target)]})"
        for imp in imports
        if imp.target.startswith("numavia") and layer_of(imp.target) > layer_of(imp.source)
    ]


def nested_imports(imports: list[Import]) -> list[str]:
    return [
        f"{imp.where}: {imp.source} imports {imp.target} inside a function or class"
        for imp in imports
        if imp.nested and imp.on_import and (imp.where.rpartition(":")[0], imp.target) not in FUNCTION_IMPORT_ALLOWED
    ]


def import_cycles(imports: list[Import]) -> list[list[Import]]:
    """One cycle (as its chain of imports) per strongly connected group of modules."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        if imp.on_import and imp.target.startswith("numavia"):
            edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def connect(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in edges.get(node, {}):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return [_cycle_in(sorted(group)[0], group, edges) for group in groups]


def _cycle_in(start: str, group: set[str], edges) -> list[Import]:
    """The shortest chain of imports from `start` back to itself inside `group`."""
    paths = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ, imp in sorted(edges.get(node, {}).items()):
                if succ == start:
                    return paths[node] + [imp]
                if succ in group and succ not in paths:
                    paths[succ] = paths[node] + [imp]
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def describe_cycle(cycle: list[Import]) -> str:
    return " -> ".join([cycle[0].source] + [f"{imp.target} ({imp.where})" for imp in cycle])


def subpackage_cycles(imports: list[Import]) -> list[str]:
    """soc and boards share a layer; they may use each other in one direction only."""
    directions = {
        (imp.source.split(".")[1], imp.target.split(".")[1]): imp.where
        for imp in imports
        if imp.on_import and layer_of(imp.source) == 2 and layer_of(imp.target) == 2
    }
    soc_boards, boards_soc = directions.get(("soc", "boards")), directions.get(("boards", "soc"))
    if soc_boards and boards_soc:
        return [f"soc imports boards ({soc_boards}) and boards imports soc ({boards_soc})"]
    return []


@pytest.fixture(scope="module")
def imports():
    return import_graph(REPO)


def test_every_mapped_folder_holds_modules():
    modules = package_modules(REPO)
    for package in (
        "numavia.base",
        "numavia.gateware",
        "numavia.soc",
        "numavia.boards",
        "numavia.base.errors",
        "numavia.gateware.card",
        "numavia.session",
    ):
        assert package in modules


def test_no_import_from_a_higher_layer(imports):
    assert upward_imports(imports) == []


def test_imports_at_module_top(imports):
    assert nested_imports(imports) == []


def test_no_import_cycle(imports):
    assert [describe_cycle(cycle) for cycle in import_cycles(imports)] == []


def test_soc_and_boards_do_not_import_each_other(imports):
    assert subpackage_cycles(imports) == []


def test_allow_list_entries_still_needed(imports):
    nested = {(imp.where.rpartition(":")[0], imp.target) for imp in imports if imp.nested}
    assert [entry for entry in FUNCTION_IMPORT_ALLOWED if entry not in nested] == []


# The checker itself, on a small made-up package laid out like the real one.


def _fake_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"numavia" = "host/numavia"\n"numavia.gateware" = "gateware"\n'
    )
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    for folder in ("host/numavia", "host/numavia/base", "gateware"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").touch()
    return tmp_path


def test_checker_finds_upward_relative_import(tmp_path):
    root = _fake_repo(
        tmp_path,
        {
            "host/numavia/session.py": "",
            "host/numavia/base/errors.py": "from ..session import x\n",
        },
    )
    assert upward_imports(import_graph(root)) == [
        "host/numavia/base/errors.py:1: numavia.base.errors (base) imports numavia.session (host tools)"
    ]


def test_checker_finds_nested_import_but_not_type_checking(tmp_path):
    root = _fake_repo(
        tmp_path,
        {
            "gateware/card.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import ring\n"
                "def build():\n    import json\n"
            ),
            "gateware/ring.py": "",
        },
    )
    assert nested_imports(import_graph(root)) == [
        "gateware/card.py:5: numavia.gateware.card imports json inside a function or class"
    ]


def test_checker_reports_a_cycle_through_from_import(tmp_path):
    root = _fake_repo(
        tmp_path,
        {
            "gateware/a.py": "from numavia.gateware import b\n",
            "gateware/b.py": "import numavia.gateware.c\n",
            "gateware/c.py": "from .a import thing\n",
        },
    )
    assert [describe_cycle(cycle) for cycle in import_cycles(import_graph(root))] == [
        "numavia.gateware.a -> numavia.gateware.b (gateware/a.py:1) -> "
        "numavia.gateware.c (gateware/b.py:1) -> numavia.gateware.a (gateware/c.py:1)"
    ]
