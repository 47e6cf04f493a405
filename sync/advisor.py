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
        if not ctx.source.exists(RULES):
            ctx.notes.append(f"advisor: no {RULES} in the source: the profiling advisor's "
                             "fused-op and fused-optimizer rules are not in the catalog")
            self._transplant(ctx)
            return
        try:
            got, sid = ctx.fetch(RULES, self.name)
            rows = ctx.parsed(got, advisor.parse)
        except OpcheckError as exc:
            ctx.failures.append(str(exc))
            return
        ctx.count(sid, len(rows))
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
        if not ctx.source.exists(TRANSPLANT):
            ctx.notes.append(f"advisor: no {TRANSPLANT} in the source: the migration tool's "
                             "precision and performance advice is not in the catalog")
            return
        try:
            got, sid = ctx.fetch(TRANSPLANT, self.name)
            rows = ctx.parsed(got, transplant_advice.parse, by_origin=True)
        except OpcheckError as exc:
            ctx.failures.append(str(exc))
            return
        ctx.count(sid, len(rows))
        url = f"https://github.com/Ascend/mstt/blob/{TRANSPLANT_PIN}/{transplant_advice.PATH}"
        ctx.data.advisor_rules += [
            AdvisorRuleRec(kind=transplant_advice.KIND_PREFIX + r.kind, api=r.api, pattern=r.pattern, cann="",
                           torch="", path=transplant_advice.PATH, line=r.line,
                           url=f"{url}#L{r.line}", source_id=sid)
            for r in rows
        ]

    def _checks(self, ctx: SyncContext, path: str) -> None:
        full = f"{MSTT}/{PIN}/{path}"
        if not ctx.source.exists(full):
            ctx.notes.append(f"advisor: no {full} in the source: its rules are not in the catalog")
            return
        try:
            got, sid = ctx.fetch(full, self.name)
            rows = ctx.parsed(got, advisor_checks.PARSERS[path], by_origin=True)
        except OpcheckError as exc:
            ctx.failures.append(str(exc))
            return
        ctx.count(sid, len(rows))
        url = f"https://github.com/Ascend/mstt/blob/{PIN}/{path}"
        ctx.data.advisor_rules += [
            AdvisorRuleRec(kind=r.kind, api=r.api, pattern=r.pattern, cann=r.cann, torch="",
                           path=path, line=r.line, url=f"{url}#L{r.line}", source_id=sid)
            for r in rows
        ]
