"""torch_npu's capture rules, parsed from its real sources at two tags (2.1-era and 2.10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import capture_rules as cr
from opcheck.scrapers.rows import Origin

OLD, NEW = "V7.2.0.1-pytorch2.1.0", "v26.1.0-pytorch2.10.0"


def _rules(upstream: Path, tag: str) -> list[tuple[str, cr.CaptureRuleRow]]:
    out = []
    for rel in cr.FILES:
        path = upstream / "github/Ascend/pytorch" / tag / rel
        if path.is_file():
            origin = Origin(f"github/Ascend/pytorch/{tag}/{rel}")
            out += [(rel, r) for r in cr.parse(path.read_text(errors="replace"), origin)]
    return out


def _line(upstream: Path, tag: str, rel: str, n: int) -> str:
    return (upstream / "github/Ascend/pytorch" / tag / rel).read_text(
        errors="replace").splitlines()[n - 1]


@pytest.mark.upstream
@pytest.mark.parametrize("tag", [OLD, NEW])
def test_every_rule_points_at_its_line(upstream: Path, tag: str) -> None:
    rules = _rules(upstream, tag)
    assert {r.kind for _, r in rules} >= {cr.ACLOP, cr.GENERATOR, cr.CAPTURE_BEGIN,
                                          cr.SYNC_POINT}
    for rel, r in rules:
        text = _line(upstream, tag, rel, r.line)
        if r.kind == cr.ACLOP:
            assert "assertNotCapturingAclop" in text
        elif r.kind == cr.GENERATOR:
            assert "assertNotCapturing" in text
        elif r.kind == cr.CAPTURE_BEGIN:
            assert "TORCH_CHECK" in text
        elif r.kind in (cr.SYNC_POINT, cr.RNG_SAFE):
            assert r.subject.rsplit("::", 1)[-1] in text
    acl = next(r for _, r in rules if r.kind == cr.ACLOP and r.subject == "assertNotCapturingAclop")
    assert acl.message.startswith("Cannot run aclop operators during NPU graph capture. "
                                  "Current working aclop is <…>.")


@pytest.mark.upstream
def test_generator_rules_change_between_eras(upstream: Path) -> None:
    old = {r.subject: r for _, r in _rules(upstream, OLD) if r.kind in (cr.GENERATOR,
                                                                       cr.RNG_SAFE)}
    new = {(r.kind, r.subject) for _, r in _rules(upstream, NEW)}
    # 2.1-era: the philox state random kernels use refuses capture outright
    assert "NPUGeneratorImpl::philox_npu_state" in old
    assert old["NPUGeneratorImpl::philox_npu_state"].kind == cr.GENERATOR
    # 2.10: it is graph-safe, and only the legacy entry point refuses
    assert (cr.RNG_SAFE, "NPUGeneratorImpl::philox_npu_state") in new
    assert (cr.GENERATOR, "NPUGeneratorImpl::philox_engine_inputs") in new
    assert (cr.GENERATOR, "NPUGeneratorImpl::philox_npu_state") not in new


@pytest.mark.upstream
def test_graphs_py_names_the_updatable_ops(upstream: Path) -> None:
    ops = {r.subject for _, r in _rules(upstream, OLD) if r.kind == cr.TASK_UPDATE}
    assert "npu_fused_infer_attention_score" in ops


def test_unknown_or_changed_files_fail_loudly() -> None:
    with pytest.raises(ScrapeError, match="no capture-rule reader"):
        cr.parse("", Origin("x/torch_npu/csrc/Other.cpp"))
    with pytest.raises(ScrapeError, match=r"NPUGeneratorImpl\.cpp"):
        cr.parse("void f()\n{\n}\n", Origin("t/torch_npu/csrc/aten/NPUGeneratorImpl.cpp"))
    with pytest.raises(ScrapeError, match="no NPUGraph::capture_begin"):
        cr.parse("void g()\n{\n}\n", Origin("t/torch_npu/csrc/core/npu/NPUGraph.cpp"))
    with pytest.raises(ScrapeError, match=r"graphs\.py:1"):
        cr.parse("def (:\n", Origin("t/torch_npu/npu/graphs.py"))
