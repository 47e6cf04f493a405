"""ACL graph capture (--capture): torch_npu's capture rules from its real sources, combined
with a real trace of a decode step that selects with a boolean mask.

The catalog is the bundled one (real releases, operators with PyTorch's tags, kernel paths)
plus the capture rules read from ../shared/upstream at every mirrored tag; the model is
traced once, in-process."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from opcheck.checker.capture import capture_basis, capture_text
from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
from opcheck.core.oplist import OpList
from opcheck.db.catalog import Catalog
from opcheck.db.data import CatalogData, ReleaseRec
from opcheck.db.engine import make_engine
from opcheck.db.schema import TABLES, insert_rows
from opcheck.sync.capture_rules import CaptureRules
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import MirrorSource

pytestmark = pytest.mark.upstream

MODEL = '''import torch


class Decode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.proj(x)
        keep = torch.masked_select(h, h > 0)
        return keep.sum()
'''


@pytest.fixture(scope="module")
def cap_path(bundled_catalog: Path, upstream: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("capture") / "catalog.sqlite"
    shutil.copy(bundled_catalog, path)
    bundled = Catalog.load(make_engine(bundled_catalog))
    data = CatalogData()
    data.releases = [ReleaseRec(r.torch_npu, r.torch, tag=r.tag, sort_key=r.sort_key)
                     for r in bundled.releases]
    ctx = SyncContext(MirrorSource(upstream))
    ctx.data = data
    CaptureRules().collect(ctx)
    assert ctx.failures == [] and data.capture_rules
    table = next(t for t in TABLES if t.sql.name == "capture_rule")
    cols, rows = insert_rows(table, data)
    with sqlite3.connect(path) as conn:
        conn.executemany(f"INSERT INTO capture_rule ({', '.join(cols)}) VALUES "
                         f"({', '.join('?' * len(cols))})", rows)
    return path


@pytest.fixture(scope="module")
def cap_catalog(cap_path: Path) -> Catalog:
    return Catalog.load(make_engine(cap_path))


@pytest.fixture(scope="module")
def decode(tmp_path_factory: pytest.TempPathFactory) -> tuple[OpList, Path]:
    torch = pytest.importorskip("torch")
    from opcheck.tracers import runtime
    from opcheck.tracers.inputs import InputSpec

    src = tmp_path_factory.mktemp("model") / "decode_step.py"
    src.write_text(MODEL, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("decode_step", src)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    oplist = runtime.trace_module(mod.Decode(), InputSpec(), example_args=(torch.randn(4, 16),),
                                  label="decode")
    return oplist, src


def _line_of(src: Path, text: str) -> int:
    return next(i for i, line in enumerate(src.read_text().splitlines(), 1) if text in line)


def _check(cat: Catalog, oplist: OpList, release: str, **kw: Any) -> dict[str, Any]:
    request = CheckRequest(Recorded(oplist), torch_npu=release, capture=True, **kw)
    report = CheckUseCase(cat).run(request).report
    assert report.capture is not None
    return report.capture


def test_masked_select_breaks_capture_at_its_line(cap_catalog: Catalog, upstream: Path,
                                                 decode: tuple[OpList, Path]) -> None:
    oplist, src = decode
    line = _line_of(src, "torch.masked_select")
    rel = max((r for r in cap_catalog.releases if r.has_kernels and r.torch.startswith("2.6")),
              key=lambda r: r.sort_key)
    cap = _check(cap_catalog, oplist, rel.torch_npu, hardware="910B")
    assert cap["verdict"] == "NO"
    first = cap["first"]
    assert first["op"] == "aten::masked_select" and first["kind"] == "host_sync"
    assert first["locations"][0].endswith(f"decode_step.py:{line}")
    # the rule it cites is the sync point at a line of torch_npu's real sources
    path, _, at = first["rule"].rpartition(":")
    tag = cap["tag"]
    text = upstream / "github/Ascend/pytorch" / tag / path
    assert "AclrtSynchronizeStreamWithTimeout" in text.read_text().splitlines()[int(at) - 1]
    assert f"decode_step.py:{line}" in capture_text(cap).splitlines()[2]
    # nothing else breaks on 910B: the linear layer and the comparison run aclnn there
    assert {b["op"] for b in cap["breaks"] if b["severity"] == "breaks"} == {
        "aten::masked_select"}


def test_acl_op_kernels_break_capture_where_they_run(cap_catalog: Catalog,
                                                     decode: tuple[OpList, Path]) -> None:
    oplist, _ = decode
    rel = max((r for r in cap_catalog.releases if r.has_kernels and r.torch.startswith("2.6")),
              key=lambda r: r.sort_key)
    on_910a = _check(cap_catalog, oplist, rel.torch_npu, hardware="910A")
    acl = [b for b in on_910a["breaks"] if b["kind"] == "acl_op"]
    assert acl and all(b["message"].startswith("Cannot run aclop operators during NPU graph "
                                               "capture") for b in acl)
    nz = _check(cap_catalog, oplist, rel.torch_npu, hardware="910B", internal_format=True)
    assert {b["op"] for b in nz["breaks"] if b["kind"] == "acl_op"} >= {"aten::addmm"}


def test_releases_are_judged_on_their_tag_or_labelled_inferred(cap_catalog: Catalog) -> None:
    from opcheck.db.capture import rule_tags

    tags = rule_tags(cap_catalog.engine)
    exact = [r for r in cap_catalog.releases if r.tag in tags and not tags[r.tag]]
    assert exact
    for rel in exact:
        basis = capture_basis(cap_catalog, rel, tags)
        assert basis.tag == rel.tag and not basis.inferred
    # a release of a train before NPUGraph existed (a newer train's tag has no graphs.py)
    old = next(r for r in cap_catalog.releases if r.torch_npu.startswith("2.1.0.post")
               and r.train.startswith("5."))
    basis = capture_basis(cap_catalog, old, tags)
    assert basis.absent and basis.inferred
    # a newer release of a line whose tag has the rules: inferred from that tag
    rel = next(r for r in cap_catalog.releases if r.tag and r.tag not in tags
               and r.train.startswith("7.3"))
    basis = capture_basis(cap_catalog, rel, tags)
    assert basis.inferred and not basis.absent and basis.tag.endswith(f"pytorch{rel.torch}")
    assert basis.label(rel.torch_npu).startswith(f"inferred from torch_npu {basis.tag}")


def test_random_ops_break_capture_only_where_the_generator_refuses(
        cap_catalog: Catalog) -> None:
    from opcheck.core.oplist import OpUse

    oplist = OpList("m", "runtime", "runtime-dispatch", ops=[
        OpUse("aten::bernoulli_.float", count=1, dtypes=["float32"], locations=["m.py:3"])])
    by_line = {}
    for prefix in ("2.1.0", "2.6.0"):
        rel = max((r for r in cap_catalog.releases if r.has_kernels
                   and r.torch == prefix), key=lambda r: r.sort_key)
        cap = _check(cap_catalog, oplist, rel.torch_npu, hardware="910B")
        by_line[prefix] = [b for b in cap["breaks"] if b["kind"] == "random"]
    assert by_line["2.1.0"][0]["severity"] == "breaks"  # every generator call asserts
    assert by_line["2.6.0"][0]["severity"] == "maybe"  # graph-safe philox_npu_state


def test_cli_capture_in_every_format(cap_path: Path, decode: tuple[OpList, Path],
                                     cli: Callable[..., Any], tmp_path: Path) -> None:
    oplist, src = decode
    ops = tmp_path / "ops.json"
    ops.write_text(oplist.dumps(), encoding="utf-8")
    args = [str(ops), "--catalog", str(cap_path), "--capture",
            "--hardware", "910B", "--torch-npu", "2.6"]
    line = _line_of(src, "torch.masked_select")
    table = cli(*args)
    assert table.exit_code == 1, table.output  # a capture verdict NO is a finding
    assert "ACL graph capture" in table.output and f"decode_step.py:{line}" in table.output
    doc = json.loads(cli(*args, "-f", "json").output)
    assert doc["capture"]["verdict"] == "NO"
    assert "## ACL graph capture" in cli(*args, "-f", "markdown").output
    sarif = json.loads(cli(*args, "-f", "sarif").output)
    assert any(r["ruleId"] == "capture" for r in sarif["runs"][0]["results"])
    assert 'classname="opcheck.capture"' in cli(*args, "-f", "junit").output
    assert "capture" not in json.loads(cli(*args[:-5], "--torch-npu", "2.6", "-f",
                                           "json").output)
