"""The vendor's profiling advisor rules (msprof-analyze ``advisor`` in the public Ascend/mstt
repository), pinned to one commit: its affinity-API rules (``opcheck.scrapers.advisor``) and its
AI CPU dtype, environment-variable, DataLoader, SyncBatchNorm and synchronize rules
(``opcheck.scrapers.advisor_checks``), so a new advisor rule arrives with a sync and moving
:data:`PIN` is the whole update; and the migration tool's (msTransplant) precision and
performance advice (``opcheck.scrapers.transplant_advice``), a file of a later commit of the
same repository, pinned apart (:data:`TRANSPLANT_PIN`) so moving one pin never moves the other.

A source without the file (a mirror made before this upstream) gives no rows and a note: the
checker then has no advisor rules (no fused-op tips from them), and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opcheck.core.errors import OpcheckError
from opcheck.db.data import AdvisorRuleRec
from opcheck.scrapers import advisor, advisor_checks, transplant_advice
from opcheck.sync.context import SyncContext

MSTT = "github/Ascend/mstt"
PIN = "1924e9c75b6c7bf9274584d86035d296481fb8a7"
RULES = f"{MSTT}/{PIN}/{advisor.PATH}"
# the first commit holding precision_performance_advice.json (2025-12-26)
TRANSPLANT_PIN = "fb18c210aa6643f69e58205ebf93443e89dfc71d"
TRANSPLANT = f"{MSTT}/{TRANSPLANT_PIN}/{transplant_advice.PATH}"


class AdvisorRules:
    name = "advisor"
    reads = RULES
    parser = "opcheck.scrapers.advisor"
    adds = ("advisor_rules (msprof-analyze's affinity-API rules: op chains and optimizer steps; "
            "its AI CPU dtype, environment-variable and settings rules)")

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("advisor rules")
        got = _read(ctx, RULES, advisor.parse, by_origin=False,
                    missing="the profiling advisor's fused-op and fused-optimizer rules are")
        if got is None:
            if not ctx.source.exists(RULES):
                self._transplant(ctx)
            return
        rows, sid = got
        url = f"https://github.com/Ascend/mstt/blob/{PIN}/{advisor.PATH}"
        ctx.data.advisor_rules = [
            AdvisorRuleRec(kind=r.kind, api=r.api, pattern=r.pattern, cann=r.cann, torch=r.torch,
                           path=advisor.PATH, line=r.line, url=f"{url}#L{r.line}", source_id=sid)
            for r in rows
        ]
        for path in advisor_checks.PATHS:
            self._checks(ctx, path)
        self._transplant(ctx)

    def _transplant(self, ctx: SyncContext) -> None:
        got = _read(ctx, TRANSPLANT, transplant_advice.parse,
                    missing="the migration tool's precision and performance advice is")
        if got is None:
            return
        rows, sid = got
        url = f"https://github.com/Ascend/mstt/blob/{TRANSPLANT_PIN}/{transplant_advice.PATH}"
        ctx.data.advisor_rules += [
            AdvisorRuleRec(kind=transplant_advice.KIND_PREFIX + r.kind, api=r.api,
                           pattern=r.pattern, cann="", torch="", path=transplant_advice.PATH,
                           line=r.line, url=f"{url}#L{r.line}", source_id=sid)
            for r in rows
        ]

    def _checks(self, ctx: SyncContext, path: str) -> None:
        got = _read(ctx, f"{MSTT}/{PIN}/{path}", advisor_checks.PARSERS[path],
                    missing="its rules are")
        if got is None:
            return
        rows, sid = got
        url = f"https://github.com/Ascend/mstt/blob/{PIN}/{path}"
        ctx.data.advisor_rules += [
            AdvisorRuleRec(kind=r.kind, api=r.api, pattern=r.pattern, cann=r.cann, torch="",
                           path=path, line=r.line, url=f"{url}#L{r.line}", source_id=sid)
            for r in rows
        ]


def _read(ctx: SyncContext, full: str, parser: Callable[..., list[Any]], *, missing: str,
          by_origin: bool = True) -> tuple[list[Any], int] | None:
    """The rows of one pinned file and its source id; None (with a note when the source lacks
    the file, a failure when it does not parse) when there are none to add."""
    if not ctx.source.exists(full):
        ctx.notes.append(f"advisor: no {full} in the source: {missing} not in the catalog")
        return None
    try:
        got, sid = ctx.fetch(full, "advisor")
        rows = ctx.parsed(got, parser, by_origin=by_origin)
    except OpcheckError as exc:
        ctx.failures.append(str(exc))
        return None
    ctx.count(sid, len(rows))
    return rows, sid
