"""acl_op calls get an engine from the op types their kernel runs (issue 38): on 310P (jit
compile on by default) ``index_put_`` takes the acl_op path, whose kernel runs ``IndexPutV2``
pinned to the AI CPU on one branch (``_exclude_engines``) and left to CANN on the other; the
open libraries build IndexPutV2 only for the 950 family, so on 310P it is a closed built-in.
``--capture`` names the op types that break capture. The catalog is the bundled snapshot plus
the kernel-path facts and the acl_op op types read from the mirror."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.checker.capture import capture_check
from opcheck.checker.check import check
from opcheck.checker.kernel_path import ACL_OP, Settings, kernel_path_hook
from opcheck.core.oplist import OpList, OpUse, Signature
from opcheck.db import aclops as db
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

pytestmark = [pytest.mark.upstream]

RELEASE = "2.6.0.post5"


@pytest.fixture(scope="module")
def cat(upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot
    from opcheck.sync.aclops import AclOpSources
    from opcheck.sync.context import SyncContext
    from opcheck.sync.kernel_path import KernelPathRules
    from opcheck.sync.sources import MirrorSource

    data = read_snapshot(snapshot_dir())
    ctx = SyncContext(MirrorSource(upstream), workers=0)
    ctx.data = data
    KernelPathRules().collect(ctx)
    AclOpSources().collect(ctx)
    assert not ctx.failures, ctx.failures
    path = write_catalog(data, tmp_path_factory.mktemp("aclop") / "catalog.sqlite")
    return Catalog.load(make_engine(path))


def _oplist(*ops: str) -> OpList:
    sig = Signature(inputs={"self": "float32", "indices": "int64", "values": "float32"},
                    outputs=["float32"], count=3)
    return OpList("m", "trace", "aten", ops=[
        OpUse(op, count=3, dtypes=["float32"], signatures=[sig], locations=["m.py:7"])
        for op in ops])


def test_rows_per_release(cat: Catalog) -> None:
    rows = db.types_of_ops(cat.engine, ["aten::index_put_"], RELEASE)["aten::index_put_"]
    assert {r.op_type for r in rows} >= {"IndexPutV2"}
    put = [r for r in rows if r.op_type == "IndexPutV2"]
    assert {r.engine for r in put} == {"aicpu", ""}
    assert all(r.path == "ops/aclops/IndexPutKernelNpu.cpp" and r.url for r in put)
    # the reverse read: the ops whose acl_op kernels run Fill in that release
    fill = {r.op for r in db.ops_running(cat.engine, "fill", RELEASE) if r.direct}
    assert {"aten::fill_.Scalar", "aten::fill_.Tensor", "aten::ones_like"} <= fill


def test_check_310p_gives_index_put_an_engine(cat: Catalog) -> None:
    rel = cat.release(RELEASE)
    report = check(cat, _oplist("aten::index_put_"), rel,
                   kernel_paths=kernel_path_hook(cat, "310P", Settings()))
    [f] = report.ops
    assert f.path == {"310P": ACL_OP}
    engine = f.engine or {}
    assert engine["path"] == "acl_op" and engine["soc"] == "ascend310p"
    put = [t for t in engine["op_types"] if t["op_type"] == "IndexPutV2"]
    assert {t["engine"] for t in put} >= {"aicpu"}
    assert all("is_aicpu_valid" in t["when"] for t in put)
    # the open libraries build IndexPutV2 for the 950 family only: a closed built-in on 310P
    assert all(t["kernel"] == "closed" and "closed built-in" in t["note"] for t in put)
    [r] = [r for r in f.restrictions if r.source == "aclop_engine"]
    assert r.text.startswith("310P: the acl_op kernel runs CANN op types IndexPutV2")
    assert "[AI CPU (slow path)] if (is_aicpu_valid(" in r.text and r.slow
    assert "IndexPutKernelNpu.cpp:" in r.text
    assert {b["op_type"] for b in f.binaries} >= {"IndexPutV2"}


def test_check_910b_keeps_the_aclnn_path(cat: Catalog) -> None:
    report = check(cat, _oplist("aten::index_put_"), cat.release(RELEASE),
                   kernel_paths=kernel_path_hook(cat, "910B", Settings()))
    [f] = report.ops
    assert f.path == {"910B": "aclnn"}
    assert not any(r.source == "aclop_engine" for r in f.restrictions)


def test_capture_names_the_op_types(cat: Catalog) -> None:
    rel = cat.release(RELEASE)
    ol = _oplist("aten::fill_.Scalar")
    report = check(cat, ol, rel, kernel_paths=kernel_path_hook(cat, "310P", Settings()))
    got = capture_check(cat, report, ol, rel)
    [b] = [b for b in got["breaks"] if b["kind"] == "acl_op"]
    assert b["op_types"][0] == "Fill"
    assert "Current working aclop is Fill" in b["why"]


def test_users_of_an_op_type(cat: Catalog) -> None:
    from opcheck.checker.aclop import acl_op_users

    fill = acl_op_users(cat, "Fill", RELEASE)
    assert fill is not None and fill.release == RELEASE
    assert {"aten::fill_.Scalar", "aten::fill_.Tensor", "aten::ones_like"} <= set(fill.ops)
    # zeros(…) runs zero_ (ZerosLike) itself; zeros_like on a CPU device fills: through fill_
    assert "aten::zeros_like" in fill.through
    assert fill.sites[0][0].startswith("ops/aclops/FillKernelNpu.cpp:")
    assert "acl_op kernels that run Fill in torch_npu 2.6.0.post5: " in fill.summary()
    put = acl_op_users(cat, "indexputv2", None)  # as a log may spell it; newest release
    assert put is not None and "aten::index_put_" in put.through + put.ops
    assert "aten::_index_put_impl_" in put.aicpu
    assert acl_op_users(cat, "NoSuchOpType", RELEASE) is None
