"""torch_npu's HCCL process-group facts, parsed from its real sources at three eras (5.0: AVG
unchecked; 6.0: AVG refused; 7.x/26.x: AVG summed then divided) and from small fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import hccl
from opcheck.scrapers.rows import Origin

OLD, MID, NEW = "v5.0.1.2-pytorch2.0.1", "v6.0.0.1-pytorch2.3.1", "v26.1.0-pytorch2.7.1"
PY_271 = "v7.2.0-pytorch2.7.1"


def _rows(upstream: Path, tag: str) -> list[tuple[str, hccl.HcclRow]]:
    out = []
    for rel in hccl.FILES:
        path = upstream / "github/Ascend/pytorch" / tag / rel
        if path.is_file():
            origin = Origin(f"github/Ascend/pytorch/{tag}/{rel}")
            out += [(rel, r) for r in hccl.parse(path.read_text(errors="replace"), origin)]
    return out


def _line(upstream: Path, tag: str, rel: str, n: int) -> str:
    return (upstream / "github/Ascend/pytorch" / tag / rel).read_text(
        errors="replace").splitlines()[n - 1]


@pytest.mark.upstream
@pytest.mark.parametrize("tag", [OLD, MID, NEW, PY_271])
def test_every_fact_points_at_its_line(upstream: Path, tag: str) -> None:
    rows = _rows(upstream, tag)
    assert rows
    for rel, r in rows:
        text = _line(upstream, tag, rel, r.line)
        if r.kind == hccl.COLLECTIVE:
            assert f"ProcessGroupHCCL::{r.subject}(" in text
        elif r.kind == hccl.REFUSED:
            assert "does not support" in text
        elif r.kind == hccl.DTYPE_MAP:
            assert r.value in text
        elif r.kind == hccl.SYMBOL:
            assert f"({r.subject})" in text or f", {r.subject})" in text
        elif r.kind == hccl.EMULATED:
            assert "warnings.warn" in text or "HCCL doesn't support" in text
        elif r.kind == hccl.CHECKS_DTYPE:
            assert "checkSupportedDataType(" in text
        elif r.kind == hccl.AVG_DIVIDE:
            assert "ReduceOp::AVG" in text


@pytest.mark.upstream
def test_avg_changes_across_eras(upstream: Path) -> None:
    def avg(tag: str) -> str:
        return next(r.value for _, r in _rows(upstream, tag)
                    if r.kind == hccl.REDUCE_OP and r.subject == "AVG")

    # 2.0.1-era: no map entry, no refusal: hcclOp[AVG] gives the enum's zero (a plain sum)
    assert avg(OLD) == hccl.UNCHECKED
    assert avg(MID) == hccl.REFUSED_OP  # "Cannot use ReduceOp.AVG with HCCL"
    assert avg(NEW) == hccl.SUM_THEN_DIVIDE
    new = _rows(upstream, NEW)
    assert {r.subject for _, r in new if r.kind == hccl.AVG_DIVIDE} >= {
        "allreduce", "reduce", "reduce_scatter", "_reduce_scatter_base"}


@pytest.mark.upstream
def test_refusals_dtypes_and_alltoall_rules(upstream: Path) -> None:
    new = _rows(upstream, NEW)
    refused = {r.subject: r for _, r in new if r.kind == hccl.REFUSED}
    # gather refused unless the compatible implementation runs on a compatible SoC
    assert refused["gather"].value == "!use_compatible_impl || !is_compatible_soc"
    assert refused["recvAnysource"].message == "ProcessGroupHCCL does not support recv"
    checked = {r.value for _, r in new if r.kind == hccl.DTYPE_CHECKED}
    assert "HCCL_DATA_TYPE_INT64" in checked and "HCCL_DATA_TYPE_FP64" not in checked
    mapped = {r.subject: r.value for _, r in new if r.kind == hccl.DTYPE_MAP}
    assert mapped["float64"] == "HCCL_DATA_TYPE_FP64" and "complex64" not in mapped
    zero = next(r for _, r in new if r.kind == hccl.ZERO_DIM)
    assert zero.subject == "alltoall_base" and zero.message.startswith("Scalar tensors (0-dim")
    assert zero.value == "inputSplitSizes.empty() && outputSplitSizes.empty()"
    uneven = next(r for _, r in new if r.kind == hccl.UNEVEN)
    assert (uneven.subject, uneven.value) == ("alltoall_base", "HcclAlltoAllV")
    symbols = {r.subject for _, r in new if r.kind == hccl.SYMBOL}
    assert {"HcclAlltoAllV", "HcclScatter", "HcclBatchSendRecv"} <= symbols
    old = _rows(upstream, OLD)
    assert {r.subject for _, r in old if r.kind == hccl.REFUSED} >= {"gather", "scatter"}
    assert not any(r.kind == hccl.CHECKS_DTYPE for _, r in old)


@pytest.mark.upstream
def test_gather_emulation_warning_with_its_condition(upstream: Path) -> None:
    rows = [r for _, r in _rows(upstream, PY_271) if r.kind == hccl.EMULATED]
    assert [r.subject for r in rows] == ["gather", "gather"]
    assert rows[0].message == ("HCCL doesn't support gather at the moment. Implemented with "
                               "allgather instead.")
    assert "tensor.device.type == 'npu'" in rows[0].value
    new = [r for _, r in _rows(upstream, NEW) if r.kind == hccl.EMULATED]
    # 26.1.0: only when the compatible implementation is off
    assert all("not use_compatible_impl" in r.value for r in new)


PG_FIXTURE = """\
std::map<c10d::ReduceOp, HcclReduceOp> hcclOp = {
    {c10d::ReduceOp::SUM, HCCL_REDUCE_SUM},
};

std::map<c10d::ReduceOp, std::string> unsupportedOp = {
    {c10d::ReduceOp::AVG, "AVG"},
};

HcclReduceOp getHcclReduceOp(const c10d::ReduceOp reduceOp, at::Tensor& input)
{
    return hcclOp[reduceOp];
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(
    std::vector<at::Tensor>& outputTensors)
{
    throw std::runtime_error("ProcessGroupHCCL does not support scatter");
}
"""


def test_fixture_process_group() -> None:
    rows = hccl.parse(PG_FIXTURE, Origin("x/torch_npu/csrc/distributed/ProcessGroupHCCL.cpp"))
    ops = {r.subject: r.value for r in rows if r.kind == hccl.REDUCE_OP}
    assert ops == {"SUM": hccl.NATIVE, "AVG": hccl.REFUSED_OP, "BAND": hccl.UNCHECKED,
                   "BOR": hccl.UNCHECKED, "BXOR": hccl.UNCHECKED}
    refused = [r for r in rows if r.kind == hccl.REFUSED]
    assert [(r.subject, r.message, r.line) for r in refused] == [
        ("scatter", "ProcessGroupHCCL does not support scatter", 17)]


def test_strict_on_missing_constructs() -> None:
    with pytest.raises(ScrapeError, match=r"ProcessGroupHCCL\.cpp"):
        hccl.parse("int main() {}\n", Origin("t/ProcessGroupHCCL.cpp"))
    with pytest.raises(ScrapeError, match=r"HcclCompile\.h"):
        hccl.parse("#pragma once\n", Origin("t/HcclCompile.h"))
    with pytest.raises(ScrapeError, match=r"HCCLUtils\.cpp"):
        hccl.parse("namespace x {}\n", Origin("t/HCCLUtils.cpp"))
    bad = "std::map<at::ScalarType, HcclDataType> m = {\n    {at::kQuux, HCCL_DATA_TYPE_X},\n};\n"
    with pytest.raises(ScrapeError, match=r"HCCLUtils.cpp:2"):
        hccl.parse(bad, Origin("t/HCCLUtils.cpp"))
    with pytest.raises(ScrapeError, match=r"distributed_c10d.py:1"):
        hccl.parse("def (:\n", Origin("t/distributed_c10d.py"))
    with pytest.raises(ScrapeError, match="no HCCL reader"):
        hccl.parse("", Origin("t/other.cpp"))


@pytest.mark.upstream
def test_old_dtype_wrapper(upstream: Path) -> None:
    wraps = {(r.subject, r.value) for _, r in _rows(upstream, OLD) if r.kind == hccl.DTYPE_WRAP}
    # 5.0-era torch_npu sent unsigned ints as int32 and float64 as float32 around all_reduce
    # and reduce; the rc2 list also sent int64 as int32, 5.0.1.2's no longer does
    assert {("all_reduce", "uint8->int32"), ("reduce", "float64->float32")} <= wraps
    assert ("all_reduce", "int64->int32") not in wraps
    rc2 = {(r.subject, r.value) for _, r in _rows(upstream, "v5.0.rc2-pytorch2.0.1")
           if r.kind == hccl.DTYPE_WRAP}
    assert ("all_reduce", "int64->int32") in rc2
    assert not any(r.kind == hccl.DTYPE_WRAP for _, r in _rows(upstream, NEW))


def test_dtype_wrapper_fixture_is_strict() -> None:
    good = ("import torch\nWRAP_DTYPE_DICT = {'torch.int64': torch.int32}\n"
            "WRAP_DTYPE_FNNAME_LIST_ONE_INPUT = ['all_reduce']\n")
    rows = hccl.parse(good, Origin("t/hccl_dtype_wraper.py"))
    assert [(r.subject, r.value, r.line) for r in rows] == [("all_reduce", "int64->int32", 2)]
    with pytest.raises(ScrapeError, match="WRAP_DTYPE_DICT"):
        hccl.parse("X = 1\n", Origin("t/hccl_dtype_wraper.py"))
