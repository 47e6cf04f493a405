"""CLI edges that must never lie: a path that cannot be written or read is one line on stderr
and exit 2 (1 means findings), a reader closing stdout early changes nothing, damaged or
half-written catalogs are rebuilt or named, and ``--version`` / ``-h`` work."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from click.testing import Result
from typer.testing import CliRunner

from opcheck.cli.app import app, route
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog

runner = CliRunner()
OLD = "2.1.0.post17"  # isin.Tensor_Tensor falls back to the CPU here


def invoke(*args: str) -> Result:
    return runner.invoke(app, route(list(args)))


def one_error_line(r: Result) -> str:
    """The single stderr line of a failed command (and nothing on stdout, no traceback)."""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert r.stdout == ""
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert lines[0].startswith("opcheck: error: ")
    return lines[0]


@pytest.fixture
def cat_path(tmp_path: Path) -> Path:
    return write_catalog(small_catalog(), tmp_path / "c.sqlite")


@pytest.fixture
def clean_ops(tmp_path: Path) -> Path:
    """An op list with no finding on OLD: exit 0."""
    ops = [OpUse("aten::relu", 4, ["float32"], locations=[f"model.py:{i}" for i in range(8)]),
           OpUse("aten::add.Tensor", 1, ["float32"])]
    ol = OpList(model="clean.py", method="runtime", ir="runtime-dispatch", ops=ops)
    p = tmp_path / "clean.json"
    p.write_text(ol.dumps())
    return p


@pytest.fixture
def finding_ops(tmp_path: Path) -> Path:
    ol = OpList(model="isin.py", method="runtime", ir="runtime-dispatch",
                ops=[OpUse("aten::isin.Tensor_Tensor", 3, ["int64"])])
    p = tmp_path / "isin.json"
    p.write_text(ol.dumps())
    return p


# ---------------------------------------------------------------- paths that cannot be written


def _bad_outputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    return {
        "missing folder": (tmp_path / "no" / "such" / "r.json", "no directory"),
        "a directory": (tmp_path, "it is a directory"),
        "/proc": (Path("/proc/version"), ""),
    }


@pytest.mark.parametrize("case", ["missing folder", "a directory", "/proc"])
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_check_output_that_cannot_be_written_is_one_line_and_exit_2(
        case: str, fmt: str, tmp_path: Path, cat_path: Path, clean_ops: Path) -> None:
    out, why = _bad_outputs(tmp_path)[case]
    if case == "/proc" and not Path("/proc/version").exists():
        pytest.skip("no /proc")
    r = invoke(str(clean_ops), "--catalog", str(cat_path), "--torch-npu", OLD, "--format", fmt,
               "-o", str(out))
    assert r.exit_code == 2
    line = one_error_line(r)
    assert line.startswith(f"opcheck: error: cannot write {out}: ") and why in line


def test_write_failure_after_the_checks_is_one_line_and_exit_2(
        tmp_path: Path, cat_path: Path, clean_ops: Path) -> None:
    # /proc/version exists and its folder looks writable to root: only the write fails.
    if not Path("/proc/version").exists():
        pytest.skip("no /proc")
    r = invoke(str(clean_ops), "--catalog", str(cat_path), "--torch-npu", OLD,
               "--format", "json", "-o", "/proc/version")
    assert r.exit_code == 2
    assert one_error_line(r).startswith("opcheck: error: cannot write /proc/version: ")


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_full_disk_leaves_the_previous_report_whole(
        tmp_path: Path, cat_path: Path, clean_ops: Path, monkeypatch: pytest.MonkeyPatch,
        fmt: str) -> None:
    """Issue 32: `-o` on a full disk replaced the previous report with an 8 kB fragment."""
    import errno
    import os

    out = tmp_path / "report.out"
    r = invoke(str(clean_ops), "--catalog", str(cat_path), "--torch-npu", OLD,
               "--format", fmt, "-o", str(out))
    assert r.exit_code in (0, 1), r.output
    before = out.read_bytes()
    assert len(before) > 100

    def full(_fd: int) -> None:  # what the flush of a file on a full disk reports
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    r = invoke(str(clean_ops), "--catalog", str(cat_path), "--torch-npu", OLD,
               "--format", fmt, "-o", str(out))
    assert r.exit_code == 2
    assert one_error_line(r) == f"opcheck: error: cannot write {out}: No space left on device"
    assert out.read_bytes() == before
    assert not list(tmp_path.glob(".report.out*"))  # no temp file left


@pytest.mark.parametrize("argv", [
    ["workaround", "new", "aten::isin.Tensor_Tensor", "-o", "{missing}"],
    ["workaround", "schema", "-o", "{missing}"],
    ["workaround", "schema", "-o", "{dir}"],
    ["zoo", "--format", "json", "-o", "{missing}"],
])
def test_other_outputs_that_cannot_be_written(argv: list[str], tmp_path: Path) -> None:
    args = [a.format(missing=tmp_path / "nope" / "x.out", dir=tmp_path) for a in argv]
    r = invoke(*args)
    assert r.exit_code == 2
    assert "cannot write" in one_error_line(r)


def test_unreadable_op_list_is_one_line(tmp_path: Path, cat_path: Path) -> None:
    r = invoke(str(tmp_path / "missing.json"), "--catalog", str(cat_path))
    assert r.exit_code == 2
    assert "missing.json" in one_error_line(r)


def test_a_count_of_1e400_is_one_line_not_an_overflow_traceback(
        tmp_path: Path, cat_path: Path, clean_ops: Path) -> None:
    doc = json.loads(clean_ops.read_text())
    text = json.dumps(doc).replace('"count": 4', '"count": 1e400')
    assert "1e400" in text
    big = tmp_path / "big.json"
    big.write_text(text)
    r = invoke(str(big), "--catalog", str(cat_path), "--torch-npu", OLD)
    assert r.exit_code == 2
    assert one_error_line(r) == (f"opcheck: error: {big}: malformed op list: a count or shape "
                                 "is not a finite integer")


@pytest.mark.parametrize("digits", [21, 4301, 100_000])
def test_an_integer_beyond_any_count_is_one_line(
        tmp_path: Path, cat_path: Path, clean_ops: Path, digits: int) -> None:
    """Issue 32: past 4,300 digits json raised its own ValueError: a traceback and exit 1."""
    text = clean_ops.read_text()
    doc = json.loads(text)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc).replace('"count": 4', '"count": ' + "9" * digits, 1))
    r = invoke(str(big), "--catalog", str(cat_path), "--torch-npu", OLD)
    assert r.exit_code == 2
    assert one_error_line(r) == (
        f"opcheck: error: {big}: an integer of {digits} digits (at most 20)"
    )


def test_an_unforeseen_os_error_is_one_line_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from opcheck.cli.common import handle_errors

    with pytest.raises(typer.Exit) as info, handle_errors():
        raise PermissionError(13, "Permission denied", str(tmp_path / "x"))
    assert info.value.exit_code == 2
    assert capsys.readouterr().err == f"opcheck: error: {tmp_path / 'x'}: Permission denied\n"


# ---------------------------------------------------------------- SIGPIPE


def _opcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "opcheck", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


@pytest.mark.parametrize("run", range(4))
def test_reader_closing_stdout_early_exits_0_quietly(
        run: int, cat_path: Path, clean_ops: Path) -> None:
    """`opcheck ops.json | head -1`: every time, whether the reader goes before the first write
    (even runs) or after one line (odd runs)."""
    fmt = "json" if run % 2 else "table"
    proc = _opcheck(str(clean_ops), "--catalog", str(cat_path), "--torch-npu", OLD,
                    "--format", fmt)
    assert proc.stdout is not None and proc.stderr is not None
    if run % 2:
        proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert err == b""


def test_a_closed_pipe_keeps_the_findings_exit_code(cat_path: Path, finding_ops: Path) -> None:
    # 1 means findings: a reader that went away does not turn a failing check into a pass
    proc = _opcheck(str(finding_ops), "--catalog", str(cat_path), "--torch-npu", OLD,
                    "--fail-on", "fallback")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1, err
    assert err == b""


# ---------------------------------------------------------------- catalogs


def test_damaged_synced_catalog_is_one_line_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_ops: Path) -> None:
    monkeypatch.delenv("OPCHECK_CATALOG", raising=False)
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "cache"))
    synced = write_catalog(small_catalog(), tmp_path / "cache" / "catalog.sqlite")
    data = synced.read_bytes()
    synced.write_bytes(data[: len(data) // 2])  # a copy cut short
    r = invoke(str(clean_ops), "--torch-npu", OLD)
    assert r.exit_code == 2
    line = one_error_line(r)
    assert "is not an opcheck catalog (cut short" in line
    assert line.endswith("run `opcheck sync` to write it again")


def test_sync_removes_what_a_killed_sync_left(tmp_path: Path) -> None:
    """A sync SIGKILLed while writing leaves `.catalog.sqlite.PID.tmp` and its journal; the
    next `opcheck sync` removes them (here it then stops on its missing --mirror)."""
    target = tmp_path / "catalog.sqlite"
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, sqlite3, sys, time\n"
        f"tmp = {str(tmp_path)!r} + f'/.catalog.sqlite.{{os.getpid()}}.tmp'\n"
        "c = sqlite3.connect(tmp, isolation_level=None)\n"
        "c.execute('CREATE TABLE t (x BLOB)')\n"
        "c.execute('BEGIN')\n"
        "c.execute('INSERT INTO t VALUES (zeroblob(4000000))')\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE)
    assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f".catalog.sqlite.{writer.pid}.tmp", f".catalog.sqlite.{writer.pid}.tmp-journal"]
    writer.kill()
    writer.wait()
    live = tmp_path / f".catalog.sqlite.{os.getpid()}.tmp"  # a sync still running keeps its file
    live.write_bytes(b"x")
    r = invoke("sync", "--catalog", str(target))
    assert r.exit_code == 2  # neither --mirror nor --live
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def test_rebuild_of_a_damaged_first_use_catalog_is_silent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_ops: Path) -> None:
    from opcheck.db import engine

    monkeypatch.delenv("OPCHECK_CATALOG", raising=False)
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path / "cache"))
    # the bundled snapshot stands in as the small catalog (same code path, a fraction of the time)
    monkeypatch.setattr(engine, "read_snapshot", lambda folder: small_catalog())
    monkeypatch.setattr(engine, "snapshot_digest", lambda folder: "small")
    first = invoke(str(clean_ops), "--torch-npu", OLD, "--format", "json")
    assert first.exit_code == 0, first.output
    [built] = (tmp_path / "cache").glob("catalog-*.sqlite")
    with sqlite3.connect(built) as conn:
        conn.execute("DROP TABLE meta")
    again = invoke(str(clean_ops), "--torch-npu", OLD, "--format", "json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == json.loads(first.stdout)


# ---------------------------------------------------------------- --version, -h


def test_version() -> None:
    from opcheck import __version__

    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout == f"opcheck {__version__}\n"


@pytest.mark.parametrize("argv", [["-h"], ["--help"], ["check", "-h"], ["workaround", "-h"],
                                  ["workaround", "lint", "-h"]])
def test_short_help(argv: list[str]) -> None:
    r = invoke(*argv)
    assert r.exit_code == 0 and r.stdout.startswith("Usage: opcheck")


def test_version_and_help_from_the_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "opcheck", "--version"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("opcheck ")
