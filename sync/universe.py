"""The ATen op universe a sync uses: the installed torch's ``native_functions.yaml``.

Read as files from ``torchgen/packaged`` (torch is never imported: that costs seconds and
hundreds of MB, and the catalog code must run without it) and parsed by
:mod:`opcheck.scrapers.pytorch`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from opcheck.scrapers.pytorch import parse_native_functions
from opcheck.scrapers.rows import OperatorRow, Origin

UNIVERSE_PATH = "torchgen/packaged/ATen/native/native_functions.yaml"


@dataclass(frozen=True)
class Universe:
    """The ATen op universe and which torch it came from."""

    operators: list[OperatorRow]
    torch_version: str
    origin: Origin


def installed_torch_files() -> tuple[Path, Path] | None:
    """``native_functions.yaml`` and ``tags.yaml`` packaged with the installed torch, if any."""
    roots: list[Path] = []
    try:
        spec = importlib.util.find_spec("torchgen")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        roots.extend(Path(p) for p in spec.submodule_search_locations)
    if not roots:
        try:
            dist = importlib.metadata.distribution("torch")
            roots.append(Path(str(dist.locate_file("torchgen"))))
        except importlib.metadata.PackageNotFoundError:
            return None
    for root in roots:
        native = root / "packaged" / "ATen" / "native"
        nf, tags = native / "native_functions.yaml", native / "tags.yaml"
        if nf.is_file() and tags.is_file():
            return nf, tags
    return None


def installed_torch_version() -> str | None:
    """``2.13.0+cpu`` as the installed distribution's metadata says; None without torch."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_universe() -> Universe | None:
    """The installed torch's op universe; None when torch is not installed."""
    files = installed_torch_files()
    if files is None:
        return None
    nf, tags = files
    version = (installed_torch_version() or "").split("+", 1)[0]
    origin = Origin(path=UNIVERSE_PATH, ref=f"torch-{version}")
    rows = parse_native_functions(nf.read_text(encoding="utf-8"), origin=origin,
                                  tags_text=tags.read_text(encoding="utf-8"))
    return Universe(rows, version, origin)
