"""The kernel path each call takes per product (issue 27): a small fp32 LLaMA trained on 310P
runs ``add_``/``div`` on acl_op and the AdamW ``_foreach_*`` ops on PyTorch's per-tensor slow
path, so the aclnn contract's "not supported on 310P" does not count there; on 910B it still
does. The catalog is the bundled snapshot plus the kernel-path facts read from the mirror."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from testpaths import MODELS

from opcheck.checker.check import Finding, Report, check
from opcheck.checker.kernel_path import (
    ACL_OP,
    ACLNN,
    FOREACH_SLOW,
    KernelPaths,
    Settings,
    kernel_path_hook,
)
from opcheck.checker.restrictions import all_restrictions
from opcheck.core.oplist import OpList
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

pytestmark = [pytest.mark.upstream, pytest.mark.torch]
sys.path.insert(0, str(MODELS))

RELEASE = "2.6.0.post5"  # a tag of the 2.6 line, mirrored with its op-plugin pin


@pytest.fixture(scope="module")
def cat_path(upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opcheck.contrib.workaround_catalog import attach
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot
    from opcheck.sync.context import SyncContext
    from opcheck.sync.kernel_path import KernelPathRules
    from opcheck.sync.sources import MirrorSource

    data = read_snapshot(snapshot_dir())
    attach(data)
    ctx = SyncContext(MirrorSource(upstream), workers=0)
    ctx.data = data
    KernelPathRules().collect(ctx)
    assert not ctx.failures, ctx.failures
    return write_catalog(data, tmp_path_factory.mktemp("kpath") / "catalog.sqlite")


@pytest.fixture(scope="module")
def cat(cat_path: Path) -> Catalog:
    return Catalog.load(make_engine(cat_path))


@pytest.fixture(scope="module")
def llama(cat: Catalog) -> OpList:
    pytest.importorskip("transformers")
    import hf

    from opcheck.tracers.composites import composites_with_kernels
    from opcheck.tracers.inputs import InputSpec
    from opcheck.tracers.runtime import trace_module

    model, args, kwargs = hf.llama_tiny()  # float32
    return trace_module(model, InputSpec(), example_args=args, example_kwargs=kwargs,
                        train=True, composites=composites_with_kernels(cat), label="llama")


def _report(cat: Catalog, ol: OpList, hardware: str, release: str = RELEASE,
            settings: Settings | None = None) -> Report:
    return check(cat, ol, cat.release(release), restrictions=all_restrictions(cat, hardware),
                 kernel_paths=kernel_path_hook(cat, hardware, settings or Settings()))


def _op(rep: Report, op: str) -> Finding:
    return next(f for f in rep.ops if f.op == op)


def _not_supported(f: Finding) -> list[str]:
    return [r.text for r in f.restrictions if r.violated and r.source == "cann"]


def test_fp32_train_on_310p_has_no_false_alarm(cat: Catalog, llama: OpList) -> None:
    without = check(cat, llama, cat.release(RELEASE),
                    restrictions=all_restrictions(cat, "310P"))
    rep = _report(cat, llama, "310P")
    ops = ["aten::add_.Tensor", "aten::div.Scalar"]
    foreach = [f.op for f in rep.ops if f.op.startswith("aten::_foreach_")]
    assert foreach
    # the aclnn pages alone say "not supported on 310P" for these ...
    assert all(_not_supported(_op(without, op)) for op in ops + foreach[:1])
    # ... but aclnn does not run there
    for op in ops + foreach:
        f = _op(rep, op)
        assert not f.restricted and not _not_supported(f), op
        assert f.path.get("310P") in (ACL_OP, FOREACH_SLOW), op
    for op in ops:
        f = _op(rep, op)
        assert f.path == {"310P": ACL_OP}
        notes = [r for r in f.restrictions if r.source == "kernel_path"]
        path_note = next(r for r in notes if "acl_op path" in r.text)
        assert "contract not published" in path_note.text and path_note.inferred
        assert "float32" in path_note.text  # the call signatures it is about
        assert "CheckJitDisableInner" in path_note.text and "EnvVariables.cpp#L" in path_note.link
        # float32 on 310P's acl_op path: the precision mode, labelled
        assert any("allow_fp32_to_fp16" in r.text and r.inferred for r in notes)
    sqrt = _op(rep, "aten::_foreach_sqrt")
    slow = [r for r in sqrt.restrictions if r.slow and r.source == "kernel_path"]
    assert sqrt.path == {"310P": FOREACH_SLOW} and slow
    assert "foreach_tensor_sqrt_slow" in slow[0].text and "/ForeachSqrt" in slow[0].link
    assert rep.verdict.value in ("YES", "MAYBE") and len(
        [f for f in rep.ops if f.restricted]) < len([f for f in without.ops if f.restricted])


def test_910b_keeps_the_aclnn_contract(cat: Catalog, llama: OpList) -> None:
    rep = _report(cat, llama, "910B")
    add = _op(rep, "aten::add_.Tensor")
    assert add.path == {"910B": ACLNN}
    assert _op(rep, "aten::_foreach_sqrt").path == {"910B": ACLNN}
    # a call the 910B aclnn page rejects is still a finding there (cumsum on bool input),
    # while on 310P, where acl_op runs, it is listed but not counted
    cumsum = _op(rep, "aten::cumsum")
    assert cumsum.path == {"910B": ACLNN} and cumsum.restricted
    assert any("BOOL" in t for t in _not_supported(cumsum))
    on_310p = _op(_report(cat, llama, "310P"), "aten::cumsum")
    assert on_310p.path == {"310P": ACL_OP} and not on_310p.restricted


def test_user_settings_override_the_default(cat: Catalog, llama: OpList) -> None:
    rep = _report(cat, llama, "310P", settings=Settings(jit_compile=False))
    add = _op(rep, "aten::add_.Tensor")
    assert add.path == {"310P": ACLNN} and add.restricted  # aclnn runs: its page counts
    rep = _report(cat, llama, "910B", settings=Settings(internal_format=True))
    assert _op(rep, "aten::add_.Tensor").path == {"910B": ACL_OP}


def test_bf16_is_chip_level_on_310p(cat: Catalog) -> None:
    pytest.importorskip("transformers")
    import hf
    import torch

    from opcheck.tracers.composites import composites_with_kernels
    from opcheck.tracers.inputs import InputSpec
    from opcheck.tracers.runtime import trace_module

    model, args, kwargs = hf.llama_tiny()
    ol = trace_module(model.to(torch.bfloat16), InputSpec(), example_args=args,
                      example_kwargs=kwargs, composites=composites_with_kernels(cat),
                      label="llama_bf16")
    mul = _op(_report(cat, ol, "310P"), "aten::mul.Tensor")
    assert mul.path == {"310P": ACL_OP} and mul.restricted
    assert any("chip-level" in t and "BFLOAT16" in t for t in _not_supported(mul))


def test_every_product_without_hardware(cat: Catalog, llama: OpList) -> None:
    rep = check(cat, llama, cat.release(RELEASE), restrictions=all_restrictions(cat, None),
                kernel_paths=kernel_path_hook(cat, None))
    add = _op(rep, "aten::add_.Tensor")
    assert add.path["910B"] == ACLNN and add.path["310P"] == ACL_OP
    assert add.path["910A"] == ACL_OP and add.path["950"] in (ACLNN, "unknown")
    for r in add.restrictions:
        if r.source == "cann" and r.violated:
            assert "310P" not in r.products_failing and "910A" not in r.products_failing


def test_rules_follow_each_release(cat: Catalog) -> None:
    """Releases whose torch_npu takes CANN's jit default at init are judged on the rule a
    later release writes down, labelled; a wheel-only release on its line's nearest tag."""
    paths = KernelPaths(cat)
    old = cat.release("2.6.0")  # v7.1.0: jitCompile option + CANN's default
    d = paths.decide("aten::add_.Tensor", Status.NPU, "aclnn+acl_op", old, "310P")
    assert d.path == ACL_OP and d.inferred and "ACL_OP_JIT_COMPILE" in d.why
    d = paths.decide("aten::add_.Tensor", Status.NPU, "aclnn+acl_op", old, "910B")
    assert d.path == ACLNN and d.inferred and "LazyInitAclops.cpp:" in d.why
    # 6.0-era tags: npu_sys_ctrl.cpp (which takes CANN's default) is mirrored at the newest
    # tag of each torch line only; elsewhere the report says it cannot see
    seen = [r for r in cat.releases if r.tag == "v6.0.0.1-pytorch2.3.1"]
    unseen = [r for r in cat.releases if r.tag == "v6.0.0-pytorch2.3.1"]
    for rel, text in ((seen, "npu_sys_ctrl.cpp:"), (unseen, "not in the files mirrored")):
        assert rel, "the snapshot has the 2.3.1 releases"
        d = paths.decide("aten::add_.Tensor", Status.NPU, "aclnn+acl_op", rel[0], "910B")
        assert d.path == ACLNN and d.inferred and text in d.why, d.why
    new = cat.release(RELEASE)
    d = paths.decide("aten::add_.Tensor", Status.NPU, "aclnn+acl_op", new, "910B")
    assert d.path == ACLNN and not d.inferred
    d = paths.decide("aten::add_.Tensor", Status.NPU, "acl_op", new, "910B")
    assert d.path == ACL_OP
    # 950 runs aclnn only (IsAclnnOnly), from the release whose sources name it
    newest = cat.release("2.9.0.post6")  # v26.1.0
    d = paths.decide("aten::add_.Tensor", Status.NPU, "aclnn+acl_op", newest, "950")
    assert d.path == ACLNN and "IsAclnnOnly" in d.why
    assert paths.decide("aten::add_.Tensor", Status.NPU, "aclnn+acl_op", new, "950").path \
        == "unknown"  # v7.3.0's SoC enum has no 950


def test_op_command_shows_the_path(cli: Callable[..., Any], cat_path: Path) -> None:
    res = cli("op", "aten::_foreach_sqrt", "--hardware", "310P", "--catalog", str(cat_path),
              "-f", "json")
    assert res.exit_code == 0, res.output
    rows = {r["torch_npu"]: r for r in json.loads(res.output)["releases"]}
    assert rows[RELEASE]["path"] == {"310P": FOREACH_SLOW}
    assert "ForeachSqrtKernelNpuOpApi.cpp:" in rows[RELEASE]["path_why"]
    res = cli("op", "aten::add_.Tensor", "--hardware", "910B", "--catalog", str(cat_path))
    assert res.exit_code == 0, res.output
    assert "path on 910B" in res.output and "CheckJitDisableInner" in res.output
    res = cli("op", "aten::add_.Tensor", "--hardware", "910B", "--jit-compile", "maybe",
              "--catalog", str(cat_path))
    assert res.exit_code == 2 and "--jit-compile must be on or off" in res.output


def test_reports_show_the_path(cat: Catalog, llama: OpList) -> None:
    from opcheck.checker.formats.base import RenderContext
    from opcheck.checker.formats.report_markdown import render as markdown

    rep = _report(cat, llama, "310P")
    doc = rep.to_json()
    add = next(o for o in doc["ops"] if o["op"] == "aten::add_.Tensor")
    assert add["path"] == {"310P": ACL_OP}
    text = markdown(rep, RenderContext(all_ops=True))
    assert "npu · acl_op" in text and f"npu · {FOREACH_SLOW}" in text
