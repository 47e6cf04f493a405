"""The data-truth fixes end to end: the sparse kernel of ``_coalesce`` on the real registry
files, and a sync of release tags the old tag pattern skipped (small mirror)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from opcheck.checker.resolve import Resolver
from opcheck.core.vocab import Status
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import CatalogData, KernelRec, OperatorRec, ReleaseRec
from opcheck.db.engine import open_catalog
from opcheck.db.snapshot import read_snapshot, write_snapshot
from opcheck.scrapers import opplugin, wheel
from opcheck.scrapers.pytorch import parse_native_functions
from opcheck.scrapers.rows import Origin
from opcheck.sync.kernels import _facts
from opcheck.sync.pipeline import Universe, collect
from opcheck.sync.sources import MirrorSource

OP_PLUGIN = "github/Ascend/op-plugin"


@pytest.mark.upstream
@pytest.mark.torch
def test_real_coalesce_is_a_sparse_npu_kernel_from_2_1_0_post10(upstream: Path,
                                                                tmp_path: Path) -> None:
    """op_plugin_functions.yaml at the commit 2.1.0.post10 pins registers ``_coalesce`` with
    ``sparse: [v2.1, newest]``, the 2.9.0.post6 wheel with ``sparse: op_api``; 2.1.0.post4's
    pin has no entry. ATen dispatches ``_coalesce`` to sparse kernels only."""
    from opcheck.sync.pipeline import installed_universe

    def plugin(commit: str, name: str) -> dict[str, object]:
        path = f"{OP_PLUGIN}/{commit}/op_plugin/config/{name}"
        rows = opplugin.parse_functions((upstream / path).read_text(encoding="utf-8"),
                                        origin=Origin(path), torch="2.1")
        return dict(_facts(r for r in rows if r.torch in (None, "2.1")))

    post4 = plugin("cd46cfb2d372ed80fb81d40755b317a36bd499c9", "v2r1/op_plugin_functions.yaml")
    post10 = plugin("65b69b64d8314db12e1a5a5e19bcc7b2b567cbca", "op_plugin_functions.yaml")
    codegen = "pypi/torch-npu/2.9.0.post6/torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
    post6 = dict(_facts(wheel.parse_codegen((upstream / codegen).read_text(encoding="utf-8"),
                                            origin=Origin(codegen))))
    assert "aten::_coalesce" not in post4
    d = CatalogData()
    sid = d.add_source("op_plugin", "x")
    for i, (rel, torch, facts) in enumerate((("2.1.0.post4", "2.1.0", post4),
                                             ("2.1.0.post10", "2.1.0", post10),
                                             ("2.9.0.post6", "2.9.0", post6))):
        d.releases.append(ReleaseRec(rel, torch, sort_key=i, has_cpu_fallback=True,
                                     kernel_source="op_plugin", source_id=sid))
        if "aten::_coalesce" in facts:
            d.kernels.append(KernelRec("aten::_coalesce", rel, facts["aten::_coalesce"], sid))
    [op] = [o for o in installed_universe().operators if o.op == "aten::_coalesce"]
    assert op.dispatch == ("SparseCPU", "SparseCUDA", "SparseMPS")
    d.operators.append(OperatorRec(op.op, "aten", "_coalesce", "", op.schema, "",
                                   ",".join(op.dispatch), op.kernel_kind, "", sid))
    cat = Catalog.load(open_catalog(write_catalog(d, tmp_path / "c.sqlite")))
    for rel in ("2.1.0.post10", "2.9.0.post6"):
        res = Resolver(cat, rel).resolve("aten::_coalesce")
        assert (res.status, res.kernel) == (Status.NPU, "aclnn (sparse)"), rel
    assert Resolver(cat, "2.1.0.post4").resolve("aten::_coalesce").status is Status.UNSUPPORTED


# --- a sync of the tags the old pattern skipped --------------------------------------------------

RC_ROWS = (
    # the capital-V hotfix tag: pin in the mirror → exact facts; its CANN is 7.2.0's, inferred
    "V7.2.0.1-pytorch2.1.0\t7.2.0.1\t2.1.0\t2.1.0.post18\tc210c210\t7.2.0\t2025-11-12\n"
    # an rc hotfix whose pin the mirror lacks: the branch its .gitmodules names, not "none"
    "v5.0.rc3.3-pytorch1.11.0\t5.0.rc3.3\t1.11.0\t1.11.0.post7\t725c521e\t5.0.rc3\t2023-12-08\n"
)


@pytest.fixture
def rc_mirror(fixtures: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "mirror"
    shutil.copytree(fixtures / "mirror", dest)
    with (dest / "releases.tsv").open("a", encoding="utf-8") as fh:
        fh.write(RC_ROWS)
    shutil.copytree(dest / OP_PLUGIN / "c111c111", dest / OP_PLUGIN / "5.0.rc3")
    return dest


def test_sync_of_rc_and_capital_v_tags(rc_mirror: Path, fixtures: Path, tmp_path: Path) -> None:
    origin = Origin("torchgen/packaged/ATen/native/native_functions.yaml", ref="torch-test")
    text = (fixtures / "universe.yaml").read_text(encoding="utf-8")
    universe = Universe(parse_native_functions(text, origin=origin), "2.6.0", origin)
    res = collect(MirrorSource(rc_mirror), universe=universe)
    assert res.failures == []
    rels = {r.torch_npu: r for r in res.data.releases}
    post18 = rels["2.1.0.post18"]
    assert (post18.tag, post18.train, post18.kernel_source, post18.cann, post18.cann_inferred) == (
        "V7.2.0.1-pytorch2.1.0", "7.2.0.1", "op_plugin", "8.3.RC1", True)
    post7 = rels["1.11.0.post7"]
    assert (post7.kernel_source, post7.op_plugin_commit) == ("op_plugin_branch", "725c521e")
    assert not rels["2.1.0.post17"].cann_inferred
    # the mark survives the snapshot and reaches the catalog's read model
    write_snapshot(res.data, tmp_path / "snap")
    back = {r.torch_npu: r for r in read_snapshot(tmp_path / "snap").releases}
    assert back["2.1.0.post18"].cann_inferred and not back["2.1.0.post17"].cann_inferred
    cat = Catalog.load(open_catalog(write_catalog(res.data, tmp_path / "c.sqlite")))
    assert cat.release("2.1.0.post18").cann_inferred
    assert Resolver(cat, "2.1.0.post18").resolve("aten::add.out").status is Status.NPU
