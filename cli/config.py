"""``[tool.opcheck]`` in ``pyproject.toml``: a project's own defaults for ``check`` and ``run``.

Found as ruff finds its settings: the nearest ``pyproject.toml`` above the working directory
that has a ``[tool.opcheck]`` table (one without it is passed over). Keys are the options'
long names without dashes in front (``torch-npu``, ``hardware``, ``fail-on``, ``baseline``,
...); an option given on the command line wins. A path (``baseline``) is read relative to the
file. An unknown key or a value of the wrong type is a usage error naming the file.

    [tool.opcheck]
    torch-npu = "2.6"
    hardware = "910B"
    fail-on = "fallback"
    baseline = "opcheck-baseline.json"
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opcheck.core.errors import UsageError

# key → (the commands' parameter name, its type); paths are made absolute from the file
KEYS: dict[str, tuple[str, type]] = {
    "torch-npu": ("torch_npu", str),
    "cann": ("cann", str),
    "torch": ("torch", str),
    "hardware": ("hardware", str),
    "jit-compile": ("jit_compile", str),
    "internal-format": ("internal_format", str),
    "fail-on": ("fail_on", str),
    "baseline": ("baseline", Path),
    "format": ("fmt", str),
    "all-releases": ("all_releases", bool),
    "graph": ("graph", bool),
    "allow-incomplete": ("allow_incomplete", bool),
}
COMMANDS = ("check", "run")  # the commands that take the target and report options
NO_CONFIG_ENV = "OPCHECK_NO_CONFIG"  # set: read no project file (tests, one-off runs)


@dataclass(frozen=True)
class ProjectConfig:
    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)  # parameter name → value

    def default_map(self) -> dict[str, dict[str, Any]]:
        """Click's ``default_map``: the values as the commands' defaults."""
        return {cmd: dict(self.values) for cmd in COMMANDS} if self.values else {}


def _load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None


def find(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.opcheck]`` table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                doc = _load_toml(candidate)
            except OSError:
                continue
            except UsageError:
                # a broken file is another tool's to refuse, unless it holds our table
                if "[tool.opcheck" in candidate.read_text(encoding="utf-8", errors="replace"):
                    raise
                continue
            if isinstance(doc.get("tool"), dict) and "opcheck" in doc["tool"]:
                return candidate
    return None


def parse(path: Path) -> ProjectConfig:
    """The ``[tool.opcheck]`` table of ``path``, checked key by key."""
    table = _load_toml(path).get("tool", {}).get("opcheck", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.opcheck] is not a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise UsageError(f"{path}: [tool.opcheck] has no key {key!r} "
                             f"(known: {', '.join(KEYS)})")
        name, kind = KEYS[key]
        if kind is bool:
            if not isinstance(value, bool):
                raise UsageError(f"{path}: [tool.opcheck] {key} must be true or false")
            values[name] = value
        elif not isinstance(value, str | int | float) or isinstance(value, bool):
            raise UsageError(f"{path}: [tool.opcheck] {key} must be a string")
        elif kind is Path:
            values[name] = str((path.parent / str(value)).resolve())
        else:
            values[name] = str(value)
    return ProjectConfig(path, values)


def load(start: Path | None = None) -> ProjectConfig:
    """The project's config, or an empty one (no file, or ``$OPCHECK_NO_CONFIG`` set)."""
    import os

    if os.environ.get(NO_CONFIG_ENV):
        return ProjectConfig()
    path = find(start)
    return parse(path) if path is not None else ProjectConfig()
