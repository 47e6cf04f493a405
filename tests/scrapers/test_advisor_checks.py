"""The profiling advisor's check rules besides the fusion patterns (``aicpu_rules.yaml``,
``environment_variable_info.yaml``, ``dataloader.yaml``, ``sync_batchnorm.yaml``,
``synchronize.yaml`` of Ascend/mstt): the real files at the pinned commit in the mirror under
tests/fixtures, and hand-written broken ones."""

from __future__ import annotations

import pytest
from testpaths import FIXTURES

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import advisor_checks as ac
from opcheck.scrapers.rows import Origin
from opcheck.sync.advisor import MSTT, PIN


def _read(path: str) -> tuple[str, Origin]:
    return (FIXTURES / "mirror" / MSTT / PIN / path).read_text(encoding="utf-8"), Origin(path)


def test_aicpu_dtype_rules_per_cann_version_with_their_line() -> None:
    text, origin = _read(ac.AICPU)
    rows = ac.parse_aicpu(text, origin)
    lines = text.splitlines()
    every = [r for r in rows if r.kind == "aicpu_dtype" and r.api == "__all__"]
    assert [r.cann for r in every] == ["7.0.RC1", "8.0.RC1,7.0.0"]
    old, new = (dict(p.split("=") for p in r.pattern.split(";")) for r in every)
    # float64 runs on the AI Core only from the later versions on
    assert "float64" not in old["in"].split(",") and "float64" in new["in"].split(",")
    assert old["ignore"].split(",") == ["cast", "tensorequal", "equal", "nonzero", "mul"]
    for r in rows:
        assert lines[r.line - 1].strip().endswith("Checker:")
    guide = {r.api: r for r in rows if r.kind == "aicpu_guide"}
    assert set(guide) == {"index", "indexput", "indexputv2", "argmin", "nonzero"}
    assert "Operator%20Replacement.md" in guide["index"].pattern and "<a" not in \
        guide["index"].pattern


def test_environment_variables_with_their_suggestion() -> None:
    text, origin = _read(ac.ENV)
    rows = {r.api: r for r in ac.parse_env(text, origin)}
    assert {"ASCEND_GLOBAL_LOG_LEVEL", "PYTORCH_NPU_ALLOC_CONF", "ASCEND_LAUNCH_BLOCKING",
            "HCCL_ALGO", "ACLNN_CACHE_LIMIT"} <= set(rows)
    alloc = rows["PYTORCH_NPU_ALLOC_CONF"]
    assert alloc.pattern == "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"
    assert text.splitlines()[alloc.line - 1] == "PYTORCH_NPU_ALLOC_CONF:"


@pytest.mark.parametrize(("path", "threshold", "word"), [
    (ac.DATALOADER, "dataloader.dataloader_duration_threshold", "pin_memory=True"),
    (ac.SYNC_BN, "sync_batchnorm.max_syncbn_num", "convert_sync_batchnorm"),
    (ac.SYNCHRONIZE, "synchronize.min_co_occurrence_ratio", "unset ASCEND_LAUNCH_BLOCKING"),
])
def test_advice_files_give_problem_threshold_and_solutions(path: str, threshold: str,
                                                           word: str) -> None:
    text, origin = _read(path)
    rows = ac.parse_advice(text, origin)
    lines = text.splitlines()
    assert threshold in {r.api for r in rows}
    [hit] = [r for r in rows if r.api.endswith(".solution") and word in r.pattern]
    assert word.split("=")[0].split()[-1] in lines[hit.line - 1]


@pytest.mark.parametrize(("parser", "path", "text", "message"), [
    (ac.parse_aicpu, ac.AICPU, "CommonChecker:\n  - DataTypeChecker:\n      op_type: [a]\n"
     "      cann_version: [1]\n      outputs: [x]\n", r"aicpu_rules\.yaml:5: unknown key 'outputs'"),
    (ac.parse_aicpu, ac.AICPU, "CommonChecker:\n  - ShapeChecker: {op_type: [a]}\n",
     r":2: CommonChecker: unknown checker ShapeChecker"),
    (ac.parse_aicpu, ac.AICPU, "Extra: 1\n", r":1: unknown key 'Extra'"),
    (ac.parse_env, ac.ENV, "A_B:\n  desc: x\n  suggest: y\n  level: 3\n",
     r"environment_variable_info\.yaml:4: unknown key 'level'"),
    (ac.parse_env, ac.ENV, "A_B:\n  desc: x\n", r":1: A_B: no suggest"),
    (ac.parse_advice, ac.DATALOADER, "problem: x\nsolutions: [a]\nthreshold: 3\n",
     r"dataloader\.yaml:3: unknown key 'threshold'"),
    (ac.parse_advice, ac.SYNC_BN, "problem: x\nsolutions:\n  - a: {desc: b, code: c}\n",
     r"sync_batchnorm\.yaml:3: unknown key 'code'"),
])
def test_changed_files_fail_loudly(parser: ac.Parser, path: str, text: str,
                                   message: str) -> None:
    with pytest.raises(ScrapeError, match=message):
        parser(text, Origin(path))
