"""op-plugin acl_op kernel sources → the CANN op types each ATen overload's kernel runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.aclops import link_pin, parse_aclop_source
from opcheck.scrapers.opplugin import parse_functions
from opcheck.scrapers.rows import KernelRow, Origin

WIDGET = "aclops/ScatterWidgetKernelNpu.cpp"


def _source(fixtures: Path, name: str = WIDGET) -> tuple[Origin, str]:
    return Origin(name), (fixtures / name).read_text(encoding="utf-8")


def _k(op: str, schema: str) -> KernelRow:
    return KernelRow(op=op, torch="2.1", acl_op=True, schema=schema, section="official")


def test_commands_conditions_and_engines(fixtures: Path) -> None:
    origin, text = _source(fixtures)
    fns = {f.fn.name: f for f in parse_aclop_source(text, origin=origin)}
    # the local variable's ternary gives both op types, each with its branch; the comment
    # naming another op type does not count
    assert [(c.op_type, c.condition, c.line) for c in fns["widget_out_nocheck"].commands] == [
        ("WidgetBool", "self.dtype() == at::kBool", 13),
        ("Widget", "!(self.dtype() == at::kBool)", 13)]
    # _exclude_engines with a file-level constant naming the AI Core: AI CPU only
    [cpu] = fns["widget_cpu_nocheck"].commands
    assert (cpu.op_type, cpu.engine, cpu.line) == ("Widget", "aicpu", 20)
    # a branch on a local flag reads as the expression that set it
    calls = {(k, n): c for k, n, c in fns["widget_out"].calls}
    assert calls["call", "widget_cpu_nocheck"] == "(self.numel() > 20000)"
    assert calls["call", "widget_out_nocheck"] == "!((self.numel() > 20000))"
    assert ("aten", "zero_", "") in fns["widget_"].calls


def test_unreadable_op_type_fails_with_file_and_line(fixtures: Path) -> None:
    origin, text = _source(fixtures, "aclops/BadNameKernelNpu.cpp")
    with pytest.raises(ScrapeError) as err:
        parse_aclop_source(text, origin=origin)
    assert "BadNameKernelNpu.cpp" in str(err.value) and ":6" in str(err.value)


def test_link_follows_helpers_kernels_and_dispatched_calls(fixtures: Path) -> None:
    kernels = [
        _k("aten::widget.out", "widget.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
        _k("aten::widget", "widget(Tensor self) -> Tensor"),
        _k("aten::widget_", "widget_(Tensor(a!) self) -> Tensor(a!)"),
        _k("aten::zero_", "zero_(Tensor(a!) self) -> Tensor(a!)"),
        _k("aten::missing", "missing(Tensor self) -> Tensor"),
    ]
    link = link_pin([_source(fixtures)], kernels)
    got = {(r.op, r.op_type, r.engine, r.condition, r.via) for r in link.rows}
    assert ("aten::widget.out", "Widget", "aicpu", "(self.numel() > 20000)",
            "widget_cpu_nocheck") in got
    assert ("aten::widget.out", "WidgetBool", "",
            "!((self.numel() > 20000)) && self.dtype() == at::kBool", "widget_out_nocheck") in got
    # another kernel called as acl_op::widget_out
    assert {r.via for r in link.rows if r.op == "aten::widget"} == {
        "acl_op:widget_out>widget_cpu_nocheck", "acl_op:widget_out>widget_out_nocheck"}
    # self.zero_() goes through the dispatcher to zero_'s own acl_op kernel
    assert {(r.op_type, r.via) for r in link.rows if r.op == "aten::widget_"} == {
        ("Fill", "aten:zero_")}
    assert all(r.match == "signature" and r.path == WIDGET for r in link.rows)
    assert link.unlinked == [("aten::missing", "no acl_op function named missing")]


@pytest.mark.upstream
def test_real_pins_fill_and_index_put(upstream: Path) -> None:
    base = upstream / "github/Ascend/op-plugin/06dba7a9e00b46faa88403fe193c44777605a7ba/op_plugin"
    sources = [(Origin(str(p.relative_to(upstream))), p.read_text(encoding="utf-8"))
               for folder in ("ops/aclops", "utils/custom_functions/aclops")
               for p in sorted((base / folder).glob("*.cpp"))]
    yaml = base / "config/op_plugin_functions.yaml"
    kernels = parse_functions(yaml.read_text(encoding="utf-8"),
                              origin=Origin(str(yaml.relative_to(upstream))))
    link = link_pin(sources, kernels)
    ops = {r.op for r in link.rows}
    assert len(ops) > 900  # of ~1,090 acl_op overloads at this pin
    fill = {r.op for r in link.rows if r.op_type == "Fill" and "aten:" not in r.via}
    assert {"aten::fill_.Scalar", "aten::fill_.Tensor", "aten::ones_like"} <= fill
    # zeros reach Fill only through a dispatched call (zero_ runs ZerosLike itself)
    assert {(r.op_type, r.via) for r in link.rows if r.op == "aten::zero_"} == {
        ("ZerosLike", "zeros_like_out_npu_nocheck")}
    put = [r for r in link.rows if r.op == "aten::index_put_" and r.op_type == "IndexPutV2"]
    assert {(r.engine, r.line) for r in put} == {("aicpu", 171), ("", 111)}
    assert all("is_aicpu_valid" in r.condition for r in put)
    assert all(r.path.endswith("ops/aclops/IndexPutKernelNpu.cpp") for r in put)
