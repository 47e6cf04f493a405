"""The speed section (host syncs, slow paths) and the fused-op tips, on real recordings checked
against the bundled catalog: a script run on the recorded device, a fake-tensor trace that
stops at a branch, and a transformers LLaMA traced in-process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from testpaths import FIXTURES, TESTS

from opcheck.checker.check import Report
from opcheck.checker.formats import REPORT_FORMATS
from opcheck.checker.speed import SYNC_TAGS
from opcheck.checker.tips import match
from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
from opcheck.core.oplist import OpList, OpUse, Signature
from opcheck.core.vocab import FailOn, Verdict
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.db.reads import ops_tagged

SCRIPT = FIXTURES / "scripts" / "train_log_item.py"


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


@pytest.fixture(scope="module")
def usecase(cat: Catalog) -> CheckUseCase:
    return CheckUseCase(cat)


def _check(uc: CheckUseCase, oplist: OpList, **kw: Any) -> tuple[Report, int]:
    result = uc.run(CheckRequest(Recorded(oplist), **kw))
    return result.report, result.exit_code


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _syncs(report: Report) -> list[dict[str, Any]]:
    assert report.speed is not None
    return [s for s in report.speed["findings"] if s["kind"] == "host_sync"]


def test_the_sync_ops_come_from_pytorchs_own_tags(cat: Catalog) -> None:
    tagged = ops_tagged(cat.engine, SYNC_TAGS)
    assert "dynamic_output_shape" in tagged["aten::nonzero"][0]
    assert "data_dependent_output" in tagged["aten::_local_scalar_dense"][0]
    assert "aten::add.Tensor" not in tagged
    assert tagged["aten::nonzero"][1].endswith("native_functions.yaml")


def _indexing(indices: str) -> OpList:
    sig = Signature(inputs={"self": "float32", "indices": indices}, count=3,
                    apis=["Tensor.__getitem__"])
    return OpList("m", "runtime", "runtime-dispatch", ops=[OpUse(
        "aten::index.Tensor", 3, ["float32"], locations=["model.py:7"], signatures=[sig])])


def test_only_boolean_indexing_is_a_sync(usecase: CheckUseCase) -> None:
    mask, _ = _check(usecase, _indexing("bool"))
    ints, _ = _check(usecase, _indexing("int64"))
    assert [(s["op"], s["count"], s["locations"]) for s in _syncs(mask)] == [
        ("aten::index.Tensor", 3, ["model.py:7"])]
    assert "masked_fill_" in _syncs(mask)[0]["instead"]
    assert _syncs(ints) == []


@pytest.fixture(scope="module")
def run_report(usecase: CheckUseCase) -> tuple[Report, int]:
    pytest.importorskip("torch")
    from opcheck.tracers.script import run_script

    run = run_script(SCRIPT, max_steps=3, timeout=240, memory_mb=4096,
                     composites=usecase.composites())
    return _check(usecase, run.oplist, fail_on=FailOn.SLOW)


@pytest.mark.torch
def test_run_reports_one_host_sync_per_step_at_the_logging_line(
        run_report: tuple[Report, int], usecase: CheckUseCase) -> None:
    report, code = run_report
    assert report.speed is not None and report.speed["unit"] == "step"
    # the run budget ends the loop once a step records nothing new, so 2 or 3 steps run
    assert report.speed["steps"] in (2, 3)
    item = next(s for s in _syncs(report) if s["op"] == "aten::_local_scalar_dense")
    assert item["per_step"] == 1
    [where] = item["locations"]
    path, _, line = where.rpartition(":")
    assert Path(path).resolve() == SCRIPT and int(line) == _line_of(SCRIPT, "loss.item()")
    assert item["apis"] == ["Tensor.item"] and ".item() once every N steps" in item["instead"]
    assert code == 1  # --fail-on slow
    assert usecase.exit_code(CheckRequest(Recorded(OpList("m", "run", "")),
                                          fail_on=FailOn.UNSUPPORTED), report) == 0


@pytest.mark.torch
def test_the_training_loop_gets_layernorm_clipping_and_optimizer_tips(
        run_report: tuple[Report, int]) -> None:
    report, _ = run_report
    assert report.speed is not None
    tips = {t["pattern"]: t for t in report.speed["tips"]}
    assert tips["LayerNorm (by hand)"]["api"] == "torch.nn.functional.layer_norm"
    assert tips["LayerNorm (by hand)"]["where"] == ["1"]  # the Sequential's second module
    clip = tips["clip_grad_norm (per tensor)"]
    assert clip["api"] == "torch.nn.utils.clip_grad_norm_(foreach=True)"
    assert [int(s.rpartition(":")[2]) for s in clip["call_sites"]] == [
        _line_of(SCRIPT, "clip_grad_norm_")]
    assert tips["AdamW step"]["api"] == "torch.optim.AdamW(fused=True)"
    assert "RMSNorm" not in tips


@pytest.mark.torch
def test_every_format_carries_the_speed_section(run_report: tuple[Report, int]) -> None:
    report, _ = run_report
    line = f"{SCRIPT.name}:{_line_of(SCRIPT, 'loss.item()')}"
    markdown = REPORT_FORMATS.render("markdown", report)
    speed_md = markdown.split("## Speed", 1)[1]
    assert "`aten::_local_scalar_dense` via `Tensor.item`" in speed_md and line in speed_md
    doc = json.loads(REPORT_FORMATS.render("json", report))
    assert doc["speed"]["findings"] == report.speed["findings"]  # type: ignore[index]
    sarif = json.loads(REPORT_FORMATS.render("sarif", report))
    slow = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "slow"]
    assert any(r["properties"]["op"] == "aten::_local_scalar_dense"
               and r["locations"][0]["physicalLocation"]["region"]["startLine"]
               == _line_of(SCRIPT, "loss.item()") for r in slow)
    junit = REPORT_FORMATS.render("junit", report)
    assert 'classname="opcheck.slow.host_sync" name="aten::_local_scalar_dense"' in junit


def _trace(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None,
           uc: CheckUseCase, label: str) -> OpList:
    from opcheck.tracers.inputs import InputSpec
    from opcheck.tracers.runtime import PartialTrace, trace_module

    try:
        return trace_module(model, InputSpec(), example_args=args, example_kwargs=kwargs,
                            composites=uc.composites(), label=label)
    except PartialTrace as stop:
        return stop.partial


@pytest.mark.torch
def test_check_reports_the_branch_it_stopped_at_as_a_sync(usecase: CheckUseCase) -> None:
    pytest.importorskip("torch")
    sys.path.insert(0, str(TESTS / "models"))
    import speed_models

    oplist = _trace(*speed_models.gate(), None, usecase, "gate")
    report, _ = _check(usecase, oplist, fail_on=FailOn.SLOW)
    assert report.verdict is Verdict.INCOMPLETE
    source = Path(speed_models.__file__)
    stopped = [s for s in _syncs(report) if s["stopped_here"]]
    assert [[loc.rpartition(":")[2] for loc in s["locations"]] for s in stopped] == [
        [str(_line_of(source, "if h.sum() > 0"))]]
    assert Path(stopped[0]["locations"][0].rpartition(":")[0]).resolve() == source.resolve()
    assert "torch.where" in stopped[0]["instead"]


@pytest.fixture(scope="module")
def llama(usecase: CheckUseCase) -> OpList:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(TESTS / "models"))
    import hf

    model, args, kwargs = hf.llama_tiny()
    return _trace(model, args, kwargs, usecase, "llama_tiny")


LLAMA_APIS = {"RMSNorm": "torch_npu.npu_rms_norm", "rotary embedding": "torch_npu.npu_rotary_mul",
              "attention (SDPA)": "torch_npu.npu_fused_infer_attention_score",
              "SwiGLU": "torch_npu.npu_swiglu"}


@pytest.mark.torch
def test_llama_gets_the_fused_op_tips_with_call_sites(llama: OpList, cat: Catalog,
                                                      usecase: CheckUseCase) -> None:
    found = {m.pattern for m in match(llama)}
    assert set(LLAMA_APIS) <= found
    assert "LayerNorm (by hand)" not in found and "attention (by hand)" not in found
    newest = cat.releases[-1].torch_npu
    report, code = _check(usecase, llama, torch_npu=newest, hardware="910B")
    assert report.speed is not None
    tips = {t["pattern"]: t for t in report.speed["tips"]}
    assert {p: tips[p]["api"] for p in LLAMA_APIS} == LLAMA_APIS
    rms = tips["RMSNorm"]
    assert rms["call_sites"] and all("modeling_llama.py" in s for s in rms["call_sites"])
    assert any(w.endswith("input_layernorm") for w in rms["where"])
    own = [t for t in tips.values() if not t["pattern"].startswith("advisor:")]
    assert own and all("910B" in t["products"] for t in own)
    # an advisor tip whose API's docs leave 910B out is given only as an acl_op graph kernel
    # older than its aclnn function, and says so
    for t in tips.values():
        if "910B" not in t["products"]:
            assert t["pattern"].startswith("advisor:") and t["inferred"]
            assert "older than the aclnn function" in t["availability"]
    assert "self_attn" in " ".join(tips["rotary embedding"]["where"])
    assert code == 0  # tips are advice: no finding under the default fail level


@pytest.mark.torch
def test_no_tip_where_the_api_does_not_exist(llama: OpList, cat: Catalog,
                                             usecase: CheckUseCase) -> None:
    newest = cat.releases[-1].torch_npu
    # 910A: the aclnn docs of these kernels do not list it
    old_chip, _ = _check(usecase, llama, torch_npu=newest, hardware="910A")
    assert old_chip.speed is not None
    assert {t["api"] for t in old_chip.speed["tips"]
            if not t["pattern"].startswith("advisor:")} & set(LLAMA_APIS.values()) == set()
    # the advisor's rules may name an acl_op graph kernel older than the aclnn function: a
    # tip only with the catalog's evidence that it runs on 910A (op-plugin's SoC check
    # sending 910A's chips to it, or CANN's open libraries building its op types for
    # ascend910), cited, labelled inferred; none without it
    from opcheck.checker.advisor import graph_op_built

    release = next(r for r in cat.releases if r.torch_npu == newest)
    given = {t["api"]: t for t in old_chip.speed["tips"] if t["api"] in LLAMA_APIS.values()}
    evidence = {api: graph_op_built(cat, release, "npu::" + api.rsplit(".", 1)[1], "910A")
                for api in LLAMA_APIS.values()}
    assert set(given) <= {api for api, e in evidence.items() if e}
    # op-plugin sends 910A (soc < Ascend910B1) to npu_rotary_mul's acl_op kernel: its tip stays
    assert "torch_npu.npu_rotary_mul" in given
    for api, t in given.items():
        assert t["pattern"].startswith("advisor:") and t["inferred"]
        assert "older than the aclnn function" in t["availability"]
        assert evidence[api] in t["availability"]
        assert ("ascend910 " in evidence[api] and "sources" in evidence[api]) or (
            "calls acl_op::" in evidence[api] and ".cpp:" in evidence[api])
    # a release from before the kernels: none of them
    lacking = next(r.torch_npu for r in cat.releases if r.has_kernels
                   and not any(cat.kernel_facts(r.torch_npu, op) for op in (
                       "npu::npu_rms_norm", "npu::npu_swiglu",
                       "npu::npu_fused_infer_attention_score", "npu::npu_rotary_mul")))
    old, _ = _check(usecase, llama, torch_npu=lacking)
    assert old.speed is not None
    # the profiling advisor's rules (when synced) may name older graph-op kernels there
    assert [t for t in old.speed["tips"] if not t["pattern"].startswith("advisor:")] == []


@pytest.mark.torch
def test_the_web_check_page_shows_the_speed_section(run_report: tuple[Report, int]) -> None:
    from opcheck.web.pages.base import plain_template

    report, _ = run_report
    html = plain_template("_opcheck_report.html").render(
        report=report, markdown="", op_url=lambda op: f"/-/op/{op}", op_html=str,
        status_class=str, row_url=lambda *a: "")
    section = html.split('<section id="speed">', 1)[1].split("</section>", 1)[0]
    assert "aten::_local_scalar_dense" in section and "Tensor.item" in section
    assert f"train_log_item.py:{_line_of(SCRIPT, 'loss.item()')}" in section


def test_op_pages_name_the_fused_apis_an_op_takes_part_in(cat: Catalog) -> None:
    from opcheck.checker.tips import tips_for_op

    rsqrt = {t["api"]: t for t in tips_for_op(cat, "aten::rsqrt")}
    assert "torch_npu.npu_rms_norm" in rsqrt
    first = cat.kernel_releases(["npu::npu_rms_norm"])["npu::npu_rms_norm"][0]
    assert rsqrt["torch_npu.npu_rms_norm"]["releases"].startswith(first)
    assert {t["api"] for t in tips_for_op(cat, "aten::silu")} == {"torch_npu.npu_swiglu"}
    assert tips_for_op(cat, "aten::add.Tensor") == []
