from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
UPSTREAM = (ROOT.parent / "shared" / "upstream").resolve()


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
    from opcheck.contrib.workarounds import attach
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(snapshot_dir())
    attach(data)
    return write_catalog(data, tmp_path_factory.mktemp("bundled") / "catalog.sqlite")
