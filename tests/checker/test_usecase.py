"""The check use case on its own (checker/usecase.py): the request decides the target and its
notes, the exit code (a script that did not finish is exit 2 unless the request accepts a
partial answer) and what a model input may be. The surfaces' equality is tested in
tests/cli/test_check_surfaces.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.checker.usecase import (
    EXIT_INPUT_FAILED,
    CheckRequest,
    CheckUseCase,
    ModelInput,
    Recorded,
    ScriptInput,
    record_model,
)
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.vocab import FailOn
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine


def _ops() -> OpList:
    # isin falls back to the CPU on 2.1.0.post17 (no kernel, fallback on)
    return OpList(model="m.py", method="runtime", ir="runtime-dispatch",
                  ops=[OpUse("aten::relu", 2, ["float32"]),
                       OpUse("aten::isin.Tensor_Tensor_out", 1, ["int64"])])


@pytest.fixture
def usecase(small_catalog_path: Path) -> CheckUseCase:
    return CheckUseCase(Catalog.load(make_engine(small_catalog_path)))


def test_the_target_notes_come_first_and_a_prefix_is_read_once(usecase: CheckUseCase) -> None:
    result = usecase.run(CheckRequest(Recorded(_ops()), torch_npu="2.1"))
    report = result.report
    assert report.target["torch_npu"] == "2.1.0.post17"
    assert report.notes[0].startswith("torch_npu 2.1 → 2.1.0.post17")
    assert report.notes[1] == "target torch_npu 2.1.0.post17: asked for with --torch-npu 2.1.0.post17"
    # the web page's wording for choosing another target
    web = usecase.run(CheckRequest(Recorded(_ops()), how="; pick another above")).report
    assert web.notes[0].endswith("; pick another above")


def test_fail_level_and_cpu_fallback_decide_the_exit_code(usecase: CheckUseCase) -> None:
    base = CheckRequest(Recorded(_ops()), torch_npu="2.1.0.post17")
    statuses = {f.op: f.status.value for f in usecase.run(base).report.ops}
    assert statuses["aten::isin.Tensor_Tensor_out"] == "cpu_fallback"
    assert usecase.run(base).exit_code == 0  # default level: unsupported
    from dataclasses import replace

    assert usecase.run(replace(base, fail_on=FailOn.FALLBACK)).exit_code == 1
    no_fallback = usecase.run(replace(base, cpu_fallback=False))
    assert {f.op: f.status.value for f in no_fallback.report.ops}[
        "aten::isin.Tensor_Tensor_out"] == "unsupported"
    assert no_fallback.exit_code == 1


def test_a_script_that_did_not_finish_is_exit_2_unless_partial(
        usecase: CheckUseCase, monkeypatch: pytest.MonkeyPatch) -> None:
    from opcheck.tracers import script

    ops = _ops()
    ops.complete, ops.stopped = False, "train.py:3: ValueError: boom"
    monkeypatch.setattr(script, "run_script", lambda *a, **k: script.ScriptRun(
        ops, error="train.py:3: ValueError: boom"))
    request = CheckRequest(ScriptInput(Path("train.py")), torch_npu="2.6.0.post5")
    failed = usecase.run(request)
    assert failed.exit_code == EXIT_INPUT_FAILED
    assert failed.input_problem == "raised at train.py:3: ValueError: boom"
    assert failed.report.verdict.value == "INCOMPLETE"  # the report is still made
    from dataclasses import replace

    partial = usecase.run(replace(request, allow_incomplete=True))
    assert partial.exit_code == 0 and partial.input_problem  # judged on the ops before it


def test_what_a_model_input_may_be(tmp_path: Path) -> None:
    never = lambda: pytest.fail("no trace runs")  # noqa: E731
    with pytest.raises(UsageError, match="is a Python file: run a script with `opcheck run"):
        record_model(ModelInput("train.py"), never)
    with pytest.raises(UsageError, match="--fast speeds up a runtime trace"):
        record_model(ModelInput("m.pt2", static=True, fast=True), never)
    with pytest.raises(UsageError, match="give a MODEL file"):
        record_model(ModelInput(), never)
    listed = tmp_path / "ops.json"
    listed.write_text(_ops().dumps(), encoding="utf-8")
    read = record_model(ModelInput(str(listed), fast=True), never)
    assert sorted(u.op for u in read.ops) == sorted(u.op for u in _ops().ops)
    assert "--fast applies to runtime traces: the op list was read as is" in read.notes
    assert ModelInput(model_spec="pkg:build").runs_model
    assert not ModelInput(str(listed), trust=True).runs_model
    assert not ModelInput("m.pt2").runs_model and ModelInput("m.pt2", trust=True).runs_model
