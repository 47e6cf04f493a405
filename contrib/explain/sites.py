"""The advice writer: the lines of code that printed a failure's messages (the message index),
chosen by the failure's own context, their guards read aloud, the op types it names, and what
the user can change."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from opcheck.contrib.explain.facts import MessageFacts
from opcheck.contrib.explain.problem import Problem, SiteExplanation

if TYPE_CHECKING:
    from opcheck.db.messages import MessageRow

MAX_SITES = 3  # sites shown per template (the others are counted)
_SUPPORT_LIST = re.compile(r"support list\s*\[(?P<list>[^\]]{0,600})\]")
_RANK_LIMIT = re.compile(r"rank of (?P<param>\w+) (?P<op>[<>]|!=) \S+ \((?P<n>\d+)\)"
                         r"|larger than (?P<n2>\d+) dimensions|at least (?P<n3>\d+) dimensions")
_PARAM = re.compile(r"(?:dtype|rank|shape) of (?P<param>\w+)")
_WORDS = (
    (re.compile(r"->GetViewShape\(\)\.GetDimNum\(\)|\.GetDimNum\(\)|\.dim\(\)"), "'s rank"),
    (re.compile(r"->GetDataType\(\)|\.scalar_type\(\)|\.dtype\(\)"), "'s dtype"),
    (re.compile(r"->GetStorageFormat\(\)"), "'s storage format"),
    (re.compile(r"->GetViewShape\(\)|\.sizes\(\)"), "'s shape"),
    (re.compile(r"(?:GetCurrentPlatformInfo\(\)\.)?GetSocVersion\(\)"), "the SoC"),
    (re.compile(r"(?:op::)?SocVersion::"), ""),
    (re.compile(r"(?:op::)?(?:DataType|Format)::"), ""),
    (re.compile(r"\s*&&\s*"), " and "),
    (re.compile(r"\s*\|\|\s*"), " or "),
    (re.compile(r"!(?!=)"), "not "),
)


# a guard about the call's arguments (not an internal status): the user can act on it
_INPUT_WORDS = re.compile(r"'s (?:rank|dtype|shape|storage format)|\bdim\b|size|Size|dtype|format",
                          re.IGNORECASE)


def condition_words(cond: str) -> str:
    """A C++ guarding condition read aloud (accessors named, operators spelled out)."""
    for rx, words in _WORDS:
        cond = rx.sub(words, cond)
    return re.sub(r"\s{2,}", " ", cond).strip()


def op_type_of(kernel: str) -> str:
    """``IndexPutV2_7a1b…`` / ``Maximum_ee98…_high_performance_2230`` → the op type."""
    m = re.match(r"[A-Z][A-Za-z0-9]*", kernel)
    return m.group(0) if m else ""



def op_folder(path: str) -> str:
    """``math/expm1/op_api/aclnn_expm1.cpp`` → ``math/expm1`` (the operator's folder)."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if part.startswith("op_") and i:
            return "/".join(parts[:i])
    return "/".join(parts[:-1])


def snake(op_type: str) -> str:
    """``Expm1`` → ``expm1``, ``IndexPutV2`` → ``index_put_v2``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op_type).lower()


def _narrow(rows: list[MessageRow], p: Problem, hint: str,
            facts: MessageFacts | None = None) -> tuple[list[MessageRow], str]:
    """The rows the failure's own context points at: the [FILE:…] the line names, else the
    files of the failing aclnn function, else the helpers in its operator's folder, else the
    folder of the kernel or op type the log names; else all of them."""
    file = next((h for h in hint.split(":") if "." in h), "")
    if file:
        got = [r for r in rows if r.path.endswith("/" + file) or r.path == file]
        if got:
            return got, f"the file the log line names ({file})"
    fns = set(p.functions)
    if fns:
        got = [r for r in rows if fns & set(r.entries)]
        if got:
            return got, f"the failing function ({', '.join(sorted(fns))})"
        folders = {op_folder(path) for fn in sorted(fns) for path in _paths(facts, fn)}
        got = [r for r in rows if op_folder(r.path) in folders]
        if got:
            return got, f"a helper in the failing function's folder ({', '.join(sorted(fns))})"
    kernels = {snake(op_type_of(k)) for k in p.kernels} - {""}
    if kernels:
        got = [r for r in rows if op_folder(r.path).rsplit("/", 1)[-1] in kernels]
        if got:
            return got, f"the failing kernel ({', '.join(p.kernels)})"
    return rows, ""


def _paths(facts: MessageFacts | None, function: str) -> list[str]:
    paths_of = getattr(facts, "paths_of", None)
    return list(paths_of(function)) if paths_of is not None else []


def _sites(rows: list[MessageRow]) -> int:
    return len({(r.library, r.path, r.function) for r in rows})


def _likely(rows: list[MessageRow], best: str) -> list[MessageRow]:
    """Undecided: the rows of the line's best template first, CANN's own checks before the
    relays, the longest-lived site first."""
    return sorted(rows, key=lambda r: (r.template != best, r.kind != "cann",
                                       -len(r.versions.split(",")), r.path, r.line))


def _shown(rows: list[MessageRow], limit: int = MAX_SITES, *,
           keep_order: bool = False) -> list[MessageRow]:
    """One row per (library, path, function), at most ``limit``, in the order given or
    CANN's first."""
    seen: set[tuple[str, str, str]] = set()
    out: list[MessageRow] = []
    ordered = rows if keep_order else sorted(
        rows, key=lambda r: (r.kind != "cann", r.library, r.path, r.line))
    for r in ordered:
        key = (r.library, r.path, r.function)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out[:limit]


def _site_changes(site: SiteExplanation, p: Problem) -> list[str]:
    """What the user can change, as far as the message and its guard say."""
    out: list[str] = []
    r = site.rows[0] if site.rows else None
    cond = r.condition if r else ""
    low = site.template.lower()
    rank = _RANK_LIMIT.search(cond) or _RANK_LIMIT.search(site.text)
    if rank:
        n = rank["n"] or rank["n2"] or rank["n3"]
        pm0 = _PARAM.search(cond)
        param = rank["param"] or (pm0["param"] if pm0 else "the input")
        op = rank["op"] or (">" if rank["n2"] else "<")
        limit = f"at most {n}" if op == ">" else (f"at least {n}" if op == "<" else f"exactly {n}")
        out.append(f"reshape {param} to {limit} dimensions before the call (e.g. flatten leading "
                   "dimensions and restore them after)")
    listed = _SUPPORT_LIST.search(site.text)
    if listed is not None:
        names = [x.strip() for x in listed["list"].split(",") if x.strip()]
        pm = _PARAM.search(cond)
        param = pm["param"] if pm else "the input"
        if not names:
            socs = [n.split(":")[0] for n in (r.lists.split(";") if r else [])
                    if n.split(":", 1)[-1].strip()]
            out.append(f"none: the support list this SoC selected is empty, so {r.entries[0] if r and r.entries else 'the function'} "
                       "accepts no dtype here and no cast helps; run the op on another device "
                       "(CPU) or a SoC whose list is not empty"
                       + (f" (the file's non-empty lists: {', '.join(socs[:6])})" if socs else ""))
        else:
            out.append(f"cast {param} to one of {', '.join(names)} (the list the installed "
                       "CANN printed) around the call")
    if "internal format" in low:
        out.append("keep this op's inputs in ND format: torch.npu.config.allow_internal_format "
                   "= False, and no torch_npu.npu_format_cast to a private format before it")
    elif "format" in low and not out:
        out.append("pass the input in the format the message names (ND: .contiguous() and no "
                   "npu_format_cast before the call)")
    if not out and r is not None and site.why and r.kind in ("cann", "op_plugin") \
            and _INPUT_WORDS.search(site.why):
        out.append(f"change the call so that this no longer holds: {site.why}")
    return out


def explain_sites(p: Problem, facts: MessageFacts) -> None:
    """Fill ``p.sites``, ``p.op_types``, ``p.changes`` and ``p.notes`` from the message index
    and the engine facts."""
    for f in p.findings:
        if f.kind != "message" or any(s.template == f.template for s in p.sites):
            continue
        rows = [r for t in (f.template, *f.also) for r in facts.message_sites(t)]
        if not rows:
            continue
        chosen, why_chosen = _narrow(rows, p, f.hint, facts)
        if not why_chosen:  # the line's own template only, unless the context chose another
            chosen = [r for r in chosen if r.template == f.template] or chosen
            if p.functions:  # the failing function is known and no CANN file of its own
                # prints it: another operator's file would mislead (its lists, its guard);
                # op-plugin's and torch_npu's sites belong to no aclnn function
                chosen = [r for r in chosen if r.kind != "cann"]
        undecided = not why_chosen and (_sites(chosen) > 1 or not chosen)
        shown = _shown(_likely(chosen, f.template) if undecided else chosen,
                       2 if undecided else MAX_SITES, keep_order=undecided)
        site = SiteExplanation(shown[0].template if shown else f.template, f.text, shown,
                               _sites(rows), why_chosen,
                               condition_words(shown[0].condition) if shown else "",
                               undecided=undecided)
        p.sites.append(site)
        for c in _site_changes(site, p):
            if c not in p.changes:
                p.changes.append(c)
    # the check that rejected the call first, torch_npu's wrapper that relayed it last
    order = {"cann": 0, "codegen": 1, "op_plugin": 2, "torch_npu": 3}
    p.sites.sort(key=lambda x: min((order.get(r.kind, 4) for r in x.rows), default=4))
    fns = dict.fromkeys([*p.functions, *(e for s in p.sites for r in s.rows[:1]
                                         for e in r.entries[:2])])
    for fn in fns:  # the ATen ops that reach the function that printed it
        for op in facts.ops_reaching(fn):
            if op not in p.ops:
                p.ops.append(op)
    for kernel in dict.fromkeys(op_type_of(k) for k in p.kernels):
        if kernel and not any(o.op_type == kernel for o in p.op_types):
            p.op_types.append(facts.op_type(kernel))
    for f in p.findings:
        if f.kind == "compile" and f.op:
            op = op_type_of(f.op.removeprefix("trans_"))
            if op and not any(o.op_type == op for o in p.op_types):
                p.op_types.append(facts.op_type(op))
    for f in p.findings:
        if f.kind != "no_kernel":
            continue
        o = next((o for o in p.op_types if o.op_type == op_type_of(f.kernel)), None)
        where = (f"the catalog's CANN binary lists have {o.op_type} for {', '.join(sorted(o.socs))}"
                 if o is not None and o.socs else "")
        if f.message == "no binary":
            c = ("install (or repair) the CANN kernels package (opp_kernel) matching this SoC: "
                 f"the installed one has no binary for {f.kernel}" + (f"; {where}" if where else ""))
        else:
            soc = f.message.split()[1] if len(f.message.split()) > 1 else "this SoC"
            c = (f"{f.kernel} has no kernel for {soc} in the installed CANN: avoid the ATen ops "
                 "that reach it on this SoC, or run them on the CPU"
                 + (f"; {where}" if where else ""))
        if c not in p.changes:
            p.changes.append(c)
    for c in _acl_op_changes(p):
        if c not in p.changes:
            p.changes.append(c)
    has_message = any(f.kind == "message" for f in p.findings)
    texts = [m for m in p.messages] + [f.message for f in p.findings
                                       if f.kind == "exception" and f.message]
    if texts and not has_message and p.rule is None:
        p.notes.append(f"message not in the index (parsed: {texts[0][:160]!r}): no line of code "
                       "in CANN's op_api, op-plugin or torch_npu sources the catalog has prints "
                       "it, so nothing here says why")


def _acl_op_changes(p: Problem) -> list[str]:
    """What to change when the failing op type runs on the acl_op path: under graph capture,
    the call must leave the capture or take the aclnn path; an AI CPU exception names the
    kernels that put the op type on the AI CPU."""
    capture = any("Cannot run aclop operators" in f.text for f in p.findings)
    aicpu = any(f.kind == "device_exception" and f.op == "aicpu" for f in p.findings)
    out: list[str] = []
    for o in p.op_types:
        a = o.acl_op
        if a is None or not (capture or aicpu):
            continue
        ops = ", ".join(x.removeprefix("aten::") for x in (a.ops or a.through)[:8])
        yours = f" (your call: {p.where})" if p.where else ""
        if capture:
            out.append(f"the call running {o.op_type} is one of {ops}{yours} on its acl_op "
                       f"kernel (torch_npu {a.release}): keep it out of the captured region, or "
                       "let it take the aclnn path: jit compile off (torch.npu.set_compile_mode("
                       "jit_compile=False); the default only from Ascend910B1 on) and no internal "
                       "formats (torch.npu.config.allow_internal_format = False)")
        elif a.aicpu:
            pinned = ", ".join(x.removeprefix("aten::") for x in a.aicpu[:6])
            out.append(f"{o.op_type} ran on the AI CPU: the acl_op kernels of {pinned} pin it "
                       f"there ({', '.join(a.aicpu_sites[:2])}){yours}; on the aclnn path (jit compile "
                       "off) CANN routes it itself")
    return out
