"""The catalog synced from the real upstream snapshot, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.sync.pipeline import SyncResult, collect, installed_universe
from opcheck.sync.sources import MirrorSource


@pytest.fixture(scope="session")
def upstream_synced(upstream: Path) -> SyncResult:
    """``collect`` over ../shared/upstream (skips without it or without torch's op universe)."""
    universe = installed_universe()
    if universe is None:
        pytest.skip("the op universe comes from the installed torch (opcheck[trace])")
    return collect(MirrorSource(upstream), universe=universe)
