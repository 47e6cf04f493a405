"""``--format junit``: JUnit XML, one test case per op (a failure per problem), for CI."""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

if TYPE_CHECKING:
    from opcheck.checker.check import Report
    from opcheck.checker.formats.base import RenderContext


def to_junit(report: Report) -> str:
    failures = [f for f in report.ops if f.status.is_problem or f.restricted]
    name = f"opcheck {report.model} on torch_npu {report.target['torch_npu']}"
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f"<testsuites><testsuite name={quoteattr(name)} tests=\"{len(report.ops)}\" "
             f"failures=\"{len(failures)}\" errors=\"0\">"]
    for f in report.ops:
        attrs = f"classname={quoteattr(f'opcheck.{f.status}')} name={quoteattr(f.op)}"
        if f in failures:
            what = f.status + (" restricted" if f.restricted else "")
            lines.append(f"<testcase {attrs}><failure type={quoteattr(what)} "
                         f"message={quoteattr(f.reason)}>{escape(', '.join(f.locations))}"
                         "</failure></testcase>")
        else:
            lines.append(f"<testcase {attrs}/>")
    cap = report.capture  # --capture: one test case for the capture verdict
    if cap is not None:
        attrs = (f"classname={quoteattr('opcheck.capture')} "
                 f"name={quoteattr('ACL graph capture on ' + cap['release'])}")
        first = cap.get("first")
        if cap["verdict"] == "NO" and first:
            where = first["locations"][0] if first["locations"] else ""
            lines.append(f"<testcase {attrs}><failure type=\"capture\" "
                         f"message={quoteattr(first['op'] + ': ' + first['why'])}>"
                         f"{escape(where)}</failure></testcase>")
        else:
            lines.append(f"<testcase {attrs}/>")
    lines += _speed_cases(report)
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"


def _speed_cases(report: Report) -> list[str]:
    """The speed section as one suite: a failing case per finding (a slow path is a finding
    under ``--fail-on slow``)."""
    from opcheck.checker.speed import speed_lines

    speed = report.speed
    # CPU round trips are failing cases of the op suite already (cpu_fallback)
    pairs = [(s, t) for s, t in zip((speed or {}).get("findings", []),
                                    speed_lines(speed or {}), strict=True)
             if s["kind"] != "cpu_fallback"]
    if not pairs:
        return []
    findings = [s for s, _ in pairs]
    out = [f"</testsuite><testsuite name={quoteattr('opcheck speed')} tests=\"{len(findings)}\" "
           f"failures=\"{len(findings)}\" errors=\"0\">"]
    for s, text in pairs:
        out.append(f"<testcase classname={quoteattr('opcheck.slow.' + s['kind'])} "
                   f"name={quoteattr(s['op'] or 'tensor value')}><failure "
                   f"type={quoteattr(s['kind'])} message={quoteattr(text)}>"
                   f"{escape(', '.join(s['locations']))}</failure></testcase>")
    return out


def render(report: Report, ctx: RenderContext) -> str:
    return to_junit(report)
