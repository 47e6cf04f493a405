"""The format registries: names, validation, help and loading come from one list."""

from __future__ import annotations

import json
from importlib import import_module

import pytest

from opcheck.checker.check import Finding, Report
from opcheck.checker.formats import REPORT_FORMATS, ZOO_FORMATS, Format, Registry, RenderContext
from opcheck.checker.formats.report_sarif import rules
from opcheck.checker.formats.text import summary_line
from opcheck.core.errors import UsageError
from opcheck.core.vocab import Status, Verdict


def _report(*findings: Finding, mode: str = "inference") -> Report:
    counts = {s.value: sum(1 for f in findings if f.status is s) for s in Status}
    return Report(model="m", method="runtime", ir="runtime-dispatch",
                  target={"torch_npu": "2.6.0", "torch": "2.6.0", "cann": ""},
                  verdict=Verdict.MAYBE, counts=counts, mode=mode, ops=list(findings),
                  fallback_calls=sum(f.count for f in findings if f.status is Status.CPU_FALLBACK))


def test_report_formats_keep_the_cli_order() -> None:
    assert REPORT_FORMATS.names == ("table", "json", "markdown", "sarif", "csv", "junit")


def test_zoo_formats_keep_the_cli_order() -> None:
    assert ZOO_FORMATS.names == ("table", "markdown", "csv", "json")


def test_help_text_is_the_choices() -> None:
    assert REPORT_FORMATS.help_text() == "table | json | markdown | sarif | csv | junit"


def test_unknown_format_is_a_usage_error_naming_the_choices() -> None:
    with pytest.raises(UsageError, match=r"unknown format 'xml' \(choose from table, markdown, "
                                         r"csv, json\)"):
        ZOO_FORMATS.get("xml")


@pytest.mark.parametrize("registry", [REPORT_FORMATS, ZOO_FORMATS], ids=["report", "zoo"])
def test_every_text_format_module_has_a_render_function(registry: Registry[object]) -> None:
    for name in registry.names:
        fmt = registry.get(name)
        if fmt.terminal:
            continue
        module = import_module(f"opcheck.checker.formats.{fmt.module}")
        assert callable(module.render), name


def test_a_terminal_format_is_not_rendered_to_text() -> None:
    with pytest.raises(UsageError, match="drawn on a terminal"):
        REPORT_FORMATS.renderer("table")


def test_a_format_names_a_module_or_is_terminal() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Format("x", "neither")
    with pytest.raises(ValueError, match="exactly one"):
        Format("x", "both", "report_json", terminal=True)


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        Registry("report", [Format("json", "a", "report_json"), Format("json", "b", "zoo_json")])


def test_a_new_registry_renders_through_the_named_module() -> None:
    reg: Registry[Report] = Registry("report", [Format("j", "JSON again", "report_json")])
    text = reg.render("j", _report(Finding("aten::relu", Status.NPU, count=1)))
    assert json.loads(text)["ops"][0]["status"] == "npu"


def test_markdown_gets_the_environment_from_the_context() -> None:
    rep = _report(Finding("aten::relu", Status.NPU, count=1))
    md = REPORT_FORMATS.render("markdown", rep, RenderContext(environment={"torch": "2.6|x"}))
    assert "| torch | 2.6\\|x |" in md
    assert "## Environment" not in REPORT_FORMATS.render("markdown", rep)


def test_only_markdown_wants_the_environment() -> None:
    assert [n for n in REPORT_FORMATS.names if REPORT_FORMATS.get(n).wants_environment] == [
        "markdown"]


def test_status_enums_serialise_as_their_strings() -> None:
    rep = _report(Finding("aten::isin", Status.CPU_FALLBACK, count=2))
    doc = REPORT_FORMATS.render("json", rep)
    assert '"status": "cpu_fallback"' in doc and '"verdict": "MAYBE"' in doc
    assert json.loads(doc)["counts"]["cpu_fallback"] == 1


def test_summary_line_counts_every_status_in_order() -> None:
    rep = _report(Finding("a", Status.NPU, count=1), Finding("b", Status.CPU_FALLBACK, count=3),
                  Finding("c", Status.UNKNOWN, count=1, restricted=True), mode="train")
    assert summary_line(rep) == (
        "MAYBE: 1 on NPU, 0 composite, 1 CPU fallback (3 CPU round-trips per step), "
        "0 unsupported, 1 unknown, 1 restricted")


def test_sarif_rules_cover_every_problem_status() -> None:
    problem = {s.value for s in Status if s.is_problem}
    assert set(rules()) == problem | {"restricted"}


def test_junit_fails_only_problem_or_restricted_ops() -> None:
    rep = _report(Finding("ok", Status.COMPOSITE, count=1),
                  Finding("limited", Status.NPU, count=1, restricted=True),
                  Finding("slow", Status.CPU_FALLBACK, count=1))
    junit = REPORT_FORMATS.render("junit", rep)
    assert 'failures="2"' in junit
    assert '<testcase classname="opcheck.composite" name="ok"/>' in junit
    assert '<failure type="npu restricted"' in junit
