"""A CompositeExplicitAutograd op judged by the calls its generic kernel made (issue 30).

``opcheck run`` records a CEA op without a kernel of the device's own with the ops its kernel
sent to the device as children; the row stays the op the model called, and on a release
without its kernel the worst callee decides its status, with the chain. On the hand-written
catalog: ``aten::expand`` (CEA, no NPU kernel anywhere) calling ``isin.Tensor_Tensor_out``
(CPU fallback on 2.1.0.post10, an NPU kernel on 2.6.0.post5) and ``relu`` (NPU kernel).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from opcheck.checker.check import all_releases_matrix, check
from opcheck.checker.levels import received
from opcheck.checker.resolve import Resolver
from opcheck.core.oplist import OpList
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

CEA = "aten::expand"
FALLS_BACK = "aten::isin.Tensor_Tensor_out"


@pytest.fixture
def cat(small_catalog_path: Path) -> Catalog:
    return Catalog.load(make_engine(small_catalog_path))


def _oplist(children: list[str]) -> OpList:
    ops: list[dict[str, Any]] = [
        {"op": CEA, "count": 3, "dtypes": ["float64"], "composite": True, "children": children}
    ]
    ops += [{"op": c, "count": 3, "dtypes": ["float64"], "parent": CEA, "via": [CEA]}
            for c in children]  # fmt: skip
    doc = {"schema_version": 2, "kind": "opcheck.oplist", "model": "train.py", "method": "run",
           "ir": "runtime-dispatch", "torch_version": "", "mode": "inference", "ops": ops}
    return OpList.from_json(doc)


def test_the_worst_callee_decides_with_the_chain(cat: Catalog) -> None:
    ol = _oplist(["aten::relu", FALLS_BACK])
    report = check(cat, ol, cat.release("2.1.0.post10"))
    row = next(f for f in report.ops if f.op == CEA)
    assert row.status is Status.CPU_FALLBACK
    assert row.via == [CEA, FALLS_BACK]
    assert f"{CEA} → {FALLS_BACK}" in row.reason
    assert report.fallback_calls == 3
    # the callees are the op's calls, not rows of their own
    assert {f.op for f in report.ops} == {CEA}
    # where the callee has a kernel the op runs composite, its callees named
    newer = check(cat, ol, cat.release("2.6.0.post5"))
    row = next(f for f in newer.ops if f.op == CEA)
    assert row.status is Status.COMPOSITE
    assert "aten::relu" in row.reason and FALLS_BACK in row.reason
    assert newer.verdict.value == "YES"


def test_the_release_grid_agrees(cat: Catalog) -> None:
    grid = all_releases_matrix(cat, _oplist([FALLS_BACK]))
    assert grid["ops"][CEA]["2.1.0.post10"] is Status.CPU_FALLBACK
    assert grid["ops"][CEA]["2.6.0.post5"] is Status.COMPOSITE
    assert FALLS_BACK not in grid["ops"]


def test_without_recorded_calls_the_op_stays_composite(cat: Catalog) -> None:
    resolver = Resolver(cat, "2.1.0.post10")
    assert resolver.resolve(CEA).status is Status.COMPOSITE  # the catalog alone
    level = received(_oplist([]), resolver)
    assert [u.op for u in level.ops] == [CEA]
    assert resolver.resolve(CEA).status is Status.COMPOSITE
    # a learned callee changes an earlier answer
    resolver.learn_callees(CEA, [FALLS_BACK])
    assert resolver.resolve(CEA).status is Status.CPU_FALLBACK
