"""``--format github``: GitHub Actions workflow commands, one annotation per problem op at
each source line the trace saw it called from (``::error file=…,line=…,title=…::…``), so the
lines show up on the pull request's diff; a problem with no source line is annotated on no
file. Unsupported ops are errors, CPU fallbacks and restricted calls warnings, the rest
notices. Paths are made relative to ``$GITHUB_WORKSPACE`` (else the working directory), the
root GitHub resolves them from."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from opcheck.checker.formats.text import fix_hints, summary_line, target_line
from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.check import Finding, Report
    from opcheck.checker.formats.base import RenderContext

_LOC = re.compile(r"^(?P<file>.+?):(?P<line>\d+)$")
MAX_LOCATIONS = 5  # annotations per op (GitHub shows at most 10 errors and 10 warnings a step)


def _data(text: str) -> str:
    """A workflow command's message, escaped as the runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    """A workflow command's property value (file, title), escaped."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _level(f: Finding) -> str:
    if f.status is Status.UNSUPPORTED:
        return "error"
    if f.status is Status.CPU_FALLBACK or f.restricted:
        return "warning"
    return "notice"


def _relative(path: str, root: str) -> str:
    if os.path.isabs(path) and root:
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return rel
    return path


def to_github(report: Report) -> str:
    root = os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    fixes = {h.id: h for h in fix_hints(report)}
    lines = []
    for f in report.problems:
        what = f"{f.status}" + (" (restricted)" if f.restricted else "")
        msg = f"{f.op}: {what}, {f.count} call(s) on {target_line(report)}. {f.reason}".strip()
        for w in f.workarounds:
            h = fixes.get(w.id)
            msg += f"\nFix ({w.id}): {h.summary if h else w.title} (opcheck workaround show {w.id})"
        title = _prop(f"opcheck: {f.op} {what}")
        sites = [m for m in (_LOC.match(loc) for loc in f.locations) if m][:MAX_LOCATIONS]
        if not sites:
            lines.append(f"::{_level(f)} title={title}::{_data(msg)}")
        for m in sites:
            lines.append(f"::{_level(f)} file={_prop(_relative(m['file'], root))},"
                         f"line={m['line']},title={title}::{_data(msg)}")
    lines.append(f"::notice title=opcheck::{_data(summary_line(report))}")
    return "\n".join(lines) + "\n"


def render(report: Report, ctx: RenderContext) -> str:
    return to_github(report)
