"""Where the catalog lives and how to open it. The one place engines are made.

Order: ``--catalog PATH`` → ``$OPCHECK_CATALOG`` → the catalog ``opcheck sync`` wrote into the
user cache → a catalog in the user cache built from the bundled snapshot on first use (keyed by
the snapshot's digest and the contributions' digest, so a new snapshot or a new contributed
file means a new catalog file and never a stale one).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine

from opcheck.core.errors import CatalogError
from opcheck.core.paths import cache_dir, snapshot_dir
from opcheck.db.layout import LAYOUT_VERSION, SCHEMA_VERSION

if TYPE_CHECKING:  # the records import the table classes: only a build needs them
    from opcheck.db.data import CatalogData


@dataclass(frozen=True)
class Contributions:
    """Facts a higher layer adds to the bundled snapshot when the first-use catalog is built
    (``opcheck.contrib``'s workarounds: storage cannot import them, so the caller hands them in).

    ``digest`` is called only when the catalog must come from the snapshot; it changes
    whenever ``attach`` would add other facts, and keys the cached catalog file."""

    digest: Callable[[], str]
    attach: Callable[[CatalogData], None]


def make_engine(path: Path) -> Engine:
    """A read-only engine on a catalog file (opened with ``mode=ro``)."""
    if not path.is_file():
        raise CatalogError(f"no catalog at {path} (run `opcheck sync` or drop --catalog)")
    uri = f"file:{path}?mode=ro"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, check_same_thread=False)

    return create_engine("sqlite://", creator=connect)


def snapshot_digest(folder: Path) -> str:
    """The hash of the snapshot's files, which names the catalog built from them. Hashing the
    32 MB costs ~0.15 s CPU on every command, so the hash is remembered in the user cache
    beside each file's size, mtime and inode, and computed again only once one changed."""
    files = sorted(p for p in folder.glob("*.tsv") if p.is_file())
    if not files:
        raise CatalogError(f"no bundled snapshot in {folder}")
    stats = [(p, p.stat()) for p in files]
    stamp = " ".join(f"{p.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}" for p, st in stats)
    mark = _mark(folder)
    with contextlib.suppress(OSError, ValueError):
        seen, digest = mark.read_text(encoding="utf-8").split("\n")
        if seen == stamp and len(digest) == 64:
            return digest
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    digest = h.hexdigest()
    _remember(mark, f"{stamp}\n{digest}")
    return digest


def resolve_catalog_path(explicit: Path | None = None, *,
                         contributions: Contributions | None = None) -> Path:
    """The catalog file to use, building it from the bundled snapshot (plus ``contributions``)
    when needed."""
    if explicit is not None:
        return explicit
    env = os.environ.get("OPCHECK_CATALOG")
    if env:
        return Path(env)
    synced = synced_catalog_path()
    if synced.is_file():
        return synced
    snap = snapshot_dir()
    extra = contributions.digest() if contributions else ""
    key = f"layout {LAYOUT_VERSION}\n{snapshot_digest(snap)}{extra}"
    digest = hashlib.sha256(key.encode()).hexdigest()
    target = cache_dir() / f"catalog-{digest[:16]}.sqlite"
    if target.is_file() and (damage(target) is not None or corruption(target) is not None):
        # Ours to rebuild: it is only ever a copy of the bundled snapshot (a disk that filled
        # up, a file cut short by a copy of the cache directory, bytes changed on disk).
        target.unlink(missing_ok=True)
    if not target.is_file():
        # Only a build needs the table classes (SQLModel, the ORM): opening a catalog does not.
        from opcheck.db.build import write_catalog

        remove_stale_temp_files(target)
        data = read_snapshot(snap)
        if contributions:
            contributions.attach(data)
        write_catalog(data, target)
        with contextlib.suppress(OSError):  # just built whole: no need to read it back
            _remember(_mark(target), _stamp(target))
    return target


def read_snapshot(folder: Path) -> CatalogData:
    """The bundled snapshot's facts (imported here only when a catalog is built from it)."""
    from opcheck.db.snapshot import read_snapshot as read

    return read(folder)


def damage(path: Path) -> str | None:
    """Why ``path`` is not a whole opcheck catalog of this schema, or None. Cheap (the header
    and one row), so it can run on every command: not SQLite, shorter than the page count its
    header records, or no ``meta`` row with this schema version."""
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
        size = path.stat().st_size
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return "not an SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # the header's page count is valid when its change counter matches (SQLite >= 3.7.0)
    if header[24:28] == header[92:96] and pages and size < pages * page_size:
        return f"cut short ({size} of {pages * page_size} bytes)"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            row = None
        else:
            return f"unreadable ({exc})"
    except sqlite3.Error as exc:
        return f"unreadable ({exc})"
    if row is None or row[0] != str(SCHEMA_VERSION):
        return f"catalog schema {row[0] if row else 'none'}, this opcheck needs {SCHEMA_VERSION}"
    return None


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{SCHEMA_VERSION} {st.st_size} {st.st_mtime_ns} {st.st_ino} {st.st_dev}"


def corruption(path: Path) -> str | None:
    """What SQLite's ``quick_check`` finds wrong in ``path`` (pages of random bytes behind an
    intact header pass :func:`damage`), or None. The check reads the whole file (~0.4 s for
    the catalog), so a file that passed is remembered by its size, mtime and inode in the user
    cache and checked again only once it changed."""
    try:
        stamp = _stamp(path)
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    mark = _mark(path)
    try:
        if mark.read_text(encoding="utf-8") == stamp:
            return None
    except OSError:
        pass
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA quick_check(3)").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"corrupt ({exc})"
    if rows != [("ok",)]:
        lines = [ln.strip() for r in rows for ln in str(r[0]).splitlines()]
        found = "; ".join(ln for ln in lines if ln and not ln.startswith("***"))
        return f"corrupt: {found[:200]}"
    _remember(mark, stamp)
    return None


def _mark(path: Path) -> Path:
    return cache_dir() / "verified" / hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]


def _remember(mark: Path, stamp: str) -> None:
    try:  # only a cache: a read-only cache directory costs a check per command
        mark.parent.mkdir(parents=True, exist_ok=True)
        tmp = mark.with_name(f"{mark.name}.{os.getpid()}.tmp")
        tmp.write_text(stamp, encoding="utf-8")
        os.replace(tmp, mark)
    except OSError:
        pass


def remove_stale_temp_files(path: Path) -> list[Path]:
    """Remove what a killed build of ``path`` left behind: ``write_catalog``'s
    ``.NAME.PID.tmp`` and SQLite's ``-journal``/``-wal``/``-shm`` beside it, when process PID
    is gone (a build still running keeps its files). Returns the files removed."""
    removed: list[Path] = []
    prefix = f".{path.name}."
    for f in sorted(path.parent.glob(f"{glob_escape(prefix)}*.tmp*")):
        rest = f.name[len(prefix):]
        pid_text, _, suffix = rest.partition(".tmp")
        if not pid_text.isdigit() or suffix not in ("", "-journal", "-wal", "-shm"):
            continue
        if _alive(int(pid_text)):
            continue
        try:
            f.unlink()
        except FileNotFoundError:
            continue
        except OSError:
            continue  # not ours to remove (permissions): the next build is unaffected
        removed.append(f)
    return removed


def glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def synced_catalog_path() -> Path:
    """Where `opcheck sync` writes by default; preferred over the bundled snapshot."""
    return cache_dir() / "catalog.sqlite"


def open_catalog(explicit: Path | None = None, *,
                 contributions: Contributions | None = None) -> Engine:
    path = resolve_catalog_path(explicit, contributions=contributions)
    engine = make_engine(path)
    check_schema(engine, path)
    return engine


def check_schema(engine: Engine, path: Path) -> None:
    why = damage(path)
    if why is None:
        why = corruption(path)
    if why is not None and not why.startswith("catalog schema"):
        hint = ("run `opcheck sync` to write it again" if path == synced_catalog_path()
                else "rebuild it, or drop --catalog / $OPCHECK_CATALOG to use the bundled one")
        raise CatalogError(f"{path} is not an opcheck catalog ({why}): {hint}")
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
