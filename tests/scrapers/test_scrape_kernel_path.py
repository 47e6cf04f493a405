"""The kernel-path rules parsed from torch_npu's and op-plugin's real sources, release by release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import kernel_path as kp
from opcheck.scrapers.rows import Origin

pytestmark = pytest.mark.upstream

CSRC = "torch_npu/csrc"
ENV = f"{CSRC}/framework/interface/EnvVariables.cpp"
LAZY = f"{CSRC}/framework/LazyInitAclops.cpp"
ENUM = f"{CSRC}/core/npu/NpuVariables.h"
VARS = f"{CSRC}/core/npu/NpuVariables.cpp"
ND_PIN = "8b9c8534fa41eff367a41c155843daa530ab3a08"  # op-plugin at v26.1.0


def _read(path: Path) -> tuple[str, Origin]:
    return path.read_text(encoding="utf-8"), Origin(str(path))


def _tags(upstream: Path) -> list[Path]:
    return sorted(p for p in (upstream / "github/Ascend/pytorch").iterdir()
                  if (p / ENV).is_file())


def test_jit_rule_changed_over_time(upstream: Path) -> None:
    root = upstream / "github/Ascend/pytorch"
    rules = {t: kp.parse_jit_rule(*_read(root / t / ENV)[:1], origin=Origin(t))
             for t in ("v7.2.0-pytorch2.6.0", "v7.1.0-pytorch2.6.0", "v5.0.0-pytorch2.1.0",
                       "v3.0.0-pytorch1.8.1")}
    new, mid, old, none = rules.values()
    assert new is not None and (new.kind, new.condition) == ("soc", "soc>=Ascend910B1")
    assert mid is not None and (mid.kind, mid.default) == ("option", "enable")
    assert old is not None and old.kind == "option"
    assert none is None  # no jit option before op-plugin's op_api/acl_op split
    lines = (root / "v7.2.0-pytorch2.6.0" / ENV).read_text(encoding="utf-8").splitlines()
    assert "GetSocVersion() >= c10_npu::SocVersion::Ascend910B1" in lines[new.line - 1]
    lines = (root / "v7.1.0-pytorch2.6.0" / ENV).read_text(encoding="utf-8").splitlines()
    assert "REGISTER_OPTION_BOOL_FUNCTION(CheckJitDisableInner" in lines[mid.line - 1]


def test_every_tag_parses_and_agrees_with_a_plain_reading(upstream: Path) -> None:
    """Independent of the parser: a tag whose CheckJitDisableInner body compares the SoC has a
    ``soc`` rule; one that registers the jit option function has an ``option`` rule."""
    kinds: dict[str, str] = {}
    for tag in _tags(upstream):
        text, origin = _read(tag / ENV)
        rule = kp.parse_jit_rule(text, origin=origin)
        body = re.search(r"bool CheckJitDisableInner\(\)\s*\{(.*?)\n\}", text, re.S)
        if body and "GetSocVersion" in body.group(1):
            assert rule is not None and rule.kind == "soc", tag.name
        elif re.search(r"REGISTER_OPTION_BOOL_FUNCTION\(CheckJitDisable", text):
            assert rule is not None and rule.kind == "option", tag.name
        else:
            assert rule is None, tag.name
        kinds[tag.name] = rule.kind if rule else ""
        if (tag / LAZY).is_file():
            lazy, lo = _read(tag / LAZY)
            acl = kp.parse_acl_default(lazy, origin=lo)
            assert bool(acl) == ("GetAndSetDefaultJitCompileByAcl()" in lazy), tag.name
            prec = kp.parse_precision(lazy, origin=lo)
            assert prec is not None and prec.when_false == "allow_fp32_to_fp16"
        if (tag / ENUM).is_file():
            enum = kp.parse_soc_enum(*_read(tag / ENUM)[:1], origin=Origin(tag.name))
            assert enum["Ascend310P1"] == 200 and enum["Ascend910B1"] == 220
    assert {"soc", "option", ""} <= set(kinds.values())


def test_cann_default_read_before_lazy_init(upstream: Path) -> None:
    """6.0-era torch_npu takes CANN's jit default in npu_sys_ctrl.cpp (mirrored at the newest
    tag of a torch line), 7.x in LazyInitAclops.cpp."""
    root = upstream / "github/Ascend/pytorch"
    sys_ctrl = root / f"v6.0.0.1-pytorch2.3.1/{CSRC}/core/npu/sys_ctrl/npu_sys_ctrl.cpp"
    text, origin = _read(sys_ctrl)
    line = kp.parse_acl_default(text, origin=origin)
    assert 'SetOption("jitCompile"' in text.splitlines()[line - 1]
    later = root / f"v7.0.0.1-pytorch2.4.0/{CSRC}/core/npu/sys_ctrl/npu_sys_ctrl.cpp"
    assert kp.parse_acl_default(*_read(later)[:1], origin=Origin("s")) == 0
    lazy = root / f"v7.0.0.1-pytorch2.4.0/{LAZY}"
    text, origin = _read(lazy)
    assert 'SetOption("jitCompile"' in text.splitlines()[
        kp.parse_acl_default(text, origin=origin) - 1]


def test_soc_conditions_decide_per_chip(upstream: Path) -> None:
    tag = upstream / "github/Ascend/pytorch/v26.1.0-pytorch2.12.0"
    enum = kp.parse_soc_enum(*_read(tag / ENUM)[:1], origin=Origin("h"))
    assert enum["Ascend910B2"] == 221 and enum["Ascend950"] == 260
    nd = "!((soc>=Ascend910B1&&soc<Ascend310B1)||(soc>Ascend310B4))"  # foreach slow path
    assert [kp.soc_holds(nd, enum, s) for s in ("Ascend310P3", "Ascend910A", "Ascend910B1",
                                                "Ascend310B1", "Ascend910_9391")] == \
        [True, True, False, True, False]
    only = kp.parse_aclnn_only(*_read(tag / VARS)[:1], origin=Origin("c"))
    assert only is not None and only.condition == "soc>=Ascend950"
    assert kp.soc_holds(only.condition, enum, "Ascend950")
    assert not kp.soc_holds(only.condition, enum, "Ascend910B4")
    with pytest.raises(KeyError):
        kp.soc_holds("soc>=Ascend999", enum, "Ascend910A")


def test_codegen_condition_at_every_pin(upstream: Path) -> None:
    pins = sorted((upstream / "github/Ascend/op-plugin").glob("*/*/gen.py"))
    assert len(pins) > 20
    for gen in pins:
        text, origin = _read(gen)
        rule = kp.parse_codegen(text, origin=origin)
        line = text.splitlines()[rule.line - 1]
        assert "if (" in line and ("CheckJitDisable" in line or "is_jit_disable" in line)
        assert rule.base_format  # every pin wants base-format inputs for op_api
        following = "\n".join(text.splitlines()[rule.line:rule.line + 4])
        assert "return op_api::" in following
        assert rule.aclnn_only_raises == ("is_aclnn_only" in text)


def test_foreach_slow_path_and_acl_op_by_soc(upstream: Path) -> None:
    ops = upstream / f"github/Ascend/op-plugin/{ND_PIN}/op_plugin/ops/opapi"
    text, origin = _read(ops / "ForeachAddScalarKernelNpuOpApi.cpp")
    checks = kp.parse_soc_checks(text, origin=origin)
    assert {c.function for c in checks} == {"_foreach_add", "_foreach_add_"}
    for c in checks:
        assert "if (!is_support_nd_out)" in text.splitlines()[c.line - 1]
        assert c.fallback.startswith("at::native::foreach_tensor_add_scalar_kernel_slow")
        assert c.params == ("T[]", "S") and c.start < c.line < c.end
    # a kernel that always takes the slow path
    text, origin = _read(ops / "ForeachAddcdivScalarListKernelNpuOpApi.cpp")
    always = kp.parse_soc_checks(text, origin=origin)
    assert {(c.function, c.when) for c in always} == {("_foreach_addcdiv", ""),
                                                       ("_foreach_addcdiv_", "")}
    # acl_op kernels chosen by SoC: every one names an acl_op:: function and a SoC condition
    found = [c for p in sorted(ops.glob("*.cpp"))
             for c in kp.parse_soc_checks(p.read_text(encoding="utf-8"), origin=Origin(str(p)))]
    acl = [c for c in found if c.fallback.startswith("acl_op::")]
    assert acl and all(c.when for c in acl)


def test_strict_on_unknown_forms() -> None:
    o = Origin("EnvVariables.cpp")
    bad = "bool CheckJitDisableInner()\n{\n    if (IsFoo()) { return true; }\n    return false;\n}\n"
    with pytest.raises(ScrapeError, match=r"EnvVariables\.cpp"):
        kp.parse_jit_rule(bad, origin=o)
    with pytest.raises(ScrapeError):
        kp.parse_jit_rule('REGISTER_OPTION_BOOL_FUNCTION(CheckJitDisable, jitCompile, '
                          '"enable", "maybe")', origin=o)
    with pytest.raises(ScrapeError, match="SocVersion"):
        kp.parse_soc_enum("enum class SocVersion { A = 1, B(2) };", origin=o)
    with pytest.raises(ScrapeError):
        kp.parse_codegen("def gen():\n    pass\n", origin=Origin("gen.py"))
