"""Write a catalog file from ``CatalogData``: into a temporary file, then ``os.replace``.

Readers holding the old file keep reading it (the inode survives the rename); new readers
see the complete new catalog. A failure leaves the previous catalog untouched.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.schema import CreateTable
from sqlmodel import SQLModel

from opcheck.core.errors import CatalogError
from opcheck.db.data import CatalogData
from opcheck.db.engine import make_engine
from opcheck.db.models import SCHEMA_VERSION


def _insert(raw: Any, table: str, cols: list[str], rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    names = ", ".join(f'"{c}"' for c in cols)  # "commit", "schema" are SQL keywords
    raw.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})", rows)


def _rows(table: str, items: list[Any], skip: tuple[str, ...] = ()) -> tuple[str, list[str], list[tuple[Any, ...]]]:
    """Dataclass records as insert tuples (``dataclasses.asdict`` deep-copies: too slow here)."""
    if not items:
        return table, [], []
    cols = [f.name for f in fields(items[0]) if f.name not in skip]
    return table, cols, [tuple(getattr(x, c) for c in cols) for x in items]


def fill(engine: Engine, data: CatalogData) -> None:
    """Create the tables on ``engine`` and insert every fact in one transaction.

    Rows go through the DB-API's ``executemany`` and indexes are built after the rows are in:
    first use builds the catalog from the snapshot (100k+ kernel rows) and must stay well
    under 3 s.
    """
    meta = {"schema_version": str(SCHEMA_VERSION), **data.meta}
    tables = SQLModel.metadata.sorted_tables
    with engine.begin() as conn:
        for t in tables:
            conn.execute(CreateTable(t))  # the table alone; its indexes come after the rows
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA synchronous=OFF")  # a private temp file: durability comes from the rename
        batches = [
            _rows("source", data.sources),
            _rows("release", data.releases, skip=("kernel_source_id", "native_source_id")),
            _rows("operator", data.operators),
            ("npukernel",
             ["op", "release", "source_id", "status", "op_api", "acl_op", "native", "aclnn"],
             [(k.op, k.release, k.source_id, k.facts.status, k.facts.op_api, k.facts.acl_op,
               k.facts.native, k.facts.aclnn) for k in data.kernels]),
            _rows("deprecation", data.deprecations),
            _rows("pythonsupport", data.pythons),
            ("api_support",
             ["api", "feature", "hardware", "supported", "only_dtypes", "unsupported_dtypes",
              "arg_limits", "generation", "doc_version", "ref", "restriction", "line", "source_id"],
             [(a.facts.api, a.facts.feature, a.facts.hardware, a.facts.supported,
               a.facts.only_dtypes, a.facts.unsupported_dtypes, a.facts.arg_limits,
               a.facts.generation, a.doc_version, a.ref, a.restriction, a.line, a.source_id)
              for a in data.api_support]),
            ("api_op", ["api", "op", "via"], [(x.api, x.op, x.via) for x in data.api_ops]),
            _rows("workaround", data.workarounds, skip=("ops",)),
            ("workaround_op", ["workaround_id", "op"],
             [(w.id, op) for w in data.workarounds for op in w.ops]),
            _rows("zoo_result", data.zoo),
            ("meta", ["key", "value"], list(meta.items())),
        ]
        for table, cols, rows in batches:
            _insert(raw, table, cols, rows)
        for t in tables:
            for idx in t.indexes:
                idx.create(conn)
        # Statistics for the planner: without them it reads npukernel by the low-selectivity
        # status index when the op index narrows the rows to a handful.
        raw.execute("PRAGMA analysis_limit = 1000")
        raw.execute("ANALYZE")
        from opcheck.db.search import create_search_index

        create_search_index(raw)
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
