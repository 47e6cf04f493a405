"""Storage sits low in the layering: db/ imports only core/ and itself, with no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

from testpaths import ROOT

DB = ROOT / "db"
# What db/ may import from opcheck: the layer below it and itself.
ALLOWED = {"core", "db"}


def opcheck_imports(path: Path) -> set[str]:
    """Every ``opcheck.*`` module a file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "opcheck"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "opcheck":
                found |= {f"opcheck.{a.name}" for a in node.names}
            elif node.module.startswith("opcheck."):
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path.name}:{node.lineno}: relative import; write opcheck.…")
    return found


def db_graph() -> dict[str, set[str]]:
    return {p.stem: opcheck_imports(p) for p in sorted(DB.glob("*.py"))}


def test_db_imports_nothing_above_it() -> None:
    above = {
        f"db/{name}.py imports {mod}"
        for name, mods in db_graph().items() for mod in mods
        if mod.split(".")[1] not in ALLOWED
    }
    assert above == set()


def test_db_modules_import_each_other_without_cycles() -> None:
    graph = {
        name: {m.split(".")[2] for m in mods if m.startswith("opcheck.db.") and m.count(".") >= 2}
        for name, mods in db_graph().items()
    }
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for dep in sorted(graph.get(name, ())):
            visit(dep, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_the_checker_catches_a_higher_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from opcheck.contrib.workarounds import attach\n")
    assert opcheck_imports(bad) == {"opcheck.contrib.workarounds"}
