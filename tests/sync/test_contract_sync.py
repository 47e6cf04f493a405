"""The CANN contract end to end on a small mirror: aclnn pages at two CANN versions and one
op-plugin pin → catalog tables → the checker's per-parameter, per-product verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from testpaths import FIXTURES

from opcheck.checker.check import Restriction
from opcheck.checker.contract import (
    aclnn_summary,
    cann_key,
    choose_doc,
    combine,
    contract_lookup,
)
from opcheck.core.oplist import OpUse, Signature
from opcheck.db import contract as db
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.data import ReleaseRec
from opcheck.db.engine import open_catalog
from opcheck.db.snapshot import read_snapshot, write_snapshot
from opcheck.sync.apis import AclnnCodes
from opcheck.sync.context import SyncContext
from opcheck.sync.contract import AclnnDocs, OpApiSources
from opcheck.sync.sources import MirrorSource

PIN = "abcdef1234567890abcdef1234567890abcdef12"
OP = "aten::scale_rows"


def _mirror(root: Path, fixtures: Path) -> None:
    page = (fixtures / "aclnn" / "aclnnScaleRows.md").read_text(encoding="utf-8")
    # 9.1.0: one line added at the top (every line moves by one) and DOUBLE added to rows
    newer = "<!-- 9.1.0 -->\n" + page.replace("INT8（仅用于量化）", "INT8（仅用于量化）、DOUBLE")
    for ref, text in (("v9.0.0", page), ("v9.1.0", newer)):
        d = root / "github/hicann/ops-test" / ref / "scale/docs"
        d.mkdir(parents=True)
        (d / "aclnnScaleRows.md").write_text(text, encoding="utf-8")
    # 8.5.0 documents another function only: aclnnScaleRows is not in that CANN
    old = root / "github/hicann/ops-test/v8.5.0/tile/docs"
    old.mkdir(parents=True)
    shift = "aclnnShift&aclnnInplaceShift.md"
    (old / shift).write_text((fixtures / "aclnn" / shift).read_text(encoding="utf-8"),
                             encoding="utf-8")
    pin = root / "github/Ascend/op-plugin" / PIN / "op_plugin"
    (pin / "config").mkdir(parents=True)
    (pin / "ops/opapi").mkdir(parents=True)
    src = fixtures / "aclnn" / "pin"
    (pin / "config/op_plugin_functions.yaml").write_text(
        (src / "op_plugin_functions.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (pin / "ops/opapi/ScaleRowsKernelNpuOpApi.cpp").write_text(
        (src / "ScaleRowsKernelNpuOpApi.cpp").read_text(encoding="utf-8"), encoding="utf-8")


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> SyncContext:
    root = tmp_path_factory.mktemp("mirror")
    _mirror(root, FIXTURES)
    ctx = SyncContext(MirrorSource(root))
    ctx.data.releases = [
        ReleaseRec("2.1.0.post4", "2.1.0", cann="8.0.RC1", sort_key=0, kernel_source="op_plugin",
                   op_plugin_commit="cd46cfb2"),  # its pin is not mirrored
        ReleaseRec("2.1.0.post10", "2.1.0", cann="8.0.0", sort_key=1, kernel_source="op_plugin",
                   op_plugin_commit=PIN[:8]),
        ReleaseRec("2.2.0", "2.2.0", cann="9.1.0", sort_key=2, kernel_source="op_plugin",
                   op_plugin_commit=PIN),
        ReleaseRec("2.3.1", "2.3.1", cann="9.0.0", sort_key=3, kernel_source="op_plugin",
                   op_plugin_commit=PIN),  # torch 2.3 is outside the pin's all_version
    ]
    for upstream in (AclnnCodes(), AclnnDocs(), OpApiSources()):
        upstream.collect(ctx)
    assert not ctx.failures
    return ctx


@pytest.fixture(scope="module")
def cat(synced: SyncContext, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    path = write_catalog(synced.data, tmp_path_factory.mktemp("db") / "catalog.db")
    return Catalog.load(open_catalog(path))


def test_facts_of_identical_versions_are_one_row_with_each_line(synced: SyncContext) -> None:
    data = synced.data
    assert [(f.function, f.cann, f.path) for f in data.aclnn_functions
            if f.function == "aclnnScaleRows"] == [
        ("aclnnScaleRows", "9.0.0", "scale/docs/aclnnScaleRows.md"),
        ("aclnnScaleRows", "9.1.0", "scale/docs/aclnnScaleRows.md"),
    ]
    f = next(f for f in data.aclnn_functions if f.function == "aclnnScaleRows")
    assert set(f.supported.split(",")) == {"950", "910C", "910B", "310P", "910A"}
    assert f.unsupported == "310B"
    params = {(p.param, p.canns): p for p in data.aclnn_params}
    axis = params["axis", "9.0.0,9.1.0"]  # unchanged: one row, the line of each version
    first, second = (int(x) for x in axis.lines.split(","))
    assert second == first + 1
    assert "DOUBLE" not in params["rows", "9.0.0"].dtypes.split(",")
    assert "DOUBLE" in params["rows", "9.1.0"].dtypes.split(",")
    not_bf16 = [e for e in data.aclnn_exceptions if e.kind == "not"]
    assert [(e.products, e.dtypes, e.canns) for e in not_bf16] == [
        ("910A,310P", "BFLOAT16", "9.0.0,9.1.0")]
    kinds = {c.kind for c in data.aclnn_constraints}
    assert {"rank_max", "range", "text"} <= kinds
    [src] = [s for s in data.sources if s.path.endswith("ops-test/v9.0.0")]
    assert src.url == "https://github.com/hicann/ops-test/blob/v9.0.0/" and src.rows == 1


def test_op_links_per_release(synced: SyncContext) -> None:
    rows = [(r.op, r.aclnn, r.kind, r.fallback, r.releases) for r in synced.data.op_aclnn]
    # 2.1.0.post4 names a pin that is not mirrored; torch 2.3 is outside the pin's versions
    assert rows == [
        (OP, "aclnnScaleRows", "compat", "acl_op::scale_rows", "2.1.0.post10,2.2.0"),
        (OP, "aclnnScaleRows", "exec", "", "2.1.0.post10,2.2.0"),
    ]
    assert synced.data.op_aclnn[0].path == "ScaleRowsKernelNpuOpApi.cpp"


def test_snapshot_keeps_facts_not_prose(synced: SyncContext, tmp_path: Path) -> None:
    write_snapshot(synced.data, tmp_path)
    back = read_snapshot(tmp_path)
    assert len(back.aclnn_params) == len(synced.data.aclnn_params)
    assert all(e.text == "" for e in back.aclnn_exceptions)
    assert {c.kind for c in back.aclnn_constraints} == (
        {c.kind for c in synced.data.aclnn_constraints} - {"text"})
    assert [r.releases for r in back.op_aclnn] == [r.releases for r in synced.data.op_aclnn]


def test_cann_order() -> None:
    versions = ["9.0.0", "8.0.RC3", "head", "8.5.0", "8.0.0", "8.1.RC1", "6.3.RC3.1"]
    assert sorted(versions, key=cann_key) == [
        "6.3.RC3.1", "8.0.RC3", "8.0.0", "8.1.RC1", "8.5.0", "9.0.0", "head"]
    assert cann_key("CANN 8.3.rc1") == cann_key("8.3.RC1") and cann_key("?") == ()


@pytest.mark.parametrize(("cann", "product", "version", "inferred"), [
    ("9.1.0", None, "9.1.0", False),
    ("9.0.0", None, "9.0.0", False),
    ("9.0.5", None, "9.0.0", True),  # between two documented versions: the older
    ("8.0.RC1", None, "9.0.0", True),  # before the open docs: the earliest
    ("", None, "9.1.0", True),  # unknown: the newest
])
def test_choose_doc(cat: Catalog, cann: str, product: str | None, version: str,
                    inferred: bool) -> None:
    choice = choose_doc(db.function_docs(cat.engine, "aclnnScaleRows"), cann, product)
    assert choice is not None
    assert (choice.doc.cann, choice.inferred) == (version, inferred)
    assert choice.basis.startswith("inferred from" if inferred else "CANN ")


def _target(cat: Catalog, release: str, cann: str | None = None) -> ReleaseInfo:
    from dataclasses import replace

    rel = next(r for r in cat.releases if r.torch_npu == release)
    return replace(rel, cann=cann) if cann is not None else rel


def _use(rows: str, result: str = "float16") -> OpUse:
    """A call with ``rows`` of that dtype; ``result`` lists FLOAT16 and BFLOAT16 only."""
    return OpUse(OP, count=1, signatures=[
        Signature(inputs={"rows": rows}, outputs=[result], count=1)])


def _violated(found: list[Restriction]) -> list[Restriction]:
    return [r for r in found if r.violated]


def test_dtype_excluded_on_some_products(cat: Catalog) -> None:
    lookup = contract_lookup(cat, None)
    assert lookup is not None
    rows, result = _violated(lookup(_use("bfloat16", "bfloat16"), _target(cat, "2.2.0")))
    # rows: 不支持BFLOAT16 on 910A/310P, and 仅支持FLOAT16 on 950; result: the first only
    assert (rows.api, rows.source, rows.param, rows.dtypes_seen_outside) == (
        "aclnnScaleRows", "cann", "rows", ("BFLOAT16",))
    assert (rows.products_failing, rows.products_fine) == (("910A", "310P", "950"),
                                                           ("910B", "910C"))
    assert (result.param, result.products_failing) == ("result", ("910A", "310P"))
    r = result
    assert r.error == "161002 ACLNN_ERR_PARAM_INVALID"
    assert r.basis == "CANN 9.1.0 docs" and not r.inferred
    # the "不支持BFLOAT16" line below the table, in the 9.1.0 page (one line lower than 9.0.0)
    line = _line("不支持BFLOAT16")
    assert r.link == f"https://github.com/hicann/ops-test/blob/v9.1.0/scale/docs/aclnnScaleRows.md#L{line + 1}"


def test_only_statement_and_hardware(cat: Catalog) -> None:
    on_950 = contract_lookup(cat, "950")
    assert on_950 is not None
    [r] = _violated(on_950(_use("float32"), _target(cat, "2.2.0")))
    assert r.products_failing == ("950",) and r.dtypes_seen_outside == ("FLOAT",)
    on_a2 = contract_lookup(cat, "A2")
    assert on_a2 is not None
    found = on_a2(_use("float32"), _target(cat, "2.2.0"))
    assert found and not _violated(found)  # judged and accepted: said so
    assert found[0].products_fine == ("910B",)


def test_unsupported_product(cat: Catalog) -> None:
    lookup = contract_lookup(cat, "310B")
    assert lookup is not None
    [r] = lookup(_use("float16"), _target(cat, "2.2.0"))
    assert r.unsupported and r.violated and r.products_failing == ("310B",)


def test_a_dtype_added_in_a_newer_cann(cat: Catalog) -> None:
    lookup = contract_lookup(cat, "A2")
    assert lookup is not None
    assert _violated(lookup(_use("float64"), _target(cat, "2.2.0", "9.0.0")))
    assert not _violated(lookup(_use("float64"), _target(cat, "2.2.0", "9.1.0")))


def test_inferred_facts_are_labelled(cat: Catalog) -> None:
    lookup = contract_lookup(cat, "910A")
    assert lookup is not None
    # 2.1.0.post4: CANN 8.0.RC1 has no open docs, and its pin is not mirrored
    [r] = _violated(lookup(_use("bfloat16", "bfloat16"), _target(cat, "2.1.0.post4")))
    assert r.inferred
    assert "inferred from CANN 9.0.0 docs (CANN 8.0.RC1 predates" in r.basis
    assert "kernel sources of 2.1.0.post10" in r.basis
    # no release of the torch 2.3 line has links: the nearest linked release's, labelled
    [r] = _violated(lookup(_use("bfloat16"), _target(cat, "2.3.1")))
    assert r.inferred and "kernel sources of 2.2.0 (the pin of 2.3.1 is not mirrored)" in r.basis


def test_one_branch_rejecting_is_not_counted_when_another_accepts() -> None:
    from opcheck.checker.contract import _one_path

    def rej(fn: str, products: tuple[str, ...]) -> Restriction:
        return Restriction(fn, f"{fn} rejects", ("FLOAT",), source="cann",
                           products_failing=products)

    judged = {
        "aclnnMm": ([Restriction("aclnnMm", "accepts", source="cann")], ("910B", "910C")),
        "aclnnMmWeightNz": ([rej("aclnnMmWeightNz", ("910B", "910C"))], ("910B", "910C")),
    }
    assert not [r for r in _one_path(judged) if r.violated]
    judged["aclnnMm"] = ([rej("aclnnMm", ("910C",))], ("910B", "910C"))
    kept = [r for r in _one_path(judged) if r.violated]
    assert {r.products_failing for r in kept} == {("910C",)}


def test_contract_outweighs_the_generic_api_docs(cat: Catalog) -> None:
    api_doc = Restriction("torch.scale_rows", "only fp16", ("fp32",), source="api_docs")

    def docs(_use: OpUse, _target: ReleaseInfo) -> list[Restriction]:
        return [api_doc]

    both = combine(contract_lookup(cat, "A2"), docs)
    assert both is not None
    found = both(_use("float32"), _target(cat, "2.2.0"))
    assert not _violated(found) and "outweighed by the aclnn contract" in found[-1].text
    # where the contract rejects the call, both findings count
    on_910a = combine(contract_lookup(cat, "910A"), docs)
    assert on_910a is not None
    assert len(_violated(on_910a(_use("bfloat16"), _target(cat, "2.2.0")))) == 2


def test_op_history_aclnn_section(cat: Catalog) -> None:
    [entry] = aclnn_summary(cat, OP)
    assert entry["function"] == "aclnnScaleRows"
    assert entry["releases"] == ["2.1.0.post10", "2.2.0"]
    assert [d["cann"] for d in entry["docs"]] == ["9.0.0", "9.1.0"]
    assert entry["docs"][0]["url"].endswith("/v9.0.0/scale/docs/aclnnScaleRows.md")
    rows = next(p for p in entry["docs"][0]["params"] if p["param"] == "rows")
    assert "BFLOAT16" in rows["by_product"]["910B"]
    assert "BFLOAT16" not in rows["by_product"]["910A"]
    assert rows["by_product"]["950"] == ["FLOAT16"]


def test_a_compat_kernel_on_a_cann_without_the_function_is_a_slow_path(cat: Catalog) -> None:
    lookup = contract_lookup(cat, "A2")
    assert lookup is not None
    found = lookup(_use("float16"), _target(cat, "2.2.0", "8.5.0"))
    [slow] = [r for r in found if r.slow]
    assert not slow.violated and slow.inferred
    assert "acl_op::scale_rows" in slow.text and "first documented in 9.0.0" in slow.text
    assert not [r for r in lookup(_use("float16"), _target(cat, "2.2.0", "9.0.0")) if r.slow]


def test_dtype_support_for_explain(cat: Catalog) -> None:
    from opcheck.checker.contract import dtype_support

    s = dtype_support(cat, "aclnnScaleRows", "DT_BFLOAT16", "9.1.0")
    assert s is not None and (s.dtype, s.rejects) == ("BFLOAT16", ("910A", "310P"))
    assert s.basis == "CANN 9.1.0 docs" and s.url.endswith(f"#L{_line('不支持BFLOAT16') + 1}")
    old = dtype_support(cat, "aclnnScaleRows", "bfloat16", "8.0.RC1")
    assert old is not None and old.basis.startswith("inferred from CANN 9.1.0 docs, the newest")
    assert dtype_support(cat, "aclnnNowhere", "bfloat16") is None


def _line(needle: str) -> int:
    page = (FIXTURES / "aclnn/aclnnScaleRows.md").read_text(encoding="utf-8")
    return next(i for i, t in enumerate(page.splitlines(), 1) if needle in t)
