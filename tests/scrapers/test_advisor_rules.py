"""The profiling advisor's affinity-API rules (``timeline_fusion_ops.yaml`` of Ascend/mstt):
the mirror copy under tests/fixtures (a subset of the real file at the pinned commit) and
hand-written broken files."""

from __future__ import annotations

import pytest
from testpaths import FIXTURES

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import advisor
from opcheck.scrapers.rows import Origin
from opcheck.sync.advisor import RULES

FILE = FIXTURES / "mirror" / RULES
ORIGIN = Origin(RULES)


def test_rules_become_rows_with_their_cann_version_and_line() -> None:
    text = FILE.read_text(encoding="utf-8")
    rows = advisor.parse(text, ORIGIN)
    by = {(r.api, r.pattern): r for r in rows}
    lines = text.splitlines()
    geglu = by[("torch_npu.npu_geglu", "(slice|chunk)-gelu-mul")]
    # listed by the 8.0.RC1 set and again by 8.0.0: the first set's row is kept
    assert (geglu.kind, geglu.cann, geglu.torch) == ("aten", "8.0.RC1", "1.11.0,2.1.0")
    assert "npu_geglu" in lines[geglu.line - 1]
    sgd = by[("torch_npu.optim.NpuFusedSGD", "SGD.step")]
    assert (sgd.kind, sgd.cann, sgd.torch) == ("optimizer", "6.3.RC2", "1.11.0")
    optimizers = {r.api for r in rows if r.kind == "optimizer"}
    assert len(optimizers) == 9 and "torch_npu.optim.NpuFusedRMSpropTF" in optimizers
    # a chain continued on the next line keeps its own line
    second = by[("torch_npu.npu_confusion_transpose",
                 "(reshape|view)-(contiguous){0,1}-(permute|transpose)")]
    assert "(reshape|view)" in lines[second.line - 1]
    assert len({(r.api, r.pattern) for r in rows}) == len(rows)
    for r in rows:
        assert r.pattern.split("-")[0].strip("()").split("|")[0] in lines[r.line - 1]


def test_chains_split_on_the_dashes_between_elements() -> None:
    assert advisor.split_chain("(permute|transpose)-(contiguous){0,1}-(reshape|view)") == [
        "(permute|transpose)", "(contiguous){0,1}", "(reshape|view)"]
    assert advisor.split_chain("add-layer_norm") == ["add", "layer_norm"]


@pytest.mark.parametrize(("text", "message"), [
    ("- cann_version: 1\n  operator_rules: {aten: {add: {x: [a-b]}}}\n  extra: 1\n",
     r"timeline_fusion_ops\.yaml:3: unknown key 'extra'"),
    ("- cann_version: 1\n  operator_rules:\n    aten:\n      add:\n        x: [\"a-(b\"]\n",
     r":5: x: not an op chain"),
    ("- cann_version: 1\n  operator_rules: {Dequeue: {add: {}}}\n",
     "unknown key 'Dequeue'"),
    ("- cann_version: 1\n  operator_rules: {Optimizer: {add: {x: [SGD]}}}\n",
     "not an op chain"),
    ("{}\n", "expected a list of rule sets"),
])
def test_changed_files_fail_loudly(text: str, message: str) -> None:
    with pytest.raises(ScrapeError, match=message):
        advisor.parse(text, ORIGIN)
