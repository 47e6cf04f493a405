from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from click.testing import Result

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
UPSTREAM = (ROOT.parent / "shared" / "upstream").resolve()


_OWN_CACHE: list[tuple[str, str]] = []  # (environment variable, the folder this run made)


def pytest_configure(config: pytest.Config) -> None:
    """One cache directory for the whole run (the catalog built on first use, sync's parse
    cache), shared with the subprocesses tests start: a run never reads or writes the user's
    ~/.cache/opcheck, so a warm cache there cannot make a test pass that fails on CI.

    Likewise one build folder for the C++ recording backend
    (tests/fixtures/tracers/cpp_backend_run.py): four modules run it, and each compile of the
    same source costs ~30 s."""
    for var, prefix in (("OPCHECK_CACHE_DIR", "opcheck-test-cache-"),
                        ("OPCHECK_TEST_BACKEND_BUILD", "opcheck-test-backend-")):
        if var not in os.environ:
            _OWN_CACHE.append((var, tempfile.mkdtemp(prefix=prefix)))
            os.environ[var] = _OWN_CACHE[-1][1]


def pytest_unconfigure(config: pytest.Config) -> None:
    for var, path in _OWN_CACHE:
        os.environ.pop(var, None)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def upstream() -> Path:
    """The real upstream snapshot in ../shared/upstream; tests using it skip when absent."""
    if not (UPSTREAM / "releases.tsv").is_file():
        pytest.skip(f"real upstream data not found at {UPSTREAM}")
    return UPSTREAM


@pytest.fixture(scope="session")
def bundled_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The catalog a user gets on first use: the bundled snapshot plus data/workarounds."""
    from opcheck.contrib.workaround_catalog import attach
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(snapshot_dir())
    attach(data)
    return write_catalog(data, tmp_path_factory.mktemp("bundled") / "catalog.sqlite")


@pytest.fixture
def small_catalog_path(tmp_path: Path) -> Path:
    """The hand-written catalog of ``catalog_fixture`` (every status), written to a temp file."""
    from catalog_fixture import small_catalog

    from opcheck.db.build import write_catalog

    return write_catalog(small_catalog(), tmp_path / "small.sqlite")


@pytest.fixture
def cli() -> Callable[..., Result]:
    """Run the opcheck CLI in-process: ``cli("op", "aten::relu")`` returns Click's result."""
    from typer.testing import CliRunner

    from opcheck.cli.app import app, route

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        # `route` as `main` applies it: `cli("model.pt2")` means `opcheck check model.pt2`.
        return runner.invoke(app, route(list(args)), input=input)

    return invoke
