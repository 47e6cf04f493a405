"""The checker's judgements (verdict, exit code, order) from what the vocabulary says."""

from __future__ import annotations

import pytest

from opcheck.checker.check import Finding, Report, exit_code, fail_level, verdict_of
from opcheck.core.errors import UsageError
from opcheck.core.vocab import FailOn, Status, Verdict


def _report(*findings: Finding) -> Report:
    return Report(model="m", method="runtime", ir="runtime-dispatch", target={},
                  verdict=verdict_of(findings), fallback_calls=0, counts={}, ops=list(findings))


@pytest.mark.parametrize("statuses, verdict", [
    ((), Verdict.YES),
    ((Status.NPU, Status.COMPOSITE), Verdict.YES),
    ((Status.NPU, Status.CPU_FALLBACK), Verdict.MAYBE),
    ((Status.UNKNOWN,), Verdict.MAYBE),
    ((Status.CPU_FALLBACK, Status.UNSUPPORTED, Status.UNKNOWN), Verdict.NO),
])
def test_the_worst_status_decides_the_verdict(statuses: tuple[Status, ...],
                                              verdict: Verdict) -> None:
    assert verdict_of([Finding(f"op{i}", s) for i, s in enumerate(statuses)]) is verdict


def test_a_broken_restriction_turns_yes_into_maybe() -> None:
    assert verdict_of([Finding("op", Status.NPU, restricted=True)]) is Verdict.MAYBE


def test_a_restriction_does_not_soften_no() -> None:
    found = [Finding("a", Status.UNSUPPORTED), Finding("b", Status.NPU, restricted=True)]
    assert verdict_of(found) is Verdict.NO


@pytest.mark.parametrize("status, restricted, codes", [
    # codes under fail-on unsupported, fallback, restricted, never, slow
    (Status.NPU, False, (0, 0, 0, 0, 0)),
    (Status.NPU, True, (0, 0, 1, 0, 0)),
    (Status.CPU_FALLBACK, False, (0, 1, 1, 0, 1)),
    (Status.UNKNOWN, False, (0, 1, 1, 0, 1)),
    (Status.UNSUPPORTED, False, (1, 1, 1, 0, 1)),
])
def test_exit_code_per_fail_level(status: Status, restricted: bool,
                                  codes: tuple[int, ...]) -> None:
    rep = _report(Finding("op", status, restricted=restricted))
    assert tuple(exit_code(rep, level) for level in FailOn) == codes


def test_fail_level_accepts_the_plain_words() -> None:
    assert fail_level("fallback") is FailOn.FALLBACK
    assert exit_code(_report(Finding("op", Status.CPU_FALLBACK)), "fallback") == 1


def test_an_unknown_fail_level_names_the_choices() -> None:
    with pytest.raises(UsageError) as err:
        fail_level("sometimes")
    assert str(err.value) == ("--fail-on must be one of unsupported, fallback, restricted, "
                              "never, slow")


def test_a_speed_finding_fails_only_fail_on_slow() -> None:
    rep = _report(Finding("aten::_local_scalar_dense", Status.NPU))
    assert exit_code(rep, FailOn.SLOW) == 0  # no speed section: nothing slow known
    rep.speed = {"findings": [{"kind": "host_sync"}], "tips": []}
    assert [exit_code(rep, level) for level in FailOn] == [0, 0, 0, 0, 1]
    rep.speed = {"findings": [], "tips": [{"api": "torch_npu.npu_rms_norm"}]}
    assert exit_code(rep, FailOn.SLOW) == 0  # a tip is advice, not a finding


def test_problems_are_the_problem_statuses_and_restricted_ops() -> None:
    rep = _report(Finding("a", Status.NPU), Finding("b", Status.COMPOSITE, restricted=True),
                  Finding("c", Status.UNKNOWN))
    assert [f.op for f in rep.problems] == ["b", "c"]
