"""Where the catalog lives and how to open it. The one place engines are made.

Order: ``--catalog PATH`` → ``$OPCHECK_CATALOG`` → the catalog ``opcheck sync`` wrote into the
user cache → a catalog in the user cache built from the bundled snapshot on first use (keyed by the snapshot's digest, so a new snapshot means a new
catalog file and never a stale one).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import create_engine

from opcheck.core.errors import CatalogError
from opcheck.core.paths import cache_dir, snapshot_dir
from opcheck.db.models import LAYOUT_VERSION, SCHEMA_VERSION


def make_engine(path: Path, *, readonly: bool = True) -> Engine:
    """An engine on a catalog file. Read-only engines open the file with ``mode=ro``."""
    if readonly:
        if not path.is_file():
            raise CatalogError(f"no catalog at {path} (run `opcheck sync` or drop --catalog)")
        uri = f"file:{path}?mode=ro"

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, check_same_thread=False)

        engine = create_engine("sqlite://", creator=connect)
    else:
        # Only the builder writes, into a private temporary file; it checks foreign keys once
        # at the end (per-row checks triple the first-use build time).
        engine = create_engine(f"sqlite:///{path}")
    return engine


def memory_engine() -> Engine:
    """A private in-memory catalog (tests)."""
    from sqlalchemy.pool import StaticPool

    return create_engine(
        "sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool
    )


def snapshot_digest(folder: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in folder.glob("*.tsv") if p.is_file())
    if not files:
        raise CatalogError(f"no bundled snapshot in {folder}")
    for p in files:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def resolve_catalog_path(explicit: Path | None = None) -> Path:
    """The catalog file to use, building it from the bundled snapshot when needed."""
    if explicit is not None:
        return explicit
    env = os.environ.get("OPCHECK_CATALOG")
    if env:
        return Path(env)
    synced = synced_catalog_path()
    if synced.is_file():
        return synced
    from opcheck.contrib.workarounds import attach, folder_digest

    snap = snapshot_dir()
    key = f"layout {LAYOUT_VERSION}\n{snapshot_digest(snap)}{folder_digest()}"
    digest = hashlib.sha256(key.encode()).hexdigest()
    target = cache_dir() / f"catalog-{digest[:16]}.sqlite"
    if not target.is_file():
        from opcheck.db.build import write_catalog
        from opcheck.db.snapshot import read_snapshot

        data = read_snapshot(snap)
        attach(data)
        write_catalog(data, target)
    return target


def synced_catalog_path() -> Path:
    """Where `opcheck sync` writes by default; preferred over the bundled snapshot."""
    return cache_dir() / "catalog.sqlite"


def open_catalog(explicit: Path | None = None) -> Engine:
    path = resolve_catalog_path(explicit)
    engine = make_engine(path)
    check_schema(engine, path)
    return engine


def check_schema(engine: Engine, path: Path) -> None:
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).first()
    except Exception as exc:  # sqlite raises DatabaseError for a file that is not a DB
        raise CatalogError(f"{path} is not an opcheck catalog ({exc.__class__.__name__})") from None
    if row is None or row[0] != str(SCHEMA_VERSION):
        found = row[0] if row else "none"
        raise CatalogError(
            f"{path} has catalog schema {found}, this opcheck needs {SCHEMA_VERSION}: "
            "run `opcheck sync` to rebuild it"
        )
