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


def test_the_migration_tools_advice_at_its_own_pin(tmp_path: Path) -> None:
    from opcheck.scrapers.transplant_advice import KIND_PREFIX, PATH
    from opcheck.sync.advisor import MSTT, TRANSPLANT_PIN

    ctx = _collect(FIXTURES / "mirror")
    advice = [r for r in ctx.data.advisor_rules if r.kind.startswith(KIND_PREFIX)]
    bucket = next(r for r in advice if r.api.startswith(
        "torch.nn.parallel.DistributedDataParallel(bucket_cap_mb="))
    assert bucket.kind == KIND_PREFIX + "parameter" and bucket.path == PATH
    assert bucket.url == (f"https://github.com/Ascend/mstt/blob/{TRANSPLANT_PIN}/{PATH}"
                          f"#L{bucket.line}")
    source = next(s for s in ctx.data.sources if s.id == bucket.source_id)
    assert TRANSPLANT_PIN in source.path and PIN not in source.path
    # the advisor's rules at their pin are still there
    assert any(r.kind == "aten" for r in ctx.data.advisor_rules)
    # a mirror holding the advisor's pin only: its rules, and a note naming the missing file
    only = tmp_path / "only"
    for path in (FIXTURES / "mirror" / MSTT / PIN).rglob("*.yaml"):
        dest = only / MSTT / PIN / path.relative_to(FIXTURES / "mirror" / MSTT / PIN)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(path.read_bytes())
    partial = _collect(only)
    assert partial.failures == [] and any(r.kind == "aten" for r in partial.data.advisor_rules)
    assert not any(r.kind.startswith(KIND_PREFIX) for r in partial.data.advisor_rules)
    assert [n for n in partial.notes if f"{MSTT}/{TRANSPLANT_PIN}/{PATH}" in n]
