"""The run budget's loop rewriting, in process (no torch): which loops end early, and that
the code after them runs. A fake recorder stands in for the device's: "work" is an optimizer
step or a top forward call, a new record or dtype is what makes an iteration new."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from opcheck.tracers.script import Budget, _compile_budgeted, _run_main, budgeted


@pytest.fixture(autouse=True)
def _paths_from_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPCHECK_TRACE_CWD", str(tmp_path))  # locations as `s.py:3`


class Rec:
    def __init__(self) -> None:
        self.ops: dict[Any, Any] = {}

    def location(self) -> str:
        return ""


def _exec(tmp_path: Path, body: str, out: list[Any],
          max_steps: int = 20) -> tuple[Rec, Budget]:  # fmt: skip
    """Run ``body`` as a budgeted script; ``step(op, dtype)`` is a step recording one op."""
    rec = Rec()
    budget = Budget(rec, max_steps)

    def step(op: str, dtype: str = "float32") -> None:
        use = rec.ops.setdefault(op, SimpleNamespace(dtypes=[], count=0))
        if dtype not in use.dtypes:
            use.dtypes.append(dtype)
        budget.work += 1

    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(body))
    with budgeted(budget, str(tmp_path)):
        _run_main(_compile_budgeted(str(script)), str(script), {"step": step, "OUT": out})
    return rec, budget


def test_repeating_loops_end_early_and_the_code_after_them_runs(tmp_path: Path) -> None:
    seen: list[Any] = []
    rec, budget = _exec(tmp_path, """\
        epochs = []
        for epoch in range(50):
            for batch in range(8):
                step("aten::mm")
            epochs.append(epoch)
        step("aten::linalg_lstsq", "float64")
        OUT.append(epochs)
        """, seen)
    assert seen == [[0, 1]]  # the second epoch added nothing: the loop ended there
    assert "aten::linalg_lstsq" in rec.ops  # the code after the loops ran
    assert budget.cut_lines() == ("s.py:3 ran 2 of 8, then 1 of 8 iterations; "
                                  "s.py:2 ran 2 of 50 iterations")
    assert not budget.stopped


def test_a_new_dtype_keeps_the_loop_going_and_plain_loops_run_whole(tmp_path: Path) -> None:
    out: list[Any] = []
    _, budget = _exec(tmp_path, """\
        dtypes = ["float32", "float64", "float64", "float64", "float64", "float64"]
        for i, d in enumerate(dtypes):
            step("aten::add.Tensor", d)
            OUT.append(i)
        squares = []
        for i in range(1000):  # no step: plain Python, never shortened
            squares.append(i * i)
        n = 0
        while n < 100:
            n += 1
            if n > 50:
                step("aten::sum")
        else:
            OUT.append(("while done", n))
        def gen():
            try:
                for k in range(10):
                    yield k
            finally:
                OUT.append("generator closed")
        for k in gen():
            step("aten::sum")
        OUT.append(len(squares))
        """, out)

    # i=1 brought float64 (new), i=2 repeated: the loop ends after 3 iterations
    assert out[:3] == [0, 1, 2] and 3 not in out
    # the while loop: 50 iterations without work, then one new op, then one repeat; its
    # else clause runs as when its test turns false
    assert ("while done", 52) in out
    assert "generator closed" in out  # a shortened generator is closed as `break` closes it
    assert out[-1] == 1000
    cuts = budget.cut_lines()
    assert "s.py:2 ran 3 iterations" in cuts and "s.py:9 ran 52 iterations" in cuts
    assert "s.py:6" not in cuts
    assert "s.py:21 ran 1 iterations" in cuts  # its first iteration already repeated


def test_the_hard_stop_and_no_budget(tmp_path: Path) -> None:
    from opcheck.tracers.script import StopRun

    out: list[Any] = []
    # a loop the budget cannot shorten (in another module): the hard stop ends the run at
    # the step after the budget's last one
    budget = Budget(Rec(), 2)
    opt = object()
    budget.optimizer_step(opt)
    budget.optimizer_step(opt)
    with pytest.raises(StopRun):
        budget.optimizer_step(opt)
    assert budget.stopped == "stopped by the budget after 2 optimizer steps (--max-steps 2)"
    # --max-steps 0: nothing is shortened
    _, budget = _exec(tmp_path, """\
        for i in range(5):
            step("aten::mm")
            OUT.append(i)
        """, out, max_steps=0)
    assert out == [0, 1, 2, 3, 4] and not budget.cut_lines()


def test_loops_in_the_users_own_modules_are_shortened_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training loop in engine.py next to the script: rewritten on import, from source
    (nothing written to __pycache__); an installed module is not rewritten."""
    import sys

    (tmp_path / "engine_h30.py").write_text(textwrap.dedent("""\
        def fit(step):
            done = 0
            for epoch in range(40):
                step("aten::mm")
                done += 1
            return done
        """))
    installed = tmp_path / "site-packages"
    installed.mkdir()
    (installed / "lib_h30.py").write_text((tmp_path / "engine_h30.py").read_text())
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(tmp_path))
    out: list[Any] = []
    try:
        _, budget = _exec(tmp_path, """\
            import engine_h30
            import lib_h30
            OUT.append(engine_h30.fit(step))
            OUT.append(lib_h30.fit(step))
            """, out)
    finally:
        sys.modules.pop("engine_h30", None)
        sys.modules.pop("lib_h30", None)
    assert out == [2, 40]  # the installed module's loop ran whole
    assert budget.cut_lines() == "engine_h30.py:3 ran 2 of 40 iterations"
    assert not list(tmp_path.glob("__pycache__/engine_h30*"))
    import builtins

    assert not hasattr(builtins, "__opcheck_loop__")  # the block put everything back
