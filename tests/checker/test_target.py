"""The target of a check: ``--cann`` is kept and never silently swapped, inferred CANN and
approximate kernel facts are said in every output, sparse kernels count as NPU kernels."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from opcheck.checker.check import check
from opcheck.checker.formats import REPORT_FORMATS
from opcheck.checker.formats.text import target_line
from opcheck.checker.queries import select_target
from opcheck.checker.resolve import Resolver
from opcheck.checker.target import cann_key, compare_cann, describe
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.vocab import Status
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import CatalogData, KernelFacts, KernelRec, OperatorRec, ReleaseRec
from opcheck.db.engine import open_catalog

ADD = KernelFacts(op_api=True, acl_op=True)
SPARSE = KernelFacts(status="sparse", op_api=True)

# torch_npu, torch, train, CANN, kernel source, CANN inferred (facts as the release matrix has
# them: 2.1.0.post8 read at a branch head, 2.5.1.post2 a hotfix no table names)
RELEASES = [
    ("2.1.0.post8", "2.1.0", "6.0.rc3", "8.0.RC3", "op_plugin_branch", False),
    ("2.1.0.post10", "2.1.0", "6.0.0", "8.0.0", "op_plugin", False),
    ("2.4.0", "2.4.0", "6.0.rc3", "8.0.RC3", "op_plugin", False),
    ("2.5.1", "2.5.1", "7.0.0", "8.1.RC1", "op_plugin", False),
    ("2.5.1.post2", "2.5.1", "7.1.0.1", "8.2.RC1", "op_plugin", True),
    ("2.6.0", "2.6.0", "7.1.0", "8.2.RC1", "wheel", False),
    ("2.6.0.post6", "2.6.0", "7.3.1", "", "op_plugin", False),
]


def _data() -> CatalogData:
    d = CatalogData()
    src = d.add_source("op_plugin", "github/Ascend/op-plugin/x/op_plugin/config/op_plugin_functions.yaml")
    for i, (npu, torch, train, cann, kind, inferred) in enumerate(RELEASES):
        d.releases.append(ReleaseRec(npu, torch, train, cann, "3.9", sort_key=i,
                                     has_cpu_fallback=True, kernel_source=kind, source_id=src,
                                     kernel_source_id=src, cann_inferred=inferred))
        d.kernels.append(KernelRec("aten::add.Tensor", npu, ADD, src))
        if npu != "2.1.0.post8":
            d.kernels.append(KernelRec("aten::_coalesce", npu, SPARSE, src))
            # a dense op with only a sparse registration: dense tensors get no kernel from it
            d.kernels.append(KernelRec("aten::sub.Tensor", npu, SPARSE, src))
    for op, dispatch in (("aten::add.Tensor", "CPU,CUDA"), ("aten::sub.Tensor", "CPU,CUDA,SparseCPU"),
                         ("aten::_coalesce", "SparseCPU,SparseCUDA,SparseMPS")):
        name, _, overload = op.removeprefix("aten::").partition(".")
        d.operators.append(OperatorRec(op, "aten", name, overload, "", "", dispatch, "backend",
                                       "", src))
    return d


@pytest.fixture(scope="module")
def cat_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalog(_data(), tmp_path_factory.mktemp("target") / "c.sqlite")


@pytest.fixture(scope="module")
def cat(cat_path: Path) -> Catalog:
    return Catalog.load(open_catalog(cat_path))


def _oplist() -> OpList:
    return OpList(model="m", method="static", ir="aten",
                  ops=[OpUse("aten::add.Tensor", 2, ["float32"]), OpUse("aten::_coalesce", 1)])


def test_cann_order() -> None:
    order = ["6.3.RC3", "6.3.RC3.1", "8.0.RC2.alpha002", "8.0.RC2", "8.0.RC3", "8.0.0", "8.0.1",
             "8.1.RC1", "8.5.0", "9.0.0", "26.0.0"]
    assert sorted(order, key=cann_key) == order
    assert cann_key("CANN 8.0.rc3") == cann_key("8.0.RC3")
    assert compare_cann("8.0.RC3", "8.1.RC1") == "older"
    assert compare_cann("9.0.0", "8.5.0") == "newer"
    assert compare_cann("x", "8.5.0") == ""
    for bad in ("", "8", "eight.0", "8.0.RC3 beta"):
        with pytest.raises(ValueError):
            cann_key(bad)


def test_torch_npu_with_another_cann_keeps_the_cann_and_warns(cat: Catalog) -> None:
    """The issue's case: torch_npu 2.5.1 pairs with CANN 8.1.RC1; 8.0.RC3 was installed."""
    rel = select_target(cat, torch_npu="2.5.1", cann="8.0.RC3")
    assert rel.torch_npu == "2.5.1"
    report = check(cat, _oplist(), rel, cann="8.0.RC3")
    t = report.target
    assert (t["torch_npu"], t["cann"], t["cann_paired"], t["cann_basis"]) == (
        "2.5.1", "8.0.RC3", "8.1.RC1", "requested")
    [warning] = [w for w in report.warnings if "CANN 8.0.RC3" in w]
    assert "torch_npu 2.5.1 pairs with CANN 8.1.RC1 (train 7.0.0)" in warning
    assert "8.0.RC3 is older than 8.1.RC1" in warning
    assert target_line(report) == ("torch_npu 2.5.1 (torch 2.5.1, CANN 8.0.RC3 (requested; the "
                                   "release pairs with CANN 8.1.RC1))")
    # asking for the CANN the release pairs with is no warning, however it is spelled
    same = check(cat, _oplist(), rel, cann="cann 8.1.rc1")
    assert same.target["cann"] == "8.1.RC1" and same.target["cann_basis"] == "table"
    assert not any("asked for" in w for w in same.warnings)


def test_cann_alone_picks_its_release_or_the_newest_older_pairing(cat: Catalog) -> None:
    assert select_target(cat, cann="8.0.RC3").torch_npu == "2.4.0"
    assert select_target(cat, cann="8.0.RC3", installed_torch="2.1.2").torch_npu == "2.1.0.post8"
    # 8.1.RC2 pairs with nothing: the newest release of the newest older CANN (8.1.RC1) …
    rel = select_target(cat, cann="8.1.RC2")
    assert rel.torch_npu == "2.5.1"
    # … and the report names the difference: never a silent swap
    report = check(cat, _oplist(), rel, cann="8.1.RC2")
    assert report.target["cann"] == "8.1.RC2"
    assert any("8.1.RC2 is newer than 8.1.RC1" in w for w in report.warnings)
    # an explicit torch line stays: the newest older pairing on that line
    assert select_target(cat, cann="8.1.RC1", torch="2.1").torch_npu == "2.1.0.post10"
    # a CANN newer than every pairing: the newest pairing, with its warning
    assert select_target(cat, cann="9.1.0").torch_npu == "2.6.0"
    with pytest.raises(UsageError, match=r"no torch_npu release for CANN 7\.0\.0 or older"):
        select_target(cat, cann="7.0.0")
    with pytest.raises(UsageError, match="not a CANN version"):
        select_target(cat, cann="latest")


def test_inferred_cann_and_unknown_pairing_are_marked(cat: Catalog) -> None:
    report = check(cat, _oplist(), cat.release("2.5.1.post2"))
    assert report.target["cann_basis"] == "inferred"
    assert target_line(report).endswith("CANN 8.2.RC1 (inferred from its train))")
    assert "(inferred from its train)" in REPORT_FORMATS.render("markdown", report)
    unknown = check(cat, _oplist(), cat.release("2.6.0.post6"), cann="8.5.0")
    assert unknown.target["cann"] == "8.5.0" and unknown.target["cann_paired"] == ""
    assert any("name no CANN for torch_npu 2.6.0.post6" in w for w in unknown.warnings)


def test_approximate_kernel_facts_are_said_in_table_and_markdown(cat: Catalog) -> None:
    from io import StringIO

    from rich.console import Console

    from opcheck.cli.render import render_report

    report = check(cat, _oplist(), cat.release("2.1.0.post8"))
    [warning] = [w for w in report.warnings if "approximate" in w]
    assert "op-plugin branch of train 6.0.rc3" in warning
    assert f"> Warning: {warning}" in REPORT_FORMATS.render("markdown", report)
    out = StringIO()
    render_report(report, Console(file=out, width=400))
    assert "kernel facts of torch_npu 2.1.0.post8 are approximate" in out.getvalue()
    exact = check(cat, _oplist(), cat.release("2.1.0.post10"))
    assert not any("approximate" in w for w in exact.warnings)


def test_describe_is_what_check_puts_in_the_report(cat: Catalog) -> None:
    rel = cat.release("2.4.0")
    target, warnings = describe(rel, None)
    assert target == {"torch_npu": "2.4.0", "torch": "2.4.0", "cann": "8.0.RC3",
                      "cann_paired": "8.0.RC3", "cann_basis": "table", "train": "6.0.rc3",
                      "pythons": "3.9", "kernel_source": "op_plugin"}
    assert warnings == []
    assert check(cat, _oplist(), rel).target == target


def test_sparse_kernel_is_an_npu_kernel_for_a_sparse_only_op(cat: Catalog) -> None:
    res = Resolver(cat, "2.1.0.post10").resolve("aten::_coalesce")
    assert (res.status, res.kernel) == (Status.NPU, "aclnn (sparse)")
    assert "sparse tensors" in res.reason
    # before op-plugin registered it: a sparse op never falls back to the CPU
    assert Resolver(cat, "2.1.0.post8").resolve("aten::_coalesce").status is Status.UNSUPPORTED
    # a dense op with a sparse-only registration: dense tensors take the CPU fallback
    dense = Resolver(cat, "2.1.0.post10").resolve("aten::sub.Tensor")
    assert dense.status is Status.CPU_FALLBACK


def test_cli_keeps_the_cann(cat_path: Path, tmp_path: Path,
                            cli: Callable[..., Result]) -> None:
    ops = tmp_path / "ops.json"
    ops.write_text(_oplist().dumps(), encoding="utf-8")
    res = cli("check", str(ops), "--torch-npu", "2.5.1", "--cann", "8.0.RC3", "-f", "json",
              "--catalog", str(cat_path))
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["target"]["cann"] == "8.0.RC3" and doc["target"]["cann_paired"] == "8.1.RC1"
    assert any("pairs with CANN 8.1.RC1" in w for w in doc["warnings"])
    table = cli("check", str(ops), "--torch-npu", "2.5.1", "--cann", "8.0.RC3",
                "--catalog", str(cat_path))
    assert "CANN 8.0.RC3 (requested; the release pairs with CANN 8.1.RC1)" in table.output
    bad = cli("check", str(ops), "--cann", "7.0.0", "--catalog", str(cat_path))
    assert bad.exit_code == 2 and "no torch_npu release for CANN 7.0.0 or older" in bad.output


def test_releases_command_marks_inferred_cann_and_approximate_facts(
        cat_path: Path, cli: Callable[..., Result]) -> None:
    res = cli("releases", "--catalog", str(cat_path))
    assert res.exit_code == 0, res.output
    rows = {line.split("\t")[0]: line.split("\t") for line in res.output.splitlines()}
    assert rows["2.5.1.post2"][3] == "8.2.RC1 (inferred)"
    assert rows["2.5.1"][3] == "8.1.RC1"
    assert rows["2.1.0.post8"][-1] == "op_plugin_branch (approximate)"
    doc = json.loads(cli("releases", "-f", "json", "--catalog", str(cat_path)).output)
    inferred = {r["torch_npu"]: r["cann_inferred"] for r in doc["releases"]}
    assert inferred["2.5.1.post2"] is True and inferred["2.5.1"] is False
