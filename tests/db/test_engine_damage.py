"""Damaged catalogs are recognised cheaply, and what a killed build left behind is removed."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from catalog_fixture import small_catalog

from opcheck.core.errors import CatalogError
from opcheck.db import engine
from opcheck.db.build import write_catalog


@pytest.fixture
def good(tmp_path: Path) -> Path:
    return write_catalog(small_catalog(), tmp_path / "c.sqlite")


def test_a_whole_catalog_has_no_damage(good: Path) -> None:
    assert engine.damage(good) is None


def test_damage_names_what_is_wrong(good: Path, tmp_path: Path) -> None:
    data = good.read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 3])
    assert (engine.damage(cut) or "").startswith("cut short (")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\0" * 4096)
    assert engine.damage(junk) == "not an SQLite database"
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE meta (key TEXT, value TEXT)")
    assert (engine.damage(other) or "").startswith("catalog schema none")


def test_an_explicit_damaged_catalog_is_one_clear_error(good: Path) -> None:
    data = good.read_bytes()
    good.write_bytes(data[: len(data) // 2])
    with pytest.raises(CatalogError, match=r"is not an opcheck catalog \(cut short .*drop --catalog"):
        engine.open_catalog(good)


def test_a_damaged_first_use_catalog_is_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPCHECK_CATALOG", raising=False)
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(engine, "read_snapshot", lambda folder: small_catalog())
    monkeypatch.setattr(engine, "snapshot_digest", lambda folder: "small")
    path = engine.resolve_catalog_path()
    whole = path.read_bytes()
    path.write_bytes(whole[:5000])
    assert engine.resolve_catalog_path() == path
    assert engine.damage(path) is None
    engine.open_catalog().dispose()


def _scramble_middle(path: Path) -> None:
    """Random bytes over pages in the middle; the header (and so :func:`damage`) stays intact."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    start = (len(data) // page // 2) * page
    data[start : start + 2 * page] = os.urandom(2 * page)
    path.write_bytes(bytes(data))


def test_random_bytes_in_the_middle_are_found(
        good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: such a catalog passed the header checks and `op`, `check` and `serve` printed
    a traceback at the first query that met the bad pages."""
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "cache"))
    assert engine.corruption(good) is None
    _scramble_middle(good)
    assert engine.damage(good) is None  # the cheap check cannot see it
    assert (engine.corruption(good) or "").startswith("corrupt: ")
    with pytest.raises(CatalogError, match=r"not an opcheck catalog \(corrupt: Page \d+: [^\n]*drop --catalog"):
        engine.open_catalog(good)


def test_a_scrambled_first_use_catalog_is_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPCHECK_CATALOG", raising=False)
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(engine, "read_snapshot", lambda folder: small_catalog())
    monkeypatch.setattr(engine, "snapshot_digest", lambda folder: "small")
    path = engine.resolve_catalog_path()
    whole = path.read_bytes()
    _scramble_middle(path)
    assert engine.resolve_catalog_path() == path
    assert path.read_bytes() == whole  # built again from the snapshot
    engine.open_catalog().dispose()


def test_only_temp_files_of_dead_builds_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "catalog.sqlite"
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)
    names = [f".catalog.sqlite.{dead}.tmp", f".catalog.sqlite.{dead}.tmp-journal",
             f".catalog.sqlite.{os.getpid()}.tmp",  # this process: still building
             ".catalog.sqlite.abc.tmp", ".other.sqlite.1.tmp", "catalog.sqlite"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    removed = engine.remove_stale_temp_files(target)
    assert sorted(p.name for p in removed) == sorted(names[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])


def test_the_snapshot_digest_is_remembered_until_a_file_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "cache"))
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "a.tsv").write_text("x\t1\n", encoding="utf-8")
    (snap / "b.tsv").write_text("y\t2\n", encoding="utf-8")
    first = engine.snapshot_digest(snap)
    reads: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda p: reads.append(p) or real(p))
    assert engine.snapshot_digest(snap) == first
    assert reads == []  # answered from the cache: no file read again
    (snap / "b.tsv").write_text("y\t3\n", encoding="utf-8")  # same size, new content
    os.utime(snap / "b.tsv", ns=(1, 1))
    changed = engine.snapshot_digest(snap)
    assert changed != first and len(reads) == 2
    # the memo holds nothing the digest depends on: a fresh cache gives the same answer
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "other"))
    assert engine.snapshot_digest(snap) == changed
