"""explain ties an acl_op op type named in a log back to the ATen ops whose acl_op kernels run
it (issue 38): "Current working aclop is Fill" under graph capture, and an AI CPU exception in
``IndexPutV2``. The logs are written for these tests in the shape of public reports
(vllm-project/vllm-ascend#3960 for the capture error). The catalog is the bundled snapshot plus
the acl_op op types read from the mirror."""

from __future__ import annotations

from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.contrib.explain.records import parse_record
from opcheck.contrib.explain.report import report_log
from opcheck.contrib.explain.scan import explain_file
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

LOGS = TESTS / "fixtures" / "logs"
RELEASE = "2.6.0.post5"


def test_capture_line_names_the_op_type() -> None:
    line = ("RuntimeError: Cannot run aclop operators during NPU graph capture. Current working "
            "aclop is MatMul. If you need this call to be captured, please try to set …")
    assert [(f.kind, f.kernel) for f in parse_record(line, 1) if f.kernel] == [("kernel", "MatMul")]


@pytest.fixture(scope="module")
def cat(upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot
    from opcheck.sync.aclops import AclOpSources
    from opcheck.sync.context import SyncContext
    from opcheck.sync.sources import MirrorSource

    data = read_snapshot(snapshot_dir())
    ctx = SyncContext(MirrorSource(upstream), workers=0)
    ctx.data = data
    AclOpSources().collect(ctx)
    assert not ctx.failures, ctx.failures
    path = write_catalog(data, tmp_path_factory.mktemp("aclop-explain") / "catalog.sqlite")
    return Catalog.load(make_engine(path))


@pytest.mark.upstream
def test_fill_under_capture(cat: Catalog) -> None:
    rep = report_log(explain_file(LOGS / "aclop_capture_fill.log"), cat, torch_npu=RELEASE)
    [p] = [p for p in rep.problems if "Fill" in p.kernels]
    [o] = [o for o in p.op_types if o.op_type == "Fill"]
    assert o.acl_op is not None and o.acl_op.release == RELEASE
    assert o.acl_op.ops[:2] == ["aten::fill_.Scalar", "aten::fill_.Tensor"]
    assert "aten::zeros_like" in o.acl_op.through
    assert o.acl_op.sites[0].startswith("ops/aclops/FillKernelNpu.cpp:")
    [change] = [c for c in p.changes if c.startswith("the call running Fill")]
    assert "fill_.Scalar" in change and "allow_internal_format = False" in change
    assert "acl_op" in p.as_dict()["op_types"][0]


@pytest.mark.upstream
def test_aicpu_exception_under_index_put(cat: Catalog) -> None:
    rep = report_log(explain_file(LOGS / "aclop_aicpu_indexput.log"), cat, torch_npu=RELEASE)
    [p] = [p for p in rep.problems if "IndexPutV2" in p.kernels]
    [o] = [o for o in p.op_types if o.op_type == "IndexPutV2"]
    assert o.acl_op is not None
    assert {"aten::index_put_", "aten::_index_put_impl_"} <= set(o.acl_op.aicpu)
    assert all(s.startswith("ops/aclops/IndexPutKernelNpu.cpp:") for s in o.acl_op.aicpu_sites)
    [change] = [c for c in p.changes if c.startswith("IndexPutV2 ran on the AI CPU")]
    assert "_exclude_engines" not in change and "IndexPutKernelNpu.cpp:" in change
