"""The catalog synced from the real upstream snapshot, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest
from testpaths import FIXTURES

from opcheck.sync.pipeline import SyncResult, collect, installed_universe
from opcheck.sync.sources import MirrorsSource


@pytest.fixture(scope="session")
def upstream_synced(upstream: Path) -> SyncResult:
    """``collect`` over ../shared/upstream and the project's own small mirror of the upstreams
    it lacks (Ascend/mstt's advisor rules), as ``make catalog`` runs it (skips without
    ../shared/upstream or without torch's op universe)."""
    universe = installed_universe()
    if universe is None:
        pytest.skip("the op universe comes from the installed torch (opcheck[trace])")
    return collect(MirrorsSource([upstream, FIXTURES / "mirror"]), universe=universe)
