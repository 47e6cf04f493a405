"""op-plugin op_api kernel sources → aclnn functions per ATen overload."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.opapi_sources import (
    PinLink,
    cpp_kernel_name,
    link_pin,
    parse_kernel_source,
    schema_arg_classes,
)
from opcheck.scrapers.opplugin import parse_functions
from opcheck.scrapers.rows import KernelRow, Origin

SCALE = "fixtures/aclnn/opapi/ScaleKernelNpuOpApi.cpp"
GRAD = "fixtures/aclnn/opapi/ScaleGradKernelNpuOpApi.cpp"


def _sources(fixtures: Path) -> list[tuple[Origin, str]]:
    return [(Origin(name), (fixtures.parent / name).read_text(encoding="utf-8"))
            for name in (SCALE, GRAD)]


def _k(op: str, schema: str, torch: tuple[str, ...] = ("2.1", "2.2", "2.3"),
       section: str = "official", aclnn: str | None = None) -> list[KernelRow]:
    return [KernelRow(op=op, torch=t, op_api=True, schema=schema, section=section, aclnn=aclnn)
            for t in torch]


def test_parse_functions_calls_and_guards(fixtures: Path) -> None:
    [(origin, text)] = _sources(fixtures)[:1]
    fns = parse_kernel_source(text, origin=origin)
    assert [(f.name, f.static, f.line) for f in fns] == [
        ("scale_out_nocheck", True, 12), ("scale", False, 23), ("scale", False, 32),
        ("scale_out", False, 40), ("shifted_symint", False, 46),
        ("shifted_symint", False, 54)]
    helper, scalar, *_ = fns
    # the macro body (a #define) and the commented-out call are not calls
    assert [(c.aclnn, c.kind, c.line) for c in helper.calls] == [
        ("aclnnScaleV2", "probe", 14), ("aclnnScaleV2", "exec", 16), ("aclnnScale", "exec", 18)]
    assert [(c.aclnn, c.kind, c.fallback) for c in scalar.calls] == [
        ("aclnnScale", "compat", "acl_op::scale")]
    assert scalar.param_classes() == ("T", "S")
    assert "scale_out_nocheck" in scalar.callees
    old, new = fns[4], fns[5]
    assert (old.admits("2.1"), old.admits("2.2"), new.admits("2.1"), new.admits("2.9")) == (
        True, False, False, True)
    assert new.param_classes() == ("T", "i[]")


def test_unbalanced_source_fails() -> None:
    with pytest.raises(ScrapeError, match="unbalanced") as err:
        parse_kernel_source("namespace op_api {\nat::Tensor f() {\n", origin=Origin("x.cpp"))
    assert err.value.source == "x.cpp"
    with pytest.raises(ScrapeError, match="#endif without #if") as err:
        parse_kernel_source("namespace op_api {\n}\n#endif\n", origin=Origin("x.cpp"))
    assert err.value.line == 3


@pytest.mark.parametrize(("schema", "section", "name"), [
    ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", "official", "add"),
    ("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", "official",
     "add_"),
    ("add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
     "official", "add_out"),
    ("embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1) -> Tensor", "symint",
     "embedding_symint"),
    ("max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
     "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)", "official", "max_out"),
])
def test_cpp_kernel_name(schema: str, section: str, name: str) -> None:
    assert cpp_kernel_name(schema, section) == name


def test_schema_arg_classes() -> None:
    assert schema_arg_classes(
        "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor") == ("T", "T?[]")
    assert schema_arg_classes(
        "f(Tensor self, SymInt[2] size, int[]? dim=None, *, ScalarType? dtype=None, "
        "bool[3] mask, str reduce='mean') -> Tensor") == ("T", "i[]", "i[]?", "dt?", "b[]", "s")


@pytest.fixture
def fixture_link(fixtures: Path) -> PinLink:
    kernels = [
        *_k("aten::scale.Scalar", "scale.Scalar(Tensor self, Scalar factor) -> Tensor"),
        *_k("aten::scale.Tensor", "scale.Tensor(Tensor self, Tensor factor) -> Tensor"),
        *_k("aten::scale.out",
            "scale.out(Tensor self, Scalar factor, *, Tensor(a!) out) -> Tensor(a!)"),
        *_k("aten::shifted", "shifted(Tensor self, SymInt[] shifts) -> Tensor",
            section="symint"),
        *_k("npu::scale_backward", "scale_backward(Tensor grad, Scalar factor) -> Tensor",
            section="custom"),
        *_k("aten::composite_only", "composite_only(Tensor self) -> Tensor"),
        *_k("aten::generated", "generated(Tensor self) -> Tensor", aclnn="aclnnGenerated"),
        *_k("aten::missing", "missing(Tensor self) -> Tensor"),
    ]
    return link_pin(_sources(fixtures), kernels)


def test_link_direct_helper_and_fallback(fixture_link: PinLink) -> None:
    rows = [(r.aclnn, r.kind, r.fallback, r.via, r.match, r.line)
            for r in fixture_link.rows if r.op == "aten::scale.Scalar"]
    assert rows == [
        ("aclnnScale", "compat", "acl_op::scale", "", "signature", 25),
        ("aclnnScaleV2", "probe", "", "scale_out_nocheck", "signature", 14),
        ("aclnnScaleV2", "exec", "", "scale_out_nocheck", "signature", 16),
        ("aclnnScale", "exec", "", "scale_out_nocheck", "signature", 18),
    ]
    assert {r.torch for r in fixture_link.rows if r.op == "aten::scale.Scalar"} == {
        ("2.1", "2.2", "2.3")}
    tensor = {(r.aclnn, r.kind) for r in fixture_link.rows if r.op == "aten::scale.Tensor"}
    assert tensor == {("aclnnScaleTensor", "compat"), ("aclnnScaleTensor", "exec")}
    out = {(r.kernel, r.aclnn) for r in fixture_link.rows if r.op == "aten::scale.out"}
    assert out == {("scale_out", "aclnnScaleV2"), ("scale_out", "aclnnScale")}


def test_link_version_guards(fixture_link: PinLink) -> None:
    rows = [(r.kernel, r.aclnn, r.torch, r.match)
            for r in fixture_link.rows if r.op == "aten::shifted"]
    assert rows == [("shifted_symint", "aclnnShiftOld", ("2.1",), "signature"),
                    ("shifted_symint", "aclnnShift", ("2.2", "2.3"), "signature")]


def test_link_delegation_is_marked(fixture_link: PinLink) -> None:
    rows = {(r.aclnn, r.via) for r in fixture_link.rows if r.op == "npu::scale_backward"}
    # op_api::scale has two overloads, (Tensor, Scalar) and (Tensor, Tensor); scale_backward
    # passes its Scalar factor: only the Scalar overload is credited
    assert rows == {("aclnnScale", "op_api:scale"),
                    ("aclnnScale", "op_api:scale>scale_out_nocheck"),
                    ("aclnnScaleV2", "op_api:scale>scale_out_nocheck")}


def test_link_unlinked_reasons(fixture_link: PinLink) -> None:
    assert dict(fixture_link.unlinked) == {
        "aten::composite_only": "composite_only calls no aclnn function",
        "aten::missing": "no op_api function named missing",
    }


# --------------------------------------------------------------------------- real pins

NEWEST = "8b9c8534fa41eff367a41c155843daa530ab3a08"  # v26.1.0 tags (torch_npu 2.10.0.post4 …)
OLDER = "06dba7a9e00b46faa88403fe193c44777605a7ba"  # v6.0.0.1 tags (torch_npu 2.1.0.post11 …)


@cache
def _pin(root: str, pin: str) -> PinLink:
    base = Path(root)
    d = base / "github/Ascend/op-plugin" / pin / "op_plugin"
    yaml = d / "config/op_plugin_functions.yaml"
    kernels = parse_functions(yaml.read_text(encoding="utf-8"),
                              origin=Origin(str(yaml.relative_to(base))))
    sources = [(Origin(str(p.relative_to(base))), p.read_text(encoding="utf-8"))
               for p in sorted((d / "ops/opapi").glob("*.cpp"))]
    return link_pin(sources, kernels, config=str(yaml.relative_to(base)))


@pytest.mark.upstream
@pytest.mark.parametrize(("pin", "ops", "aclnn", "matches"), [
    (NEWEST, 868, 613, {"signature": 866, "arity": 2}),
    (OLDER, 679, 382, {"signature": 674, "signature-variants": 5, "arity": 1}),
])
def test_real_pin_counts(upstream: Path, pin: str, ops: int, aclnn: int,
                         matches: dict[str, int]) -> None:
    link = _pin(str(upstream), pin)
    written = [r for r in link.rows if r.match != "gen_opapi"]
    assert len({r.op for r in written}) == ops
    assert len({r.aclnn for r in written}) == aclnn
    assert Counter(m for _, m in {(r.op, r.match) for r in written}) == Counter(matches)
    # gen_opapi kernels: their aclnn comes from the YAML, one link per op entry with an exec
    d = upstream / "github/Ascend/op-plugin" / pin / "op_plugin/config/op_plugin_functions.yaml"
    kernels = parse_functions(d.read_text(encoding="utf-8"), origin=Origin(str(d)))
    generated = {k.op for k in kernels if k.op_api and k.aclnn and k.status == "kernel"}
    assert {r.op for r in link.rows if r.match == "gen_opapi"} == generated
    assert len(generated) > 350
    # a generated kernel has no hand-written source for the same torch version
    assert not ({(r.op, v) for r in link.rows if r.match == "gen_opapi" for v in r.torch}
                & {(r.op, v) for r in written for v in r.torch})
    # no op is left unlinked because two overloads could not be told apart
    assert not [r for _, r in link.unlinked if "with matching parameters" in r]


@pytest.mark.upstream
def test_real_cast_and_index(upstream: Path) -> None:
    link = _pin(str(upstream), NEWEST)
    cast = {(r.aclnn, r.kind, r.fallback, r.via) for r in link.rows
            if r.op == "npu::npu_dtype_cast"}
    assert cast == {("aclnnCast", "compat", "acl_op::npu_dtype_cast", ""),
                    ("aclnnCast", "exec", "", "op_api:npu_dtype_cast_impl_op_api")}
    index = {(r.aclnn, r.kind) for r in link.rows if r.op == "aten::index.Tensor"}
    assert index == {("aclnnIndex", "compat"), ("aclnnIndex", "exec")}


@pytest.mark.upstream
def test_real_repeat_interleave_per_version(upstream: Path) -> None:
    """The int overload calls aclnnRepeatInterleaveIntWithDim; torch 2.1 has its own
    VERSION_BETWEEN(V2R1, V2R1) definition, the others share one."""
    link = _pin(str(upstream), NEWEST)
    rows = [r for r in link.rows if r.op == "aten::repeat_interleave.self_int"
            and r.aclnn == "aclnnRepeatInterleaveIntWithDim" and r.kind == "compat"]
    assert sorted((r.torch[0], len(r.torch), r.kernel, r.line) for r in rows) == [
        ("2.1", 1, "repeat_interleave_symint", 88),
        ("2.2", 12, "repeat_interleave_symint", 152)]
    assert {r.fallback for r in rows} == {"acl_op::repeat_interleave_symint"}


@pytest.mark.upstream
def test_real_add_scalar_other_goes_through_helper(upstream: Path) -> None:
    link = _pin(str(upstream), NEWEST)
    rows = {(r.aclnn, r.kind, r.via) for r in link.rows if r.op == "aten::add.Tensor"}
    assert rows == {
        ("aclnnAdd", "compat", ""), ("aclnnAdds", "compat", ""),
        ("aclnnAdds", "exec", "add_out_npu_nocheck"),
        ("aclnnAddV3", "probe", "add_out_npu_nocheck"),
        ("aclnnAddV3", "exec", "add_out_npu_nocheck"),
        ("aclnnAdd", "exec", "add_out_npu_nocheck")}


# torch_npu 2.7.1.post2 (v7.3.0-pytorch2.7.1) pins this commit: issue 26's audit release.
AUDIT = "7213914dba669f03f27fae03e61e7283a1aa6ebe"


@pytest.mark.upstream
def test_real_delegation_links_only_the_overload_called(upstream: Path) -> None:
    """min.names_dim calls ``op_api::min(self, dimname_to_position(self, dim), keepdim)``: three
    arguments, so the (self, int dim, keepdim) overload (aclnnMinDim), not min(self) (aclnnMin)
    nor itself; the source calls no other aclnn function."""
    link = _pin(str(upstream), AUDIT)
    rows = {(r.aclnn, r.kind, r.via) for r in link.rows if r.op == "aten::min.names_dim"}
    # its own DO_COMPATIBILITY, and the delegate's DO_COMPATIBILITY and EXEC_NPU_CMD
    assert rows == {("aclnnMinDim", "compat", ""), ("aclnnMinDim", "compat", "op_api:min"),
                    ("aclnnMinDim", "exec", "op_api:min")}
    text = (upstream / "github/Ascend/op-plugin" / AUDIT
            / "op_plugin/ops/opapi/MinKernelNpuOpApi.cpp").read_text(encoding="utf-8")
    assert "op_api::min(self, dimname_to_position(self, dim), keepdim)" in text


@pytest.mark.upstream
def test_real_gen_opapi_kernels_are_linked_from_the_yaml(upstream: Path) -> None:
    """Kernels op-plugin generates from a ``gen_opapi`` entry have no hand-written source: their
    aclnn function is the entry's ``exec``, linked with the YAML's file and line."""
    link = _pin(str(upstream), AUDIT)
    yaml = (upstream / "github/Ascend/op-plugin" / AUDIT
            / "op_plugin/config/op_plugin_functions.yaml").read_text(encoding="utf-8")
    lines = yaml.splitlines()
    entry = next(n for n, line in enumerate(lines, 1) if line.strip().startswith("- func: cosh("))
    exec_line = next(line for line in lines[entry:entry + 12] if "exec:" in line)
    assert "aclnnCosh" in exec_line
    cosh = [(r.aclnn, r.kind, r.via, r.match, r.path.rsplit("/", 1)[-1], r.line)
            for r in link.rows if r.op == "aten::cosh"]
    assert cosh == [("aclnnCosh", "exec", "gen_opapi", "gen_opapi",
                     "op_plugin_functions.yaml", entry)]
    assert not [op for op, why in link.unlinked if "gen_opapi" in why]
    gen = {r.op for r in link.rows if r.match == "gen_opapi"}
    assert {"aten::abs", "aten::atanh.out", "aten::tanh_backward"} <= gen
