"""The advisor upstream: the pinned rule file read from a mirror, or a note when absent."""

from __future__ import annotations

from pathlib import Path

from testpaths import FIXTURES

from opcheck.db.data import CatalogData
from opcheck.sync.advisor import PIN, AdvisorRules
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import MirrorSource


def _collect(mirror: Path) -> SyncContext:
    ctx = SyncContext(MirrorSource(mirror))
    ctx.data = CatalogData()
    AdvisorRules().collect(ctx)
    return ctx


def test_rules_at_the_pin_with_their_source(tmp_path: Path) -> None:
    ctx = _collect(FIXTURES / "mirror")
    assert ctx.failures == [] and ctx.notes == []
    rules = ctx.data.advisor_rules
    sgd = next(r for r in rules if r.api == "torch_npu.optim.NpuFusedSGD")
    assert sgd.url.startswith(f"https://github.com/Ascend/mstt/blob/{PIN}/profiler/")
    assert sgd.url.endswith(f"#L{sgd.line}") and sgd.source_id is not None
    source = next(s for s in ctx.data.sources if s.id == sgd.source_id)
    assert source.scraper == "advisor" and PIN in source.path
    # a mirror made before this upstream: no rules, one note
    empty = _collect(tmp_path)
    assert empty.data.advisor_rules == [] and empty.failures == []
    assert any("advisor" in n for n in empty.notes)
