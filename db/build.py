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

from sqlalchemy import Engine
from sqlmodel import SQLModel

from opcheck.errors import CatalogError

from .data import CatalogData
from .engine import make_engine
from .models import SCHEMA_VERSION


def _release_row(rec: Any) -> dict[str, Any]:
    d = asdict(rec)
    d.pop("kernel_source_id")
    d.pop("native_source_id")
    return d


def _insert(raw: Any, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    names = ", ".join(f'"{c}"' for c in cols)  # "commit", "schema" are SQL keywords
    sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})"
    raw.executemany(sql, [tuple(r[c] for c in cols) for r in rows])


def fill(engine: Engine, data: CatalogData) -> None:
    """Create the tables on ``engine`` and insert every fact in one transaction.

    Rows go through the DB-API's ``executemany`` rather than the ORM: first use builds the
    catalog from the snapshot (100k+ kernel rows) and must stay well under 3 s.
    """
    SQLModel.metadata.create_all(engine)
    meta = {"schema_version": str(SCHEMA_VERSION), **data.meta}
    with engine.begin() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA synchronous=OFF")  # a private temp file: durability comes from the rename
        _insert(raw, "source", [asdict(s) for s in data.sources])
        _insert(raw, "release", [_release_row(r) for r in data.releases])
        _insert(raw, "operator", [{**{k: v for k, v in asdict(o).items() if k != "schema"},
                                   "schema": o.schema} for o in data.operators])
        _insert(raw, "npukernel", [
            {"op": k.op, "release": k.release, "source_id": k.source_id,
             "status": k.facts.status, "op_api": k.facts.op_api, "acl_op": k.facts.acl_op,
             "native": k.facts.native, "aclnn": k.facts.aclnn}
            for k in data.kernels
        ])
        _insert(raw, "deprecation", [asdict(d) for d in data.deprecations])
        _insert(raw, "pythonsupport", [asdict(p) for p in data.pythons])
        _insert(raw, "meta", [{"key": k, "value": v} for k, v in meta.items()])
        broken = raw.execute("PRAGMA foreign_key_check").fetchmany(3)
        if broken:
            raise CatalogError(f"catalog facts reference missing rows: {broken}")


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
