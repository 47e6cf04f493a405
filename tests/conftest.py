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
