"""Dynamic shapes: a loop whose sequence length changes every step, run on the recorded device
and checked against the bundled catalog on 910A (jit compile on by default: acl_op compiles
per shape) and 910B (jit compile off: aclnn, no compile)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from testpaths import FIXTURES

from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

SCRIPT = FIXTURES / "scripts" / "varlen_loop.py"


@pytest.fixture(scope="module")
def usecase(bundled_catalog: Path) -> CheckUseCase:
    return CheckUseCase(Catalog.load(make_engine(bundled_catalog)))


@pytest.fixture(scope="module")
def varlen(usecase: CheckUseCase) -> Any:
    pytest.importorskip("torch")
    from opcheck.tracers.script import run_script

    # no budget: every one of the six lengths runs
    return run_script(SCRIPT, max_steps=0, timeout=240, memory_mb=4096,
                      composites=usecase.composites()).oplist


def _dynamic(usecase: CheckUseCase, oplist: Any, **kw: Any) -> list[dict[str, Any]]:
    report = usecase.run(CheckRequest(Recorded(oplist), torch_npu="2.7.1.post2", **kw)).report
    assert report.speed is not None
    return [f for f in report.speed["findings"] if f["kind"] == "dynamic_shape"]


@pytest.mark.torch
def test_a_changing_length_compiles_per_shape_on_910a(usecase: CheckUseCase,
                                                      varlen: Any) -> None:
    found = {f["op"]: f for f in _dynamic(usecase, varlen, hardware="910A")}
    relu = found["aten::relu"]
    assert relu["count"] == 6 and "6 input shapes in 6 steps" in relu["why"]
    assert "2x8x16" in relu["why"] and "jit compile on" in relu["why"]
    assert relu["locations"][0].endswith(f"varlen_loop.py:{_line('model(tokens)')}")
    assert "buckets" in relu["instead"] and "jit_compile=False" in relu["instead"]
    assert "EnvVariables.cpp" in relu["link"] and relu["inferred"]
    # parameters (optimizer state, weight gradients) have a shape each: not dynamic
    assert not {"aten::zeros_like", "aten::addmm"} & set(found)


@pytest.mark.torch
def test_no_compile_finding_where_aclnn_runs(usecase: CheckUseCase, varlen: Any) -> None:
    assert _dynamic(usecase, varlen, hardware="910B") == []
    # the user turning jit compile on brings it back on 910B
    assert _dynamic(usecase, varlen, hardware="910B", jit_compile=True)


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


@pytest.mark.torch
def test_the_scripts_own_compile_mode_decides(usecase: CheckUseCase, tmp_path: Path) -> None:
    from opcheck.tracers.script import run_script

    script = tmp_path / "varlen_jit_off.py"
    text = SCRIPT.read_text()
    script.write_text(text.replace("model = model.cuda()",
                                   "torch.npu.set_compile_mode(jit_compile=False)\n"
                                   "model = model.cuda()"))
    oplist = run_script(script, timeout=240, memory_mb=4096,
                        composites=usecase.composites()).oplist
    assert oplist.complete  # the recorded device answers set_compile_mode
    assert [s["jit_compile"] for s in oplist.settings if s["kind"] == "compile_mode"] == [False]
    assert _dynamic(usecase, oplist, hardware="910A") == []


@pytest.mark.torch
def test_a_shortened_loop_gives_a_lower_bound(usecase: CheckUseCase) -> None:
    pytest.importorskip("torch")
    from opcheck.tracers.script import run_script

    # the default budget ends the loop after two steps whose ops repeat: the count says so
    oplist = run_script(SCRIPT, timeout=240, memory_mb=4096,
                        composites=usecase.composites()).oplist
    relu = {f["op"]: f for f in _dynamic(usecase, oplist, hardware="910A")}["aten::relu"]
    assert "at least 2 input shapes in 2 steps traced" in relu["why"]
    assert "--max-steps 0" in relu["why"]
    # the tracer carries the cuts as a field (what the checker reads), and the note from it
    assert oplist.loop_cuts and all(c.ran >= 1 for c in oplist.loop_cuts)
    assert any(n.startswith("loops shortened") and oplist.loop_cuts[0].where in n
               for n in oplist.notes)


@pytest.mark.torch
def test_the_lower_bound_follows_the_structured_cuts(usecase: CheckUseCase, varlen: Any) -> None:
    from opcheck.core.oplist import LoopCut, OpList

    assert not varlen.loop_cuts  # --max-steps 0: no loop cut
    cut = replace(varlen, loop_cuts=[LoopCut("varlen_loop.py:20", 6, 40)])
    # the field survives the JSON the sandboxed tracer writes
    back = OpList.from_json(json.loads(cut.dumps()))
    assert back.loop_cuts == [LoopCut("varlen_loop.py:20", 6, 40)]
    relu = {f["op"]: f for f in _dynamic(usecase, back, hardware="910A")}["aten::relu"]
    assert "at least 6 input shapes in 6 steps traced" in relu["why"]
    # a note that merely reads like one is not a cut: the count is exact
    worded = replace(varlen, notes=[*varlen.notes, "loops shortened (by hand)"])
    relu = {f["op"]: f for f in _dynamic(usecase, worded, hardware="910A")}["aten::relu"]
    assert "6 input shapes in 6 steps (" in relu["why"] and "at least" not in relu["why"]


def test_op_lists_without_loop_cuts_still_load() -> None:
    from opcheck.core.oplist import LoopCut, OpList, loop_cuts_text

    old = {"schema_version": 2, "kind": "opcheck.oplist", "method": "run", "ops": []}
    assert OpList.from_json(old).loop_cuts == []
    cuts = [LoopCut("s.py:3", 2, 8), LoopCut("s.py:3", 1, 8), LoopCut("s.py:9", 3)]
    assert loop_cuts_text(cuts) == ("s.py:3 ran 2 of 8, then 1 of 8 iterations; "
                                    "s.py:9 ran 3 iterations")
