"""Findings → failures: :func:`diagnose` groups the findings of a log into problems, looks each
code up (``data/troubleshooting/codes/*.yaml`` in opcheck's words, and the catalog's
``aclnn_code`` rows synced from the CANN docs), links a failing aclnn function to the ATen ops
that call it (``npukernel.aclnn``) and applies the first rule (``data/troubleshooting/rules``)
whose every trigger (function, code, message, rejected dtype, product) holds. A code no table
knows is reported as unknown with what was parsed."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from opcheck.contrib.explain.codes import CodeBook, Rule, load_codes, load_rules
from opcheck.contrib.explain.facts import CatalogFacts, MessageFacts
from opcheck.contrib.explain.problem import ANCHORS, CodeInfo, Problem
from opcheck.contrib.explain.records import Finding, UserCall
from opcheck.contrib.explain.scan import CLAIMING, ExplainResult
from opcheck.contrib.explain.signatures import Signature
from opcheck.contrib.explain.sites import explain_sites

BEFORE, AFTER = 3, 40  # lines around a failure whose CANN lines belong to it


def _near(f: Finding, line: int) -> bool:
    return any(line - BEFORE <= n <= line + AFTER for n in f.lines)


def _group(findings: list[Finding]) -> list[Problem]:
    """Failures in order of first line: each anchor with the nearby lines that belong to it;
    the rest, each its own problem."""
    ordered = sorted(findings, key=lambda f: f.line)
    problems: list[Problem] = []
    claimed: set[int] = set()
    for i, f in enumerate(ordered):
        if f.kind not in ANCHORS or i in claimed:
            continue
        # a device exception or ACL call right after an aclnn failure is the same failure
        owner = next((p for p in reversed(problems) if f.kind != "aclnn_call"
                      and _near(f, p.anchor.line)), None)
        if owner is not None:
            owner.parts.append(f)
            claimed.add(i)
            continue
        p = Problem(f)
        claimed.add(i)
        # One failure rejects one dtype: a second rejected-dtype line nearby is another
        # failure (its own problem), with everything else on its line.
        dtype_lines = {g.line for g in ordered if g.kind == "dtype"}
        taken_dtype = next((g.line for g in ordered if g.kind == "dtype" and g.line == f.line), 0)
        for j, g in enumerate(ordered):
            if j in claimed or g.kind in ANCHORS or g.kind not in CLAIMING or not _near(g, f.line):
                continue
            if g.line in dtype_lines:
                if taken_dtype and g.line != taken_dtype:
                    continue
                taken_dtype = g.line
            p.parts.append(g)
            claimed.add(j)
        problems.append(p)
    for j, g in enumerate(ordered):
        if j not in claimed and g.kind in CLAIMING:
            # the findings of one line (a CANN code and the dtype it rejected) are one problem
            owner = next((p for p in reversed(problems) if p.anchor.line == g.line
                          and p.anchor.kind not in ANCHORS), None)
            if owner is not None:
                owner.parts.append(g)
            else:
                problems.append(Problem(g))
    return sorted(problems, key=lambda p: p.anchor.line)


def _main_code(p: Problem) -> str:
    numeric = [c for c in p.codes if c.isdigit()]
    return (numeric or p.codes or [""])[0]


def _code_info(p: Problem, codes: CodeBook, facts: CatalogFacts | None,
               code: str = "") -> CodeInfo | None:
    code = code or _main_code(p)
    if not code:
        return None
    fn = next(iter(p.functions), "")
    documented = facts.aclnn_codes(fn, code) if facts and code.isdigit() else []
    own = [d for d in documented if d.function and d.code == code]
    shared = next((d for d in documented if not d.function and d.code == code), None)
    entry = codes.lookup(code)
    exact = entry is not None and entry[0].code == code
    info = CodeInfo(code, known=exact or bool(own) or shared is not None, documented=own)
    if shared is not None:
        info.name, info.source = shared.name, shared.url
    elif own:
        info.name = own[0].name
    if entry is not None:
        e, src = entry
        info.meaning, info.fix = e.meaning, e.fix
        info.source = info.source or src
        if exact:
            info.name = info.name or e.name
        else:
            info.family = f"{e.code} ({e.name})" if e.name else e.code
    return info


class _Fill(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


def _apply(rule: Rule, p: Problem, products: dict[str, int]) -> str | None:
    """The rule's text filled in when every trigger holds for ``p``, else None."""
    w = rule.when
    fill = _Fill()
    if w.functions:
        fn = next((f for f in p.functions if any(fnmatch.fnmatchcase(f, pat) for pat in w.functions)), None)
        if fn is None:
            return None
    if w.codes and not set(w.codes) & set(p.codes):
        return None
    if w.silent and p.messages:
        return None
    if w.message is not None:
        rx = re.compile(w.message)
        m = next((m for m in map(rx.search, p.messages + [f.text for f in p.findings]) if m), None)
        if m is None:
            return None
        fill.update({k: v for k, v in m.groupdict().items() if v is not None})
    if w.dtypes:
        if not p.dtypes or p.dtypes[0] not in w.dtypes:
            return None
        fill["dtype"] = p.dtypes[0]
    if w.products:
        soc = next((s for s in products if any(fnmatch.fnmatchcase(s, pat) for pat in w.products)), None)
        if soc is None:
            return None
        fill["product"] = soc
    fill.setdefault("function", next(iter(p.functions), "the kernel"))
    fill.setdefault("code", next(iter(p.codes), ""))
    fill.setdefault("dtype", next(iter(p.dtypes), ""))
    return rule.rule.format_map(fill)


def diagnose(result: ExplainResult, *, facts: CatalogFacts | None = None,
             codes: CodeBook | None = None, rules: Iterable[Rule] | None = None,
             workaround_ops: dict[str, set[str]] | None = None,
             messages: MessageFacts | None = None) -> list[Problem]:
    """Group the findings of ``result`` into failures and explain each one.

    Ops named come only from the log (fallback and dtype lines) or from the catalog's link of
    an aclnn function the log names. A rule's workarounds are attached only when the rule
    holds and either names the failing function or shares an op with the failure
    (``workaround_ops``: workaround id → its ops)."""
    codes = codes if codes is not None else load_codes()
    rule_list = list(rules) if rules is not None else load_rules()
    sigs = {h.signature.id: h.signature for h in result.hits.values()}
    log_ops = set(result.ops)
    problems = _group(list(result.findings.values()))
    for p in problems:
        p.code = _code_info(p, codes, facts)
        p.other_codes = [info for c in p.codes if p.code is not None and c != p.code.code
                         for info in [_code_info(p, codes, None, c)] if info is not None]
        if facts is not None:
            p.ops = sorted({op for fn in p.functions for op in facts.aclnn_ops(fn)})
        for rule in rule_list:
            text = _apply(rule, p, result.products)
            if text is None:
                continue
            p.rule, p.rule_text = rule, text
            ops = set(p.ops) | log_ops
            p.workarounds = [w for w in rule.workarounds if rule.when.functions
                             or (workaround_ops is not None and workaround_ops.get(w, set()) & ops)]
            break
        if messages is not None:
            explain_sites(p, messages)
        p.call = user_call(p, result.calls)
        p.call_ops = call_ops(p)
        ids = dict.fromkeys(s for f in p.findings for s in f.signatures)
        p.signatures = [sigs[i] for i in ids if i in sigs and not sigs[i].generic]
    return problems


def user_call(p: Problem, calls: list[UserCall]) -> UserCall | None:
    """The user's frame of the failure: the traceback the failing line was raised in, else
    the traceback that names the failing function or kernel, else the nearest one that ends
    within the failure's lines (a runtime prints its error before Python raises)."""
    f = next((f for f in p.findings if f.where), None)
    if f is not None:
        got = next((c for c in calls if c.where == f.where and c.first <= f.line <= c.last), None)
        return got or UserCall(f.where, "", f.call_line, f.line, f.line, "")
    names = [*p.functions, *p.kernels]
    named = [c for c in calls if any(n in c.exception for n in names)]
    if named:
        return min(named, key=lambda c: abs(c.last - p.anchor.line))
    lines = [n for g in p.findings for n in g.lines or [g.line]]
    near = [c for c in calls
            if min(lines) - AFTER <= c.last and c.first <= max(lines) + AFTER]
    return min(near, key=lambda c: abs(c.last - p.anchor.line)) if near else None


def call_ops(p: Problem) -> list[str]:
    """The failure's ATen ops whose name the user's line calls (``torch.repeat_interleave(``,
    ``x.fill_(``)."""
    if p.call is None or not p.call.code:
        return []
    code = p.call.code
    return [op for op in p.ops
            if re.search(rf"\b{re.escape(op.removeprefix('aten::').split('.')[0])}\s*\(", code)]


def signature_workarounds(sig: Signature, ops: set[str],
                          workaround_ops: dict[str, set[str]]) -> list[str]:
    """The signature's workarounds for ops the log names (a workaround for no op: always)."""
    return [w for w in sig.workarounds
            if not workaround_ops.get(w) or workaround_ops[w] & ops]
