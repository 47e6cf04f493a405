"""Write a catalog file from ``CatalogData``: into a temporary file, then ``os.replace``.

Readers holding the old file keep reading it (the inode survives the rename); new readers
see the complete new catalog. A failure leaves the previous catalog untouched.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert
from sqlmodel import SQLModel

from opcheck.errors import CatalogError

from . import models
from .data import CatalogData
from .engine import make_engine
from .models import SCHEMA_VERSION


def _release_row(rec: Any) -> dict[str, Any]:
    d = asdict(rec)
    d.pop("kernel_source_id")
    d.pop("native_source_id")
    return d


def fill(engine: Engine, data: CatalogData) -> None:
    """Create the tables on ``engine`` and insert every fact (bulk, one transaction)."""
    SQLModel.metadata.create_all(engine)
    meta = {"schema_version": str(SCHEMA_VERSION), **data.meta}
    with engine.begin() as conn:
        if data.sources:
            conn.execute(insert(models.Source), [asdict(s) for s in data.sources])
        if data.releases:
            conn.execute(insert(models.Release), [_release_row(r) for r in data.releases])
        if data.operators:
            conn.execute(
                insert(models.Operator),
                [{**asdict(o), "schema_": o.schema} for o in data.operators],
            )
        if data.kernels:
            conn.execute(
                insert(models.NpuKernel),
                [
                    {"op": k.op, "release": k.release, "source_id": k.source_id, **asdict(k.facts)}
                    for k in data.kernels
                ],
            )
        if data.deprecations:
            conn.execute(insert(models.Deprecation), [asdict(d) for d in data.deprecations])
        if data.pythons:
            conn.execute(insert(models.PythonSupport), [asdict(p) for p in data.pythons])
        conn.execute(insert(models.Meta), [{"key": k, "value": v} for k, v in meta.items()])


def write_catalog(data: CatalogData, path: Path) -> Path:
    """Build the catalog into ``path`` atomically; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        engine = make_engine(tmp, readonly=False)
        try:
            fill(engine, data)
        finally:
            engine.dispose()
        os.replace(tmp, path)
    except Exception as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(exc, CatalogError):
            raise
        raise CatalogError(f"could not write catalog {path}: {exc}") from exc
    return path
