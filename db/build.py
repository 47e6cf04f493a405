"""Write a catalog file from ``CatalogData``: into a temporary file, then ``os.replace``.

Readers holding the old file keep reading it (the inode survives the rename); new readers
see the complete new catalog. A failure leaves the previous catalog untouched.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from opcheck.core.errors import CatalogError
from opcheck.db.data import CatalogData
from opcheck.db.schema import TABLES, create_statements, insert_rows, insert_statement
from opcheck.db.search import create_search_index


def _fill(conn: sqlite3.Connection, data: CatalogData) -> None:
    """Create the tables on ``conn`` and insert every fact in one transaction.

    Rows go through ``executemany`` and indexes are built after the rows are in: first use
    builds the catalog from the snapshot (100k+ kernel rows) and must stay well under 3 s.
    """
    creates, indexes = create_statements()
    conn.execute("PRAGMA synchronous=OFF")  # a private temp file: durability comes from the rename
    conn.execute("BEGIN")
    try:
        for stmt in creates:
            conn.execute(stmt)  # the table alone; its indexes come after the rows
        for table in TABLES:
            _, rows = insert_rows(table, data)
            if rows:
                conn.executemany(insert_statement(table), rows)
        for stmt in indexes:
            conn.execute(stmt)
        # Statistics for the planner: without them it reads npukernel by the low-selectivity
        # status index when the op index narrows the rows to a handful.
        conn.execute("PRAGMA analysis_limit = 1000")
        conn.execute("ANALYZE")
        create_search_index(conn)
        broken = conn.execute("PRAGMA foreign_key_check").fetchmany(3)
        if broken:
            raise CatalogError(f"catalog facts reference missing rows: {broken}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def write_catalog(data: CatalogData, path: Path) -> Path:
    """Build the catalog into ``path`` atomically; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        # Autocommit mode: the transaction is fill's own BEGIN/COMMIT. Foreign keys are checked
        # once at the end (per-row checks triple the first-use build time).
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            _fill(conn, data)
        finally:
            conn.close()
        os.replace(tmp, path)
    except Exception as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(exc, CatalogError):
            raise
        raise CatalogError(f"could not write catalog {path}: {exc}") from exc
    return path
