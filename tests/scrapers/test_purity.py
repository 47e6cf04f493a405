"""Scrapers are pure text → rows: no module under scrapers/ may reach the fetch layer or above."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from testpaths import ROOT

FORBIDDEN = ("sync", "db", "checker", "web", "cli", "tracers", "contrib", "env")


def _opcheck_imports(path: Path) -> list[tuple[str, int]]:
    """(module, line) of every opcheck import in a file, lazy (in-function) ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the scrapers package
                base = "opcheck.scrapers" if node.level == 1 else "opcheck"
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names = [module] + ([f"opcheck.{a.name}" for a in node.names]
                                if module == "opcheck" else [])
            found += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
    return [(m, line) for m, line in found if m == "opcheck" or m.startswith("opcheck.")]


def _forbidden(path: Path) -> list[str]:
    """``line: module`` of each import of a layer above the scrapers."""
    return [f"{line}: {module}" for module, line in _opcheck_imports(path)
            if len(module.split(".")) > 1 and module.split(".")[1] in FORBIDDEN]


@pytest.mark.parametrize("path", sorted((ROOT / "scrapers").rglob("*.py")),
                         ids=lambda p: p.name)
def test_scraper_imports_nothing_above_it(path: Path) -> None:
    assert _forbidden(path) == [], f"scrapers/{path.name} must stay pure text → rows"


def test_the_check_sees_top_level_lazy_and_relative_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from opcheck.sync.sources import Source\n"
        "def f():\n    import opcheck.db.data\n"
        "from opcheck import cli\n"
        "from ..tracers import api\n"
        "from opcheck.core.errors import ScrapeError\n"
        "from .rows import Origin\n",
        encoding="utf-8",
    )
    assert sorted(_forbidden(probe)) == sorted(
        ["1: opcheck.sync.sources", "3: opcheck.db.data", "4: opcheck.cli", "5: opcheck.tracers"]
    )
