"""The profiling advisor's rules decided on traces: the bundled catalog plus the rules synced
from the mirror copy of Ascend/mstt under tests/fixtures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from testpaths import FIXTURES, TESTS

from opcheck.checker.advisor import Chain, advisor_tips, match_chains
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.sync.advisor import AdvisorRules
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import MirrorSource


@pytest.fixture(scope="module")
def cat(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(snapshot_dir())
    ctx = SyncContext(MirrorSource(FIXTURES / "mirror"))
    ctx.data = data
    AdvisorRules().collect(ctx)
    assert ctx.failures == [] and data.advisor_rules
    return Catalog.load(make_engine(write_catalog(
        data, tmp_path_factory.mktemp("advised") / "catalog.sqlite")))


@pytest.fixture(scope="module")
def traced() -> list[tuple[OpList, str]]:
    pytest.importorskip("torch")
    from opcheck.tracers import runtime
    from opcheck.tracers.composites import watched_composites
    from opcheck.tracers.inputs import InputSpec

    sys.path.insert(0, str(TESTS))
    from models import fusions

    return [(runtime.trace_module(model, InputSpec(), example_args=args,
                                  label=type(model).__name__,
                                  composites=watched_composites()), api)
            for model, args, api in fusions.cases()]


def _release(cat: Catalog, name: str) -> Any:
    return next(r for r in cat.releases if r.torch_npu == name)


def test_chains_keep_required_elements_and_the_npu_names() -> None:
    chain = Chain.parse("(permute|transpose)-(contiguous){0,1}-(reshape|view)")
    assert len(chain.required) == 2 and "unsafe_view" in chain.required[1]
    assert chain.holds({"permute", "view"}) and not chain.holds({"permute", "clone"})
    assert Chain.parse("(slice|chunk)-gelu-mul").holds({"split", "gelu", "mul"})


@pytest.mark.torch
def test_the_five_advisor_fusions_get_their_api_on_910b(cat: Catalog,
                                                         traced: list[tuple[OpList, str]]
                                                         ) -> None:
    release = _release(cat, "2.7.1.post2")
    for oplist, api in traced:
        tips = advisor_tips(cat, oplist, release, "910B")
        got = {t["api"]: t for t in tips}
        assert api in got, (oplist.model, list(got))
        tip = got[api]
        assert tip["call_sites"] and all("fusions.py:" in s for s in tip["call_sites"])
        assert tip["source"].startswith("https://github.com/Ascend/mstt/blob/")
        assert "no call order" in tip["why"] and tip["inferred"]
        # the GeGLU's gelu is part of npu_geglu: no separate fast_gelu tip there
        if api == "torch_npu.npu_geglu":
            assert "torch_npu.fast_gelu" not in got


@pytest.mark.torch
def test_no_advisor_tip_where_the_kernel_is_missing(cat: Catalog,
                                                    traced: list[tuple[OpList, str]]) -> None:
    lacking = 0
    for oplist, api in traced:
        kernel = "npu::" + api.rsplit(".", 1)[-1]
        old = next((r for r in cat.releases if r.has_kernels
                    and not cat.kernel_facts(r.torch_npu, kernel)), None)
        if old is not None:  # a release from before the kernel: no tip for it
            lacking += 1
            assert api not in {t["api"] for t in advisor_tips(cat, oplist, old, "910B")}
    assert lacking >= 3  # geglu, group_norm_silu, add_layer_norm came later
    # a product the kernel's aclnn docs do not list gets no tip for it either
    release = _release(cat, "2.7.1.post2")
    for oplist, api in traced:
        on_910a = {t["api"] for t in advisor_tips(cat, oplist, release, "910A")}
        if api in ("torch_npu.npu_geglu", "torch_npu.npu_group_norm_silu",
                   "torch_npu.npu_add_layer_norm"):  # aclnn-only kernels not documented there
            assert api not in on_910a


def test_sites_are_lines_or_a_module_with_its_children() -> None:
    ol = OpList("m", "runtime", "runtime-dispatch", ops=[
        OpUse("aten::native_group_norm", 2, modules=["blocks.0.norm"], locations=["m.py:9"]),
        OpUse("aten::silu", 2, modules=["blocks.0"], locations=["m.py:9"]),
        OpUse("aten::silu", 1, modules=["head"], locations=["m.py:30"]),
    ])
    from opcheck.db.advisor import AdvisorRule

    rule = AdvisorRule("aten", "torch_npu.npu_group_norm_silu", "group_norm-silu", "8.0.RC1",
                       "", "x.yaml", 3, "")
    [hit] = match_chains(ol, [rule])
    assert hit.ops == ["aten::native_group_norm", "aten::silu"]
    assert hit.lines == ["m.py:9"] and hit.count == 2
    assert match_chains(OpList("m", "runtime", "", ops=ol.ops[2:]), [rule]) == []




# --- what a run's script sets --------------------------------------------------------------

SCRIPTS = FIXTURES / "scripts"


def _line(path: Path, text: str) -> str:
    n = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)
    return f"{path.name}:{n}"


def _at(locations: list[str]) -> list[str]:
    return [f"{Path(p).name}:{n}" for p, _, n in (loc.rpartition(":") for loc in locations)]


@pytest.fixture(scope="module")
def cuda_style(cat: Catalog) -> Any:
    pytest.importorskip("torch")
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
    from opcheck.tracers.script import run_script

    uc = CheckUseCase(cat)
    run = run_script(SCRIPTS / "train_cuda_style.py", max_steps=3, timeout=240,
                     memory_mb=4096, composites=uc.composites())
    return uc.run(CheckRequest(Recorded(run.oplist), torch_npu="2.7.1.post2",
                               hardware="910B"))


@pytest.mark.torch
def test_the_cuda_style_script_gets_each_setting_at_its_line(cuda_style: Any) -> None:
    script = SCRIPTS / "train_cuda_style.py"
    speed = cuda_style.report.speed
    found = {f["op"]: f for f in speed["findings"] if f["kind"] == "setting"}
    expect = {
        "DataLoader(pin_memory=False, num_workers=0)": "DataLoader(data",
        "torch.autograd.set_detect_anomaly(True)": "set_detect_anomaly",
        "nn.SyncBatchNorm (1 layer)": "convert_sync_batchnorm",
        "Tensor.to(device) without non_blocking": 'x.to("cuda")',
        "ASCEND_LAUNCH_BLOCKING=1": "ASCEND_LAUNCH_BLOCKING",
    }
    assert set(found) == set(expect)
    for what, text in expect.items():
        assert _at(found[what]["locations"]) == [_line(script, text)], what
    # the blocking copies run every step (model.cuda() moves the parameters once: not one)
    assert found["Tensor.to(device) without non_blocking"]["per_step"] == 2
    # the syncs with no user line are anomaly mode's, and say so
    [sync] = [f for f in speed["findings"] if f["kind"] == "host_sync"]
    assert sync["locations"] == [] and "anomaly mode" in sync["why"] and sync["inferred"]
    assert _line(script, "set_detect_anomaly") in sync["why"]
    # the advisor's fused optimizer for the SGD the script built, at its line
    sgd = next(t for t in speed["tips"] if t["api"] == "torch_npu.optim.NpuFusedSGD")
    assert _at(sgd["call_sites"]) == [_line(script, "torch.optim.SGD")]
    assert sgd["replaces"] == ["torch.optim.sgd.SGD"]


@pytest.mark.torch
def test_a_script_with_no_device_is_not_yes(cat: Catalog) -> None:
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
    from opcheck.core.vocab import FailOn, Verdict
    from opcheck.tracers.script import run_script

    uc = CheckUseCase(cat)
    run = run_script(SCRIPTS / "cpu_only.py", max_steps=3, timeout=240, memory_mb=4096,
                     composites=uc.composites())
    assert run.oplist.on_device is False and not run.oplist.complete
    result = uc.run(CheckRequest(Recorded(run.oplist), fail_on=FailOn.UNSUPPORTED,
                                 allow_incomplete=True))
    report = result.report
    assert report.verdict is not Verdict.YES
    [line] = [w for w in report.warnings if w.startswith("NO-DEVICE")]
    assert "stay on the CPU" in line and "optimizer step" in line
    strict = uc.run(CheckRequest(Recorded(run.oplist), fail_on=FailOn.UNSUPPORTED))
    assert strict.exit_code == 1


def test_settings_without_a_cost_make_no_finding() -> None:
    from opcheck.checker.runsettings import setting_findings, sync_cause

    fine = [{"kind": "dataloader", "where": "t.py:3", "pin_memory": True, "num_workers": 4},
            {"kind": "env", "where": "environment", "name": "ASCEND_LAUNCH_BLOCKING",
             "value": "0"},
            {"kind": "env", "where": "t.py:1", "name": "TASK_QUEUE_ENABLE", "value": "2"}]
    assert setting_findings(fine, 3) == []
    [slow] = setting_findings([{"kind": "env", "where": "environment",
                                "name": "TASK_QUEUE_ENABLE", "value": "0"}], 3)
    assert slow.source.endswith("environment_variable_info.yaml")
    assert sync_cause(fine) == ""
    assert sync_cause([{"kind": "grad_scaler", "where": "t.py:9"}]).endswith("(set at t.py:9)")


def test_setting_findings_cite_the_advisor_rule_file_and_line(cat: Catalog) -> None:
    from opcheck.checker.runsettings import env_findings, setting_findings
    from opcheck.db.advisor import advisor_rules

    rules = advisor_rules(cat.engine)
    mirror = FIXTURES / "mirror"

    def cited(source: str, word: str) -> None:
        path, line = source.removeprefix("profiling advisor rule ").rsplit(":", 1)
        [found] = [p for p in mirror.glob(f"github/Ascend/mstt/*/{path}")]
        assert word in found.read_text(encoding="utf-8").splitlines()[int(line) - 1]

    [loader, bn] = setting_findings([
        {"kind": "dataloader", "where": "t.py:3", "pin_memory": False, "num_workers": 0},
        {"kind": "sync_batchnorm", "where": "t.py:5", "count": 2}], 3, rules)
    cited(loader.source, "pin_memory=True")
    assert loader.link.endswith("dataloader.yaml#L7")
    cited(bn.source, "SyncBatchNorm")
    found = env_findings({"ASCEND_LAUNCH_BLOCKING": "1", "HOME": "/root",
                          "PYTORCH_NPU_ALLOC_CONF": "max_split_size_mb:128",
                          "ASCEND_GLOBAL_LOG_LEVEL": "3"}, rules)
    by = {f.op.split("=")[0]: f for f in found}
    assert set(by) == {"ASCEND_LAUNCH_BLOCKING", "PYTORCH_NPU_ALLOC_CONF"}
    # the advisor's own suggestion for this variable says =1 at the pin: the synchronize rule
    cited(by["ASCEND_LAUNCH_BLOCKING"].source, "unset ASCEND_LAUNCH_BLOCKING")
    cited(by["PYTORCH_NPU_ALLOC_CONF"].source, "PYTORCH_NPU_ALLOC_CONF")
    assert env_findings({"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}, rules) == []


def test_aicpu_dtype_rules_pick_the_cann_set_and_name_the_dtype(cat: Catalog) -> None:
    from opcheck.checker.aicpu_rules import aicpu_dtype_findings, rule_set
    from opcheck.core.oplist import Signature
    from opcheck.db.advisor import advisor_rules

    rules = advisor_rules(cat.engine)
    assert rule_set(rules, "7.0.RC1")[1] is False
    newest, inferred = rule_set(rules, "8.5.0")
    assert inferred and {r.cann for r in newest} == {"8.0.RC1,7.0.0"}
    assert rule_set(rules, "6.0.RC1") == ([], False)  # before every set: no rule applies

    def use(op: str, dtype: str) -> OpUse:
        return OpUse(op, 4, locations=["t.py:7"],
                     signatures=[Signature(inputs={"self": dtype, "other": dtype}, count=4)])

    ol = OpList("m", "runtime", "runtime-dispatch", ops=[
        use("aten::add.Tensor", "float64"), use("aten::nonzero", "float32"),
        use("aten::mul.Tensor", "float32")])
    old = {f.op: f for f in aicpu_dtype_findings(ol, rules, "7.0.RC1", 2)}
    # float64 is on no list of 7.0.RC1's __ALL__ rule; nonzero takes float16/bool/bf16 only
    assert set(old) == {"aten::add.Tensor", "aten::nonzero"}
    assert "dtype float64" in old["aten::add.Tensor"].why
    assert old["aten::add.Tensor"].instead.startswith("cast the inputs to float32")
    assert old["aten::nonzero"].per_step == 2.0
    path, line = old["aten::nonzero"].source.removeprefix("profiling advisor rule ").split(":")
    [found] = (FIXTURES / "mirror").glob(f"github/Ascend/mstt/*/{path}")
    assert "nonzero" in found.read_text(encoding="utf-8").splitlines()[int(line) + 1]
    new = {f.op for f in aicpu_dtype_findings(ol, rules, "8.5.0", 2)}
    # the later set lists float64 for every op type and has no nonzero rule of its own
    assert new == set()


def test_a_linear_layers_own_transpose_and_view_are_no_confusion_transpose() -> None:
    from opcheck.db.advisor import AdvisorRule

    rule = AdvisorRule("aten", "torch_npu.npu_confusion_transpose",
                       "(permute|transpose)-(contiguous){0,1}-(reshape|view)", "6.3.RC2", "",
                       "x.yaml", 7, "")
    inside = [OpUse("aten::t", 1, locations=["m.py:5"], parent="aten::linear",
                    via=["aten::linear"]),
              OpUse("aten::view", 1, locations=["m.py:5"], parent="aten::linear",
                    via=["aten::linear"])]
    assert match_chains(OpList("m", "runtime", "", ops=inside), [rule]) == []
    written = [OpUse("aten::permute", 1, locations=["m.py:6"]),
               OpUse("aten::view", 1, locations=["m.py:6"])]
    [hit] = match_chains(OpList("m", "runtime", "", ops=inside + written), [rule])
    assert hit.lines == ["m.py:6"]


def _ddp_run(cat: Catalog, name: str) -> Any:
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
    from opcheck.tracers.script import run_script

    uc = CheckUseCase(cat)
    run = run_script(SCRIPTS / name, max_steps=3, timeout=240, memory_mb=4096,
                     composites=uc.composites())
    report = uc.run(CheckRequest(Recorded(run.oplist), torch_npu="2.7.1.post2",
                                 hardware="910B")).report
    assert report.speed is not None
    return {f["op"]: f for f in report.speed["findings"] if f["kind"] == "setting"}


@pytest.mark.torch
def test_ddp_settings_at_the_line_that_wraps_the_model(cat: Catalog) -> None:
    from opcheck.scrapers.transplant_advice import PATH

    script = SCRIPTS / "train_ddp.py"
    found = _ddp_run(cat, "train_ddp.py")
    ddp = {k: f for k, f in found.items() if k.startswith("DistributedDataParallel")}
    # the trace stands a one-process passthrough in for DDP: the findings say they come from
    # the call's arguments
    assert len(ddp) == 3 and all("not made in the trace" in k for k in ddp)
    for f in ddp.values():
        assert _at(f["locations"]) == [_line(script, "model = DDP(")]
    bucket = next(f for k, f in ddp.items() if "bucket_cap_mb=None" in k)
    accumulate = next(f for k, f in ddp.items() if "no_sync" in k)
    unused = next(f for k, f in ddp.items() if "find_unused_parameters=True" in k)
    # the migration tool's advice, cited at its file and line; the line holds the key
    for f, key in ((bucket, '"bucket_cap_mb"'), (accumulate, '"no_sync"')):
        assert f["source"].startswith(f"migration tool (msTransplant) advice {PATH}:")
        line = int(f["source"].rsplit(":", 1)[1])
        [advice] = (FIXTURES / "mirror").glob(f"github/Ascend/mstt/*/{PATH}")
        assert key in advice.read_text(encoding="utf-8").splitlines()[line - 1]
        assert f["link"].endswith(f"#L{line}")
    assert "25 MB" in bucket["why"] and "bucket_cap_mb=500" in bucket["instead"]
    assert "no optimizer step between" in accumulate["why"]
    assert unused["source"].startswith("opcheck's rule")
    # the advice taken: a 500 MB bucket, no_sync() around the accumulating passes
    taken = _ddp_run(cat, "train_ddp_no_sync.py")
    assert [k for k in taken if k.startswith("DistributedDataParallel")] == []


def test_ddp_findings_need_accumulation_and_a_small_bucket() -> None:
    from opcheck.checker.runsettings import setting_findings

    built = {"kind": "ddp", "where": "t.py:4", "built": True, "no_sync": 0,
             "bucket_cap_mb": None, "find_unused_parameters": False}
    one_per_step = {"kind": "steps", "where": "", "backward": 3, "optimizer_step": 3,
                    "accumulated": 0}
    # no catalog rule for the bucket, one backward per step, no unused-parameter search
    assert setting_findings([built, one_per_step], 3) == []
    accumulating = {**one_per_step, "accumulated": 2}
    [f] = setting_findings([built, accumulating], 3)
    assert f.op == "DistributedDataParallel without no_sync() under gradient accumulation"
    assert f.locations == ["t.py:4"] and f.source.startswith("opcheck's rule")
    assert setting_findings([{**built, "no_sync": 4, "no_sync_forward": 4}, accumulating],
                            3) == []
    # no_sync() around the backward alone: DDP armed the all-reduce in the forward before it
    [idle] = setting_findings([{**built, "no_sync": 4, "no_sync_forward": 0}, accumulating], 3)
    assert "around the backward pass only" in idle.op and "in forward" in idle.why
