"""The renderer: an explain report (:class:`~opcheck.contrib.explain.report.LogReport`) as the
terminal text of ``opcheck explain``, printed on the console the CLI hands in (its output
boundary: the CLI decides width and sanitising). Every piece of log or catalog text goes
through rich's ``escape``: a log line holding ``[bold]`` stays text."""

from __future__ import annotations

from typing import Any, Protocol

from rich.markup import escape

from opcheck.contrib.explain.facts import OpTypeFacts
from opcheck.contrib.explain.problem import CodeInfo, Problem, SiteExplanation
from opcheck.contrib.explain.report import LogReport


class Console(Protocol):
    def print(self, *objects: Any) -> None: ...


def render(rep: LogReport, con: Console) -> None:
    """Each failure, then the signatures no failure explains, then the ops' status."""
    for p in rep.problems:
        _problem(con, p)
    _signatures(con, rep)
    result = rep.result
    if not rep.problems and not rep.signatures:
        if result.error_lines:
            n, text = result.first_error
            con.print(f"no known problem in {result.lines} lines; {result.error_lines} line(s) "
                      f"look like errors, the first (line {n}): {escape(text[:200])}")
        else:
            con.print(f"no known problem in {result.lines} lines")
    _ops(con, rep)


def _problem(con: Console, p: Problem) -> None:
    a = p.anchor
    head = f"line {a.line}" + (f" (and {a.count - 1} more)" if a.count > 1 else "")
    con.print(f"[bold]{head}:[/bold] {escape(a.text[:200])}")
    _call(con, p)
    shown = {a.line}
    for f in p.parts:
        if f.line not in shown:
            shown.add(f.line)
            con.print(f"  [dim]line {f.line}: {escape(f.text[:160])}[/dim]")
    _codes(con, p)
    if p.kernels:
        con.print(f"  failing kernel: {escape(', '.join(p.kernels))}")
    if p.dtypes:
        con.print(f"  rejected dtype: {', '.join(p.dtypes)}")
    for cs in p.contract:
        where = (f"no {cs.dtype} on {', '.join(cs.rejects)}" if cs.rejects
                 else f"{cs.dtype} on every product it documents ({', '.join(cs.accepts)})")
        con.print(f"  CANN docs: {cs.function} takes {where}"
                  + (f"; it does on {', '.join(cs.accepts)}" if cs.rejects and cs.accepts else "")
                  + f" ({escape(cs.basis)})  {cs.url}")
    _advice(con, p)
    for site in p.sites:
        _site(con, site)
    for o in p.op_types:
        _op_type(con, o)
    for c2 in p.changes:
        con.print(f"  [bold]you can change:[/bold] {escape(c2)}")
    for note in p.notes:
        con.print(f"  note: {escape(note)}")
    if p.ops:
        con.print(f"  ATen ops the catalog links to {', '.join(p.functions)}: {', '.join(p.ops)}")
    if p.workarounds:
        con.print(f"  workarounds: {', '.join(p.workarounds)}")


def _call(con: Console, p: Problem) -> None:
    """The user's line, tied to the ATen op the failure names."""
    c = p.call
    if c is None:
        return
    code = f": {c.code}" if c.code else ""
    con.print(f"  your call: {escape(c.where)}{escape(code)}")
    if p.call_ops:
        via = f" (through {', '.join(p.functions)})" if p.functions else ""
        con.print(f"    it runs {', '.join(p.call_ops)}{via}: the failing op")
    elif p.ops and p.functions:
        con.print(f"    the failing {', '.join(p.functions)} runs for "
                  f"{', '.join(p.ops[:6])}: the call on this line reaches one of them")


def _codes(con: Console, p: Problem) -> None:
    c = p.code
    if c is not None:
        _code(con, p, c)
    for o in p.other_codes:
        what = f"{o.name}: {o.meaning}" if o.known else (
            f"unknown to opcheck's code tables; its family {o.family}: {o.meaning}"
            if o.family else "unknown to opcheck's code tables")
        con.print(f"  code {o.code}: {escape(what)}")


def _code(con: Console, p: Problem, c: CodeInfo) -> None:
    name = f" {c.name}" if c.name else ""
    if c.known:
        con.print(f"  code {c.code}{escape(name)}: {escape(c.meaning or 'documented by CANN')}")
    else:
        fam = f"; its family {escape(c.family)}: {escape(c.meaning)}" if c.family else ""
        parsed = ", ".join(x for x in (
            f"function {', '.join(p.functions)}" if p.functions else "",
            f"message {p.messages[0][:120]!r}" if p.messages else "") if x)
        con.print(f"  code {c.code}: unknown to opcheck's code tables{fam}"
                  + (f" (parsed: {escape(parsed)})" if parsed else ""))
    for d in c.documented[:3]:
        what = ", ".join(x for x in (d.triggers, d.params) if x) or "see the doc"
        con.print(f"  {d.function} documents {c.code} for: {escape(what)}"
                  + (f"  ({d.url}#L{d.line})" if d.url else ""))


def _advice(con: Console, p: Problem) -> None:
    """The rule broken, or the code table's advice when nothing more specific is known."""
    c = p.code
    if p.messages and p.rule is None:
        con.print(f"  CANN says: {escape(p.messages[0][:300])}")
    if p.rule is not None:
        con.print(f"  [bold]rule broken:[/bold] {escape(p.rule_text)}"
                  + (f"  ({p.rule.doc})" if p.rule.doc else ""))
        con.print(f"  cause: {escape(p.rule.cause)}")
        if f"rule {p.rule.id} fix" not in p.superseded:  # the site's own answer says otherwise
            con.print(f"  fix: {escape(p.rule.fix)}")
    elif c is not None and c.fix and not p.changes and not any(
            n.startswith("message not in the index") for n in p.notes):
        con.print(f"  what to do: {escape(c.fix)}")
    for sig in p.signatures:
        con.print(f"  also: {escape(sig.title)}: {escape(sig.fix)}")


def _signatures(con: Console, rep: LogReport) -> None:
    from rich.markdown import Markdown

    for hit, workarounds in rep.signatures:
        sig = hit.signature
        con.print(f"[bold]{escape(sig.title)}[/bold]  ({sig.category.value}; {hit.count}× "
                  f"from line {hit.first_line})")
        con.print(f"  [dim]{escape(hit.first_text[:160])}[/dim]")
        con.print(f"  cause: {escape(sig.cause)}")
        con.print(Markdown(sig.fix))
        if workarounds:
            con.print(f"  workarounds: {', '.join(workarounds)}")


def _ops(con: Console, rep: LogReport) -> None:
    if not rep.ops:
        return
    con.print(f"\nops named in the log, on torch_npu {rep.release} (CANN {rep.cann or '?'}):")
    for o in rep.ops:
        # an op that runs on the target needs no "first release" (it read "none" before)
        first_rel = o.first_npu_release or o.first_npu_release_any
        first = "" if o.status in ("npu", "composite") else (
            f"  first NPU release: {first_rel}" if first_rel
            else "  not in the catalog" if o.status == "unknown"
            else "  no NPU kernel in any release")
        via = f"  (via {o.via})" if o.via else ""
        wa = f"  workarounds: {', '.join(o.workarounds)}" if o.workarounds else ""
        con.print(f"  {o.op}: {o.status} {o.kernel}{first}{via}{wa}")


def _site(con: Console, site: SiteExplanation) -> None:
    more = site.total - len(site.rows)
    chosen = f" (chosen by {site.narrowed_by})" if site.narrowed_by else ""
    if site.undecided and not site.rows:
        con.print(f"  printed by one of {site.total} sites in the index, none in the failing "
                  "function's own files or folder: its own check is not among the sources the "
                  "catalog has")
    elif site.undecided:
        con.print(f"  printed by one of {site.total} sites; the log does not say which (no "
                  "failing function, kernel or file of its own prints it); the two most likely:")
    for i, r in enumerate(site.rows):
        head = ("maybe" if site.undecided else "printed by") if i == 0 else "or by"
        entry = f" of {', '.join(r.entries[:3])}" if r.entries else ""
        func = f"{r.function}(){entry}" if r.function else (entry.removeprefix(" of ") or r.path)
        con.print(f"  {head} {escape(func)}: {r.library} {escape(r.path)}:{r.line} "
                  f"[{escape(r.versions)}]{chosen if i == 0 else ''}")
        if r.url:
            con.print(f"    {r.url}")
        if r.condition:
            con.print(f"    when: {escape(site.why if i == 0 else r.condition)}")
        if r.lists and i == 0 and not site.undecided:  # another file's lists would mislead
            lists = "; ".join(f"{n}: {v or '(empty)'}" for n, _, v in
                              (x.partition(":") for x in r.lists.split(";")))
            con.print(f"    dtype lists it refers to: {escape(lists[:400])}")
    if more > 0 and not site.undecided:
        con.print(f"    ({more} other site(s) in the index print the same text)")


def _op_type(con: Console, o: OpTypeFacts) -> None:
    _acl_op(con, o)
    if not o.known:
        con.print(f"  op type {escape(o.op_type)}: not in CANN's open operator libraries the "
                  "catalog has (a closed built-in op: engine and binaries unknown)")
        return
    # an op type dozens of aclnn functions launch is a shared step (Cast, Contiguous): its
    # callers say nothing about this failure
    shared = max((len(f) for f in o.engines.values()), default=0) > 10
    eng = "; ".join(f"{e} (launched by {len(f)} aclnn functions)" if shared
                    else f"{e} (launched by {', '.join(f[:4])})" for e, f in sorted(o.engines.items()))
    socs = ", ".join(f"{s} [{', '.join(v)}]" for s, v in sorted(o.socs.items()))
    con.print(f"  op type {escape(o.op_type)}: " + ", ".join(x for x in (
        f"runs on {eng}" if eng else "",
        f"binaries/AI Core configs for {socs}" if socs else "no SoC has a binary in the catalog")
        if x))
    if o.socs:
        con.print("    (the open libraries' lists only: on a SoC not listed it may be a closed "
                  "built-in kernel, unknown here)")
    if o.ops and not shared:
        con.print(f"    ATen ops reaching it: {', '.join(o.ops[:12])}"
                  + (f" (+{len(o.ops) - 12})" if len(o.ops) > 12 else ""))
    if o.url:
        con.print(f"    {o.url}")


def _acl_op(con: Console, o: OpTypeFacts) -> None:
    """The ATen ops whose acl_op kernels run the op type (op-plugin's OpCommand)."""
    a = o.acl_op
    if a is None:
        return

    def names(ops: list[str], limit: int = 12) -> str:
        shown = ", ".join(x.removeprefix("aten::") for x in ops[:limit])
        return shown + (f" (+{len(ops) - limit})" if len(ops) > limit else "")

    con.print(f"  op type {escape(o.op_type)} on the acl_op path (torch_npu {escape(a.release)}): "
              f"the acl_op kernels of {escape(names(a.ops) or 'no op directly')}"
              + (f"; through an ATen call they make: {escape(names(a.through, 8))}"
                 if a.through else ""))
    if a.aicpu:
        con.print(f"    pinned to the AI CPU (_exclude_engines) in: {escape(names(a.aicpu))}")
    if a.sites:
        con.print(f"    {escape(', '.join(a.sites[:3]))}" + (f"  {escape(a.url)}" if a.url else ""))
