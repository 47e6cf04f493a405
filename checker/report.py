"""Machine and hand-over formats of a Report: JSON, Markdown, SARIF 2.1.0, JUnit XML.

Pure functions from Report to text; the CLI's terminal table lives in ``opcheck.cli``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from opcheck import __version__
from opcheck.checker.check import Finding, Report

FORMATS = ("table", "json", "markdown", "sarif", "junit")
_LOC = re.compile(r"^(?P<file>.+?):(?P<line>\d+)$")


def to_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


def _target_line(report: Report) -> str:
    t = report.target
    cann = f"CANN {t['cann']}" if t.get("cann") else "CANN unknown (not in the compatibility tables)"
    return f"torch_npu {t['torch_npu']} (torch {t['torch']}, {cann})"


def summary_line(report: Report) -> str:
    c = report.counts
    return (
        f"{report.verdict}: {c['npu']} on NPU, {c['composite']} composite, "
        f"{c['cpu_fallback']} CPU fallback ({report.fallback_calls} CPU round-trips per "
        f"{'step' if report.mode == 'train' else 'forward'}), {c['unsupported']} unsupported, "
        f"{c['unknown']} unknown"
        + (f", {sum(1 for f in report.ops if f.restricted)} restricted"
           if any(f.restricted for f in report.ops) else "")
    )


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(report: Report, *, environment: dict[str, str] | None = None) -> str:
    out = [f"# NPU migration report: {report.model or 'model'}", ""]
    out += [f"**Verdict: {summary_line(report)}**", "", f"Target: {_target_line(report)}", ""]
    if environment:
        out += ["## Environment", "", "| component | version |", "|---|---|"]
        out += [f"| {k} | {_md_escape(v)} |" for k, v in environment.items()]
        out.append("")
    out += ["## Coverage", "", "| status | ops | calls |", "|---|---|---|"]
    for status in ("npu", "composite", "cpu_fallback", "unsupported", "unknown"):
        calls = sum(f.count for f in report.ops if f.status == status)
        out.append(f"| {status} | {report.counts[status]} | {calls} |")
    out.append("")
    out.append(f"Listing: {report.method} ({report.ir}), mode {report.mode}.")
    for warning in report.warnings:
        out.append(f"> Warning: {warning}")
    out.append("")
    problems = report.problems
    out += ["## Problems", ""]
    if not problems:
        out.append("None: every op runs on the NPU.")
    else:
        out += ["| op | status | calls | dtypes | where | first NPU release | workarounds |",
                "|---|---|---|---|---|---|---|"]
        for f in problems:
            status = f.status + (" (restricted)" if f.restricted else "")
            where = ", ".join((f.locations or f.modules)[:2])
            first = f.first_npu_release or (f"{f.first_npu_release_any} (other torch line)"
                                            if f.first_npu_release_any else "none yet")
            wa = ", ".join(w.id for w in f.workarounds) or "-"
            out.append(f"| `{f.op}` | {status} | {f.count} | {', '.join(f.dtypes)} | "
                       f"{_md_escape(where)} | {first} | {wa} |")
        out.append("")
        out += ["### Details", ""]
        for f in problems:
            out.append(f"- `{f.op}`: {_md_escape(f.reason)}")
            if len(f.via) > 1:
                out.append(f"  - via: {' → '.join(f.via)}")
            for r in f.restrictions:
                out.append(f"  - restriction ({r.api}): {r.text}")
            for w in f.workarounds:
                out.append(f"  - workaround `{w.id}`: {w.title}")
    if report.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in report.notes]
    return "\n".join(out) + "\n"


def _level(f: Finding) -> str:
    return "error" if f.status == "unsupported" else "warning"


def _sarif_locations(f: Finding) -> list[dict[str, Any]]:
    locs = []
    for loc in f.locations:
        m = _LOC.match(loc)
        if m:
            locs.append({"physicalLocation": {
                "artifactLocation": {"uri": m["file"]},
                "region": {"startLine": int(m["line"])},
            }})
    return locs


def to_sarif(report: Report) -> str:
    rules = {
        "unsupported": "Op has no NPU kernel and cannot run on this release",
        "cpu_fallback": "Op falls back to the CPU (host-device copies on every call)",
        "unknown": "Op is not in the catalog",
        "restricted": "A dtype seen in the trace is outside the op's documented restriction",
    }
    results = []
    for f in report.problems:
        rule = f.status if f.status != "npu" and f.status != "composite" else "restricted"
        msg = f"{f.op}: {f.status}" + (" (restricted)" if f.restricted else "")
        msg += f", {f.count} call(s) on {_target_line(report)}. {f.reason}"
        if f.workarounds:
            msg += " Workarounds: " + ", ".join(w.id for w in f.workarounds) + "."
        result: dict[str, Any] = {"ruleId": rule, "level": _level(f), "message": {"text": msg},
                                  "properties": {"op": f.op, "count": f.count}}
        locs = _sarif_locations(f)
        if locs:
            result["locations"] = locs
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "opcheck", "version": __version__,
                "rules": [{"id": k, "shortDescription": {"text": v}} for k, v in rules.items()],
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def to_junit(report: Report) -> str:
    failures = [f for f in report.ops if f.status in ("unsupported", "cpu_fallback", "unknown")
                or f.restricted]
    name = f"opcheck {report.model} on torch_npu {report.target['torch_npu']}"
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f"<testsuites><testsuite name={quoteattr(name)} tests=\"{len(report.ops)}\" "
             f"failures=\"{len(failures)}\" errors=\"0\">"]
    for f in report.ops:
        attrs = f"classname={quoteattr('opcheck.' + f.status)} name={quoteattr(f.op)}"
        if f in failures:
            what = f.status + (" restricted" if f.restricted else "")
            lines.append(f"<testcase {attrs}><failure type={quoteattr(what)} "
                         f"message={quoteattr(f.reason)}>{escape(', '.join(f.locations))}"
                         "</failure></testcase>")
        else:
            lines.append(f"<testcase {attrs}/>")
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"
