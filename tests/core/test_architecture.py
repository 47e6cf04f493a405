"""The layering ARCHITECTURE.md promises, read from ARCHITECTURE.md itself: imports point down
its table of layers (lazy imports too), what each layer "never imports" agrees with that
order, modules import each other without cycles, imports are absolute, torch is imported only
where the document says, and every installed package is a documented layer.

The one layering test of the project (``db/`` is checked by the same rules as every layer)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest
from testpaths import ROOT

DOC = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
_ROW = re.compile(r"^\| `(\w+)/` \| (.*) \| (.*) \|$", re.M)
# Lowest first: a package may import the ones before it, never one after it.
LAYERS = [m.group(1) for m in _ROW.finditer(DOC)]
# "torch is imported only by tracers/ and what runs inside the sandbox": the tracers, and the
# workaround verifier, whose checks run in a sandboxed child (contrib/verify.py).
TORCH_ALLOWED = ("tracers/", "contrib/verify.py", "contrib/verify_edges.py")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["opcheck", *parts])


def imports(root: Path, path: Path) -> list[tuple[str, int]]:
    """(opcheck module or package, line) of every import in a file, lazy ones too. A relative
    import is refused: the layering is read from absolute names."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path.relative_to(root)}:{node.lineno}: relative import; "
                                 "write opcheck.…")
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(n, node.lineno) for n in names if n == "opcheck" or n.startswith(("opcheck.",
                                                                                   "torch"))]
    return found


def layer_files(root: Path, layers: list[str]) -> list[Path]:
    return [p for layer in layers for p in sorted((root / layer).rglob("*.py"))]


def upward_imports(root: Path, layers: list[str]) -> list[str]:
    """``file:line imports opcheck.x`` for each import of a layer above the file's own."""
    bad = []
    for path in layer_files(root, layers):
        own = path.relative_to(root).parts[0]
        allowed = set(layers[: layers.index(own) + 1])
        for name, line in imports(root, path):
            parts = name.split(".")
            if parts[0] == "opcheck" and len(parts) > 1 and parts[1] in layers \
                    and parts[1] not in allowed:
                bad.append(f"{path.relative_to(root)}:{line} imports opcheck.{parts[1]}")
    return list(dict.fromkeys(bad))  # `from opcheck.x import y` names x and x.y: one line


def import_cycles(root: Path, layers: list[str]) -> list[list[str]]:
    """Cycles among the modules of the layers (lazy imports included)."""
    graph = {module_name(root, p): {n for n, _ in imports(root, p)}
             for p in layer_files(root, layers)}
    graph = {m: {n for n in deps if n in graph and n != m} for m, deps in graph.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for dep in sorted(graph[m]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep):], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_architecture_md_lists_the_layers() -> None:
    assert LAYERS[0] == "core" and LAYERS[-1] == "cli" and len(LAYERS) == len(set(LAYERS)) >= 5


@functools.cache
def _upward_in_tree() -> tuple[str, ...]:
    return tuple(upward_imports(ROOT, LAYERS))


@pytest.mark.parametrize("package", LAYERS)
def test_imports_point_down(package: str) -> None:
    upward = [line for line in _upward_in_tree() if line.startswith(f"{package}/")]
    assert not upward, "\n".join(upward)


def test_what_a_layer_never_imports_is_what_lies_above_it() -> None:
    """The table's "never imports" column says the same as its order (``…`` ends a list with
    the rest; ``anything else of opcheck`` is every other layer)."""
    for m in _ROW.finditer(DOC):
        layer, never = m.group(1), m.group(3).strip()
        above = LAYERS[LAYERS.index(layer) + 1:]
        if never == "anything else of opcheck":
            assert layer == LAYERS[0]
            continue
        if never == "—":
            assert not above, layer
            continue
        named = [w.strip() for w in never.split(",") if w.strip() not in ("…", "...")]
        assert set(named) <= set(above), f"{layer}: {set(named) - set(above)} are below it"
        if not never.rstrip().endswith(("…", "...")):
            assert set(named) == set(above), f"{layer}: the list misses {set(above) - set(named)}"


def test_modules_import_each_other_without_cycles() -> None:
    assert import_cycles(ROOT, LAYERS) == []


def test_torch_is_imported_only_by_the_tracers_and_the_sandboxed_verifier() -> None:
    assert "torch is imported only by `tracers/`" in DOC
    outside = [f"{p.relative_to(ROOT)}:{line}" for p in layer_files(ROOT, LAYERS)
               for name, line in imports(ROOT, p)
               if name.split(".")[0] == "torch"
               and not str(p.relative_to(ROOT)).startswith(TORCH_ALLOWED)]
    assert outside == []


def test_the_rules_catch_an_upward_import_a_cycle_and_a_relative_import(tmp_path: Path) -> None:
    for layer in ("core", "db", "checker"):
        (tmp_path / layer).mkdir()
    (tmp_path / "core" / "a.py").write_text("import os\n")
    (tmp_path / "db" / "store.py").write_text(
        "def f():\n    from opcheck.contrib.workarounds import attach\n")
    (tmp_path / "checker" / "x.py").write_text("from opcheck.checker import y\n")
    (tmp_path / "checker" / "y.py").write_text("def g():\n    import opcheck.checker.x\n")
    layers = ["core", "db", "checker", "contrib"]
    assert upward_imports(tmp_path, layers) == ["db/store.py:2 imports opcheck.contrib"]
    (tmp_path / "db" / "low.py").write_text("from opcheck.checker.x import g\n")
    assert "db/low.py:1 imports opcheck.checker" in upward_imports(tmp_path, layers)
    assert import_cycles(tmp_path, layers) == [
        ["opcheck.checker.x", "opcheck.checker.y", "opcheck.checker.x"]]
    (tmp_path / "core" / "rel.py").write_text("from . import a\n")
    with pytest.raises(AssertionError, match="relative import"):
        upward_imports(tmp_path, layers)


def test_every_installed_package_is_a_documented_layer() -> None:
    # tomllib is 3.11+; the project supports 3.10, and this one list is easy to read as text.
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^packages = \[(.*?)\]", config, re.M | re.S)
    assert block is not None
    installed = {p.split(".")[1] for p in re.findall(r'"(opcheck\.\w+)', block.group(1))}
    assert installed - {"data"} == set(LAYERS)
    # every folder of the repository that holds installed files is declared (setuptools warns
    # about, and leaves out, a folder it is not told about)
    declared = {p.removeprefix("opcheck").lstrip(".").replace(".", "/")
                for p in re.findall(r'"(opcheck(?:\.\w+)*)"', block.group(1))}
    for top in [*LAYERS, "data"]:
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and any(
                    f.is_file() for f in folder.iterdir()):
                assert str(folder.relative_to(ROOT)) in declared, folder


def test_the_package_root_maps_to_the_repository_root() -> None:
    import opcheck
    import opcheck.checker.resolve

    assert opcheck.__file__ is not None and opcheck.checker.resolve.__file__ is not None
    assert (ROOT / "__init__.py").samefile(opcheck.__file__)
    assert (ROOT / "checker" / "resolve.py").samefile(opcheck.checker.resolve.__file__)


def test_tests_and_benchmarks_are_not_installed() -> None:
    import importlib

    for name in ("opcheck.tests", "opcheck.benchmarks"):
        with pytest.raises(ImportError):
            importlib.import_module(name)
