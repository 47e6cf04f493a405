"""The atlas store: ``opcheck atlas``'s results and its trace cache, one SQLite file.

It lives beside the catalog in the user cache (``atlas.sqlite``), not in the catalog, which is
rebuilt from the snapshot whenever a new one ships: a store holds what this machine traced.

Tables:

- ``model_coverage``: the catalog's table of the same name (the class in
  :mod:`opcheck.db.tables` is its one definition), rows per architecture and run of releases;
- ``atlas_trace``: the traced op lists, zlib-compressed JSON, keyed by the trace key (library,
  library version, architecture, train, opcheck's trace code version): a catalog change
  re-checks them without tracing again;
- ``atlas_state``: per architecture (and train, product), the trace key and check key its rows
  were made with, so a run skips what is current.

One writer: the process running the atlas writes each architecture's rows, its state and its
trace in one ``BEGIN IMMEDIATE`` transaction, so a killed run (kill -9) leaves either the old
rows or the new ones and the next run resumes from the state; a second run writing at the same
time waits for the lock (``busy_timeout``) instead of failing, and the key makes the later write
replace the earlier one, never add to it.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from opcheck.core.errors import CatalogError
from opcheck.core.paths import cache_dir
from opcheck.db.data import CoverageRec
from opcheck.db.schema import record_fields
from opcheck.db.tables import ModelCoverage

STORE_VERSION = "1"
_COLS = record_fields(CoverageRec)
_KEY = ("library", "architecture", "train", "product")
_BUSY_MS = 60_000  # a second atlas run waits this long for the other's write


def store_path() -> Path:
    return cache_dir() / "atlas.sqlite"


@dataclass(frozen=True)
class State:
    """What an architecture's rows in the store were made from."""

    library: str
    architecture: str
    train: bool
    product: str
    library_version: str
    trace_key: str
    check_key: str


@dataclass(frozen=True)
class CachedTrace:
    oplist_json: str  # "" when the trace failed
    error: str
    seconds: float
    recorder: str
    model_class: str
    task: str
    skipped: bool = False  # error is a reason about the model (needs weights, a package)


_DDL = (
    "CREATE TABLE IF NOT EXISTS atlas_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS atlas_trace (trace_key TEXT PRIMARY KEY, oplist BLOB, "
    "error TEXT NOT NULL, seconds REAL NOT NULL, recorder TEXT NOT NULL, "
    "model_class TEXT NOT NULL, task TEXT NOT NULL, skipped INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS atlas_state (library TEXT NOT NULL, architecture TEXT NOT NULL, "
    "train INTEGER NOT NULL, product TEXT NOT NULL, library_version TEXT NOT NULL, "
    "trace_key TEXT NOT NULL, check_key TEXT NOT NULL, "
    "PRIMARY KEY (library, architecture, train, product))",
)


def _coverage_ddl() -> list[str]:
    table = ModelCoverage.__table__  # type: ignore[attr-defined]
    dialect = sqlite.dialect()
    create = str(CreateTable(table, if_not_exists=True).compile(dialect=dialect))
    return [create, *(str(CreateIndex(i, if_not_exists=True).compile(dialect=dialect))
                      for i in sorted(table.indexes, key=lambda i: str(i.name)))]


def _add_new_columns(db: sqlite3.Connection) -> None:
    # columns added to model_coverage since a store was made: added empty, its rows kept
    have = {r[1] for r in db.execute("PRAGMA table_info(model_coverage)")}
    for col in _COLS:
        if col not in have:
            db.execute(f"ALTER TABLE model_coverage ADD COLUMN {col} VARCHAR NOT NULL DEFAULT ''")


class AtlasStore:
    """One atlas file. Each method opens its own connection: a store is used from the one
    writer thread, and reads from anywhere."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            for stmt in (*_DDL, *_coverage_ddl()):
                db.execute(stmt)
            _add_new_columns(db)
            row = db.execute("SELECT value FROM atlas_meta WHERE key='version'").fetchone()
            if row is None:
                db.execute("INSERT INTO atlas_meta VALUES ('version', ?)", (STORE_VERSION,))
            elif row[0] != STORE_VERSION:
                db.execute("ROLLBACK")
                raise CatalogError(f"{self.path}: atlas store version {row[0]}, this opcheck "
                                   f"reads {STORE_VERSION}; delete the file to start over")
            db.execute("COMMIT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, isolation_level=None)
        except sqlite3.Error as exc:
            raise CatalogError(f"{self.path}: cannot open the atlas store ({exc})") from None
        with closing(conn):
            conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            try:
                yield conn
            except sqlite3.DatabaseError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise CatalogError(f"{self.path}: {exc}") from None

    # --- reads -----------------------------------------------------------------------------

    def states(self) -> dict[tuple[str, str, bool, str], State]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT library, architecture, train, product, library_version, trace_key, "
                "check_key FROM atlas_state").fetchall()
        return {(r[0], r[1], bool(r[2]), r[3]): State(r[0], r[1], bool(r[2]), *r[3:])
                for r in rows}

    def trace(self, trace_key: str) -> CachedTrace | None:
        with self._connect() as db:
            r = db.execute("SELECT oplist, error, seconds, recorder, model_class, task, skipped "
                           "FROM atlas_trace WHERE trace_key = ?", (trace_key,)).fetchone()
        if r is None:
            return None
        text = zlib.decompress(r[0]).decode() if r[0] else ""
        return CachedTrace(text, r[1], r[2], r[3], r[4], r[5], bool(r[6]))

    def rows(self, libraries: Sequence[str] | None = None) -> list[CoverageRec]:
        where, params = "", tuple[str, ...]()
        if libraries:
            where = f" WHERE library IN ({','.join('?' * len(libraries))})"
            params = tuple(libraries)
        with self._connect() as db:
            got = db.execute(f"SELECT {', '.join(_COLS)} FROM model_coverage{where} "
                             "ORDER BY library, architecture, train, product, id",
                             params).fetchall()
        out = []
        for r in got:
            values: dict[str, Any] = dict(zip(_COLS, r, strict=True))
            values["train"] = bool(values["train"])
            out.append(CoverageRec(**values))
        return out

    def meta(self, key: str) -> str | None:
        with self._connect() as db:
            r = db.execute("SELECT value FROM atlas_meta WHERE key = ?", (key,)).fetchone()
        return None if r is None else str(r[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO atlas_meta VALUES (?, ?)", (key, value))

    def count(self, table: str) -> int:
        if table not in ("model_coverage", "atlas_trace", "atlas_state"):
            raise ValueError(table)
        with self._connect() as db:
            return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    # --- the one writer ----------------------------------------------------------------------

    def write(self, state: State, rows: Sequence[CoverageRec],
              trace: tuple[str, CachedTrace] | None = None) -> None:
        """Replace one architecture's rows and state (and store its trace) at once."""
        key = (state.library, state.architecture, int(state.train), state.product)
        where = " AND ".join(f"{k} = ?" for k in _KEY)
        marks = ", ".join("?" * len(_COLS))
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            if trace is not None:
                t = trace[1]
                blob = zlib.compress(t.oplist_json.encode(), 6) if t.oplist_json else None
                db.execute("INSERT OR REPLACE INTO atlas_trace VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (trace[0], blob, t.error, t.seconds, t.recorder, t.model_class,
                            t.task, int(t.skipped)))
            db.execute(f"DELETE FROM model_coverage WHERE {where}", key)
            db.executemany(f"INSERT INTO model_coverage ({', '.join(_COLS)}) VALUES ({marks})",
                           [astuple(r) for r in rows])
            db.execute("INSERT OR REPLACE INTO atlas_state VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (*key, state.library_version, state.trace_key, state.check_key))
            db.execute("COMMIT")


def catalog_coverage(engine: Engine) -> list[CoverageRec]:
    """The atlas a catalog holds (its ``model_coverage`` table, from the snapshot's
    atlas.tsv), in table order."""
    with engine.connect() as conn:
        got = conn.execute(text(f"SELECT {', '.join(_COLS)} FROM model_coverage ORDER BY id"))
        out = []
        for r in got:
            values: dict[str, Any] = dict(zip(_COLS, r, strict=True))
            values["train"] = bool(values["train"])
            out.append(CoverageRec(**values))
    return out
