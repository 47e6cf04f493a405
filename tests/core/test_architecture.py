"""The layering ARCHITECTURE.md promises: imports point one way, every package is documented."""

from __future__ import annotations

import ast
import re

import pytest
from testpaths import ROOT

# Lowest first: a package may import the ones before it, never one after it.
LAYERS = ["core", "scrapers", "db", "sync", "tracers", "checker", "contrib", "env", "web", "cli"]


def _imports(package: str) -> list[tuple[str, str, int]]:
    """(imported opcheck package, file, line) for every import in a package, lazy ones too."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "opcheck":
                    names = [f"opcheck.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "opcheck" and len(parts) > 1 and parts[1] in LAYERS:
                    found.append((parts[1], str(path.relative_to(ROOT)), node.lineno))
    return found


@pytest.mark.parametrize("package", LAYERS)
def test_imports_point_down(package: str) -> None:
    allowed = set(LAYERS[: LAYERS.index(package) + 1])
    upward = [f"{f}:{line} imports opcheck.{target}"
              for target, f, line in _imports(package) if target not in allowed]
    assert not upward, "\n".join(upward)


def test_every_installed_package_is_a_documented_layer() -> None:
    # tomllib is 3.11+; the project supports 3.10, and this one list is easy to read as text.
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^packages = \[(.*?)\]", config, re.M | re.S)
    assert block is not None
    installed = {p.split(".")[1] for p in re.findall(r'"(opcheck\.\w+)"', block.group(1))}
    assert installed - {"data"} == set(LAYERS)
    doc = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)/` \|", doc, re.M))
    assert documented == set(LAYERS)
    order = re.findall(r"^\| `(\w+)/` \|", doc, re.M)
    assert order == LAYERS, "ARCHITECTURE.md lists the layers in import order"


def test_the_package_root_maps_to_the_repository_root() -> None:
    import opcheck
    import opcheck.checker.resolve

    assert opcheck.__file__ is not None and opcheck.checker.resolve.__file__ is not None
    assert (ROOT / "__init__.py").samefile(opcheck.__file__)
    assert (ROOT / "checker" / "resolve.py").samefile(opcheck.checker.resolve.__file__)
