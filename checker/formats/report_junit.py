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
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"


def render(report: Report, ctx: RenderContext) -> str:
    return to_junit(report)
