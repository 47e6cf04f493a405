"""op-plugin's hand-written op_api kernels (``op_plugin/ops/opapi/*.cpp``): which aclnn functions
each ATen overload's kernel calls.

Reading a source file (:func:`parse_kernel_source`) gives every function defined at namespace
level (``namespace op_api { … }``), its parameters, and the aclnn calls in its body:

* ``exec``: ``EXEC_NPU_CMD(aclnnXxx, …)`` and the other ``EXEC_…`` launch macros
  (``EXEC_NPU_NO_FORMAT_CHECK_CMD``, ``EXEC_NPU_CMD_SYNC``, ``EXEC_GET_MAX_WORKSPACE_CMD``…);
* ``compat``: ``DO_COMPATIBILITY(aclnnXxx, acl_op::yyy(…))``: when the installed CANN lacks
  ``aclnnXxx`` the kernel falls back to the acl_op (graph-mode) kernel ``acl_op::yyy``: a slow
  path. ``DO_MATMUL_COMPATIBILITY``/``DO_ADDMM_COMPATIBILITY`` are the same with a macro-built
  fallback (``fallback`` empty);
* ``probe``: ``check_aclnn_kernel_available("aclnnXxx")``: the kernel branches on whether
  the function exists (it calls it only when present).

Calls made in a helper of the same file (``add_out_npu_nocheck``) are credited to the kernels
that call the helper, with ``via`` naming the helper chain. Calls into another kernel
(``op_api::add_out(…)`` or a kernel of another file called by name) are followed across the
pin's files by :func:`link_pin` and marked ``via="op_api:add_out"``.

Which ATen overload a C++ function implements is not written in the file: op-plugin generates
the registration from ``op_plugin_functions.yaml``, naming the C++ function as torchgen's
dispatcher signature does: the schema's base name (``add``, ``add_``), ``_out`` for an out
variant, ``_symint`` for entries of the ``symint:`` section, one C++ parameter per schema
argument in schema order. Overloads share a name (``add(Tensor, Tensor, Scalar)`` and
``add(Tensor, Scalar, Scalar)``) and are told apart by parameter types. :func:`link_pin` does
the same matching and says how good it was in ``match``: ``signature`` (the name and every
parameter's type class agree with one overload), ``arity`` (name and parameter count agree,
the types could not all be classified), ``name`` (the only overload by that name; the
parameters were not compared). Rows never claim more than that.

Pure: text in, rows out. Comments and string literals are blanked before scanning (keeping
line numbers), so commented-out calls do not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

from opcheck.core.errors import ScrapeError
from opcheck.core.opname import split_top_level
from opcheck.scrapers.opapi_types import cpp_class, cpp_kernel_name, schema_arg_classes
from opcheck.scrapers.rows import KernelRow, Origin

__all__ = [
    "AclnnCall",
    "CppFunction",
    "OpAclnnRow",
    "PinLink",
    "cpp_kernel_name",
    "link_pin",
    "parse_kernel_source",
    "schema_arg_classes",
]


@dataclass(frozen=True)
class AclnnCall:
    aclnn: str
    kind: str  # exec | compat | probe
    line: int
    fallback: str = ""  # acl_op::add for a DO_COMPATIBILITY call


@dataclass(frozen=True)
class VersionGuard:
    """``#if VERSION_BETWEEN(V2R1, V2R7)`` around a definition (torch 2.1 … 2.7; ``hi`` None
    for ``VERSION_NEWEST``); ``negated`` for ``#if !VERSION_BETWEEN`` or the ``#else`` branch."""

    lo: str
    hi: str | None
    negated: bool = False

    def admits(self, torch: str) -> bool:
        v = _minor_key(torch)
        inside = _minor_key(self.lo) <= v and (self.hi is None or v <= _minor_key(self.hi))
        return inside != self.negated


@cache  # pure, and called for the same few strings over and over
def _minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(x) for x in minor.split("."))


@dataclass(frozen=True)
class CppFunction:
    name: str
    params: tuple[tuple[str, str], ...]  # (C++ type, name)
    static: bool
    line: int  # line of the function name
    end_line: int
    calls: tuple[AclnnCall, ...]  # in the body itself
    callees: tuple[str, ...]  # other functions called by bare name (helpers or kernels)
    op_api_callees: tuple[str, ...]  # op_api::xxx(…) calls
    guards: tuple[VersionGuard, ...] = ()  # the #if VERSION_BETWEEN blocks it is defined in
    # (callee, arguments) of every call by name or through op_api::, to tell which overload
    # of a delegate is called
    arities: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def admits(self, torch: str) -> bool:
        """Whether this definition is compiled for torch ``major.minor``."""
        return all(g.admits(torch) for g in self.guards)

    def param_classes(self) -> tuple[str, ...]:
        return tuple(cpp_class(t) for t, _ in self.params)


@dataclass(frozen=True)
class OpAclnnRow:
    """One aclnn function an ATen overload's op_api kernel calls (directly or via helpers)."""

    op: str  # canonical aten::add.Tensor / npu::npu_foo
    torch: tuple[str, ...]  # torch minors of the YAML entry (and the #if guard) it holds for
    kernel: str  # C++ function name
    aclnn: str
    kind: str  # exec | compat | probe
    fallback: str  # acl_op::add (compat only)
    via: str  # "" (in the kernel), "helper_a>helper_b", "op_api:add_out"
    match: str  # signature | arity | name (see the module docstring)
    path: str  # source file
    line: int  # line of the call


@dataclass
class PinLink:
    rows: list[OpAclnnRow] = field(default_factory=list)
    # op_api ops of the YAML with no hand-written kernel here (generated from gen_opapi, or
    # implemented under another name): (op, reason)
    unlinked: list[tuple[str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- C++ scanning

_STRING_OR_COMMENT = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
_AVAILABLE = re.compile(r'check_aclnn_kernel_available\s*\(\s*"(aclnn\w+)"\s*\)')
_EXEC = re.compile(r"\b(EXEC_[A-Z_]*|[A-Z_]*_CMD[A-Z_]*)\s*\(\s*(aclnn\w+)")
_COMPAT = re.compile(r"\b(DO_[A-Z_]*COMPATIBILITY)\s*\(\s*(aclnn\w+)\s*,\s*(acl_op::\w+)?")
_CALL = re.compile(r"(?<![\w:.>])(op_api::)?([A-Za-z_]\w*)\s*\(")
_HEAD = re.compile(r"([A-Za-z_][\w:]*)\s*\((.*)\)\s*(?:const\s*)?(?:noexcept\s*)?$", re.S)
_BRACES = re.compile(r"[;{}]")
_NOT_FUNCS = {"if", "for", "while", "switch", "return", "catch", "sizeof", "decltype",
              "TORCH_CHECK", "defined"}


def _blank(m: re.Match[str]) -> str:
    text = m.group(0)
    if text.startswith('"') and re.fullmatch(r'"aclnn\w+"', text):
        return text  # kept: check_aclnn_kernel_available("aclnnXxx") names a function
    return re.sub(r"[^\n]", " ", text)


def _param(text: str) -> tuple[str, str]:
    text = text.split("=", 1)[0].strip()
    m = re.match(r"(.*?)([A-Za-z_]\w*)\s*(\[\s*\d*\s*\])?$", text, re.S)
    if not m or not m.group(1).strip():
        return " ".join(text.split()), ""
    return " ".join(m.group(1).split()), m.group(2)


_GUARD = re.compile(r"^\s*#\s*if\s+(!?)\s*VERSION_BETWEEN\(\s*V(\d+)R(\d+)\s*,\s*"
                    r"(?:V(\d+)R(\d+)|VERSION_NEWEST)\s*\)\s*$")


def _guards(lines: Sequence[str], origin: Origin) -> list[tuple[VersionGuard, ...]]:
    """The VERSION_BETWEEN guards active at each line (other #if blocks do not count)."""
    stack: list[VersionGuard | None] = []
    out: list[tuple[VersionGuard, ...]] = []
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if s.startswith("#"):
            word = re.match(r"#\s*(\w+)", s)
            directive = word.group(1) if word else ""
            if directive in ("if", "ifdef", "ifndef"):
                m = _GUARD.match(s)
                hi = f"{m.group(4)}.{m.group(5)}" if m and m.group(4) else None
                stack.append(VersionGuard(f"{m.group(2)}.{m.group(3)}", hi, bool(m.group(1)))
                             if m else None)
            elif directive in ("else", "elif"):
                if not stack:
                    raise ScrapeError(f"#{directive} without #if", source=origin.path, line=n)
                top = stack[-1]
                if top is not None and directive == "elif":
                    raise ScrapeError("#elif after VERSION_BETWEEN", source=origin.path, line=n)
                stack[-1] = replace(top, negated=not top.negated) if top is not None else None
            elif directive == "endif":
                if not stack:
                    raise ScrapeError("#endif without #if", source=origin.path, line=n)
                stack.pop()
        out.append(tuple(g for g in stack if g is not None))
    return out


def parse_kernel_source(text: str, *, origin: Origin) -> tuple[CppFunction, ...]:
    """Every namespace-level function of one op_api source file, with its aclnn calls."""
    code = _STRING_OR_COMMENT.sub(_blank, text)
    guards = _guards(code.splitlines(), origin)
    # preprocessor lines (with their "\" continuations) hold macro bodies, not functions
    code = _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    if code.count("{") != code.count("}"):
        raise ScrapeError("unbalanced braces", source=origin.path)
    out: list[CppFunction] = []
    stack: list[str] = []  # "ns" / "fn" / "other"
    head_start = 0
    fn_start: tuple[int, str, str, bool] | None = None  # (name pos, name, params, static)
    body_open = 0
    # only ; { } change the state: jump from one to the next
    for mark in _BRACES.finditer(code):
        i, ch = mark.start(), mark.group()
        if ch == ";":
            if all(k == "ns" for k in stack):
                head_start = i + 1
        elif ch == "{":
            if all(k == "ns" for k in stack):
                head = code[head_start:i]
                flat = " ".join(head.split())
                if re.match(r"^(?:inline\s+)?namespace\b", flat) or flat.startswith('extern "C"'):
                    stack.append("ns")
                else:
                    m = _HEAD.search(head.rstrip())
                    name = m.group(1).rsplit("::", 1)[-1] if m else ""
                    before = head[: m.start()] if m else ""
                    if (m and name not in _NOT_FUNCS and before.strip()
                            and not re.search(r"\b(?:struct|class|enum|union)\b", before)
                            and "=" not in before):
                        name_pos = head_start + m.start()
                        static = bool(re.search(r"\bstatic\b", before))
                        fn_start = (name_pos, name, m.group(2), static)
                        stack.append("fn")
                    else:
                        stack.append("other")
                body_open = i
                head_start = i + 1
            else:
                stack.append("other")
        elif ch == "}":
            if not stack:
                raise ScrapeError("unbalanced braces", source=origin.path,
                                  line=code.count("\n", 0, i) + 1)
            kind = stack.pop()
            if kind == "fn" and fn_start is not None and all(k == "ns" for k in stack):
                name_pos, name, params, static = fn_start
                body = code[body_open:i + 1]
                fn = _function(code, name_pos, body_open, i, name, params, static, body)
                out.append(replace(fn, guards=guards[fn.line - 1] if fn.line <= len(guards)
                                   else ()))
                fn_start = None
            if all(k == "ns" for k in stack):
                head_start = i + 1
    return tuple(out)


def _function(code: str, name_pos: int, body_open: int, end: int, name: str, params: str,
              static: bool, body: str) -> CppFunction:
    base = code.count("\n", 0, body_open) + 1
    calls: list[AclnnCall] = []

    def line_of(pos: int) -> int:
        return base + body.count("\n", 0, pos)

    compat_spans: list[tuple[int, int]] = []
    for m in _COMPAT.finditer(body):
        calls.append(AclnnCall(m.group(2), "compat", line_of(m.start()), m.group(3) or ""))
        compat_spans.append((m.start(), m.end()))
    for m in _EXEC.finditer(body):
        if m.group(1).startswith("OP_EXEC_LOG"):
            continue  # logging, not a launch
        calls.append(AclnnCall(m.group(2), "exec", line_of(m.start())))
    for m in _AVAILABLE.finditer(body):
        calls.append(AclnnCall(m.group(1), "probe", line_of(m.start())))
    callees: list[str] = []
    op_api: list[str] = []
    arities: list[tuple[str, tuple[str, ...]]] = []
    for m in _CALL.finditer(body):
        callee = m.group(2)
        if callee in _NOT_FUNCS or callee.isupper():
            continue
        args = _call_args(body, m.end())
        if args is not None and (callee, args) not in arities:
            arities.append((callee, args))
        if m.group(1):
            if callee not in op_api:
                op_api.append(callee)
        elif callee not in callees:
            callees.append(callee)
    calls.sort(key=lambda c: (c.line, c.kind))
    return CppFunction(name, tuple(_param(p) for p in split_top_level(params)), static,
                       code.count("\n", 0, name_pos) + 1 + _leading_newlines(code, name_pos),
                       code.count("\n", 0, end) + 1, tuple(calls), tuple(callees),
                       tuple(op_api), arities=tuple(arities))


def _call_args(body: str, start: int) -> tuple[str, ...] | None:
    """Top-level arguments of the call whose "(" ends just before ``start``; None when its
    ")" is not found."""
    depth = 1
    for j in range(start, len(body)):
        ch = body[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                # "<" and ">" are comparisons as often as template brackets inside a call:
                # only (), [] and {} nest here
                return tuple(split_top_level(body[start:j], angles=False))
    return None


def _leading_newlines(code: str, pos: int) -> int:
    """The head starts after the previous statement: skip the blank lines before it."""
    j = pos
    while j < len(code) and code[j] in " \t\n":
        j += 1
    return code.count("\n", pos, j)


# --------------------------------------------------------------------------- linking


def _compatible(cpp: str, schema: str) -> bool:
    if cpp == schema:
        return True
    # torch's C++ API spells an optional Tensor list and a Tensor list the same in places, and
    # optional Scalar/int arrays as optional<…>: accept the harmless spellings
    loose = {("T?[]", "T[]"), ("T[]", "T?[]"), ("i[]", "i[]?"), ("i[]?", "i[]")}
    return (cpp, schema) in loose


def _reach(fn: CppFunction, local: dict[str, CppFunction], path: str
           ) -> list[tuple[AclnnCall, str, str]]:
    """(call, via, path) for the kernel and the same-file helpers it reaches."""
    out: list[tuple[AclnnCall, str, str]] = [(c, "", path) for c in fn.calls]
    seen = {fn.name}
    frontier: list[tuple[CppFunction, str]] = [(fn, "")]
    while frontier:
        cur, via = frontier.pop(0)
        for callee in cur.callees:
            helper = local.get(callee)
            if helper is None or callee in seen or not helper.static:
                continue  # a non-static function is a kernel: followed as a delegate instead
            seen.add(callee)
            chain = f"{via}>{callee}" if via else callee
            out += [(c, chain, path) for c in helper.calls]
            frontier.append((helper, chain))
    return out


def _calls_of(fn: CppFunction, path: str, local_of: dict[str, dict[str, CppFunction]],
              by_name: dict[str, list[tuple[str, CppFunction]]]
              ) -> list[tuple[AclnnCall, str, str]]:
    found = _reach(fn, local_of[path], path)
    # kernels delegating to another kernel (op_api::add_out(...) or a kernel of this file
    # called by name): their calls count, marked with the kernel they went through
    delegates = list(fn.op_api_callees) + [
        c for c in fn.callees if c in by_name and c != fn.name
        and not (c in local_of[path] and local_of[path][c].static)]
    for d in delegates:
        overloads = _called_overloads(fn, path, d, by_name.get(d, []))
        # an overload the argument count does not single out: every remaining one is
        # credited and the via says so
        tag = f"op_api:{d}" + (f"[any of {len(overloads)}]" if len(overloads) > 1 else "")
        for dpath, dfn in overloads:
            found += [(c, tag + (f">{v}" if v else ""), p)
                      for c, v, p in _reach(dfn, local_of[dpath], dpath)]
    return found


def _called_overloads(fn: CppFunction, path: str, name: str,
                      overloads: list[tuple[str, CppFunction]]) -> list[tuple[str, CppFunction]]:
    """The overloads of ``name`` that ``fn``'s calls can reach: those taking as many
    parameters as a call passes arguments, never ``fn`` itself (min.names_dim calls
    ``op_api::min(self, dim, keepdim)``: the int-dim overload, not min(self) nor itself).
    When no overload takes that many, every other one (defaults may fill the rest)."""
    others = [(p, f) for p, f in overloads if not (p == path and f.line == fn.line)]
    calls = [args for callee, args in fn.arities if callee == name]
    fitting = [(p, f) for p, f in others if any(len(f.params) == len(a) for a in calls)]
    # an argument that is one of fn's own parameters has a known type: a Tensor is not
    # passed where the overload takes a Scalar (div_(self, lambd) with a double lambd)
    mine = {pname: cpp_class(ptype) for ptype, pname in fn.params if pname}
    typed = [(p, f) for p, f in fitting if any(
        len(f.params) == len(a) and all(_may_pass(mine.get(x, "?"), c)
                                         for x, c in zip(a, f.param_classes(), strict=True))
        for a in calls)]
    return typed or fitting or others or overloads


def _may_pass(arg: str, param: str) -> bool:
    """Whether a value of class ``arg`` can be passed as a parameter of class ``param``
    (``?…``: unknown, assumed to fit)."""
    a, p = arg.rstrip("?"), param.rstrip("?")
    if a.startswith("?") or p.startswith("?") or a == p or _compatible(a, p):
        return True
    if p == "S":
        return a in ("i", "f", "b")
    return p == "f" and a == "i"


def _groups(kernels: list[KernelRow]) -> tuple[
        set[tuple[str, str | None]], dict[tuple[str, str, bool], list[str]], dict[str, str | None]]:
    """The op_api kernels of the YAML grouped per (op, schema, symint naming): the versions
    each is registered for; with the (op, torch) pairs of the symint: section and each op's
    gen_opapi function. An op of the official section that the symint: section also lists for
    that torch version gets the _symint C++ name, as op-plugin's generator gives it."""
    symint = {(k.op, k.torch) for k in kernels if k.section == "symint"}
    symint_op_api = {(k.op, k.torch) for k in kernels if k.section == "symint" and k.op_api}
    groups: dict[tuple[str, str, bool], list[str]] = {}
    aclnn_of: dict[str, str | None] = {}
    for k in kernels:
        if not (k.op_api and k.schema) or k.status != "kernel":
            continue
        sym = k.section == "symint" or (k.op, k.torch) in symint
        if sym and k.section != "symint" and (k.op, k.torch) in symint_op_api:
            continue  # the symint: entry of the same version stands for it
        versions = groups.setdefault((k.op, k.schema, sym), [])
        if k.torch is not None and k.torch not in versions:
            versions.append(k.torch)
        aclnn_of.setdefault(k.op, k.aclnn)
    return symint, groups, aclnn_of


def _match(candidates: list[tuple[str, CppFunction]], schema: str, versions: list[str],
           ) -> tuple[list[tuple[str, CppFunction]], str]:
    """The functions named like the kernel that implement ``schema``, and how good the match
    is (see the module docstring); none, and why not, when no one function can be told."""
    want = schema_arg_classes(schema)
    exact = [(p, f) for p, f in candidates if len(f.params) == len(want) and all(
        _compatible(c, w) for c, w in zip(f.param_classes(), want, strict=True))]
    loose = [(p, f) for p, f in candidates if len(f.params) == len(want) and all(
        _compatible(c, w) or c.startswith("?") or w.startswith("?")
        for c, w in zip(f.param_classes(), want, strict=True))]
    if len(exact) == 1:
        return exact, "signature"
    if exact and len({f.param_classes() for _, f in exact}) == 1:
        # one function defined once per torch range under #if VERSION_BETWEEN: exact when
        # the guards give every version one definition, else every variant is credited
        admitted = [v for _, f in exact for v in versions if f.admits(v)]
        clean = bool(versions) and sorted(admitted) == sorted(versions)
        return exact, "signature" if clean else "signature-variants"
    if len(loose) == 1 and not exact:
        return loose, "arity"
    cname = candidates[0][1].name
    return [], (f"{len(candidates)} functions named {cname}, "
                f"{len(exact)} with matching parameters")


def link_pin(sources: Iterable[tuple[Origin, str]], kernels: Iterable[KernelRow], *,
             parsed: dict[str, tuple[CppFunction, ...]] | None = None,
             config: str = "") -> PinLink:
    """ATen overload → aclnn function rows for one op-plugin pin.

    ``sources``: the pin's ``op_plugin/ops/opapi/*.cpp``; ``kernels``: the rows
    :func:`opcheck.scrapers.opplugin.parse_functions` read from the same pin's
    ``op_plugin_functions.yaml`` (only ``op_api`` rows are used; one per op). ``parsed``: a
    memo of file text → its functions, shared across pins by a caller reading several (most
    files are identical from one pin to the next; a file's functions depend on its text only).
    ``config``: the path of that YAML, cited by the links of kernels op-plugin generates from
    an entry's ``gen_opapi`` (no hand-written source: the entry's ``exec`` names the aclnn
    function the generated kernel launches; ``via`` and ``match`` say ``gen_opapi``, the line
    is the entry's).
    """
    kernels_list = list(kernels)
    memo = {} if parsed is None else parsed
    files: list[tuple[str, tuple[CppFunction, ...]]] = []
    for origin, text in sources:
        if text not in memo:
            memo[text] = parse_kernel_source(text, origin=origin)
        files.append((origin.path, memo[text]))
    by_name: dict[str, list[tuple[str, CppFunction]]] = {}
    local_of: dict[str, dict[str, CppFunction]] = {}
    for path, fns in files:
        local_of[path] = {f.name: f for f in fns}
        for f in fns:
            if not f.static:
                by_name.setdefault(f.name, []).append((path, f))
    symint, groups, aclnn_of = _groups(kernels_list)
    link = PinLink()
    generated = _generated(kernels_list, symint, config)
    link.rows += generated
    # an entry with gen_opapi is generated for its versions; a hand-written kernel of the
    # same op may still serve other versions (grid_sampler_3d_backward on torch 1.11)
    gen_at = {(r.op, v) for r in generated for v in (r.torch or (None,))}
    for (op, schema, sym), all_versions in sorted(groups.items()):
        versions = [v for v in all_versions if (op, v) not in gen_at]
        if (op, None) in gen_at or (all_versions and not versions):
            continue
        versions.sort(key=_minor_key)
        cname = cpp_kernel_name(schema, "symint" if sym else "")
        candidates = [(p, f) for p, f in by_name.get(cname, [])
                      if not versions or any(f.admits(v) for v in versions)]
        if not candidates:
            reason = ("generated from gen_opapi (no hand-written kernel)" if aclnn_of.get(op)
                      else f"no op_api function named {cname}")
            link.unlinked.append((op, reason))
            continue
        chosen, match = _match(candidates, schema, versions)
        if not chosen:
            link.unlinked.append((op, "generated from gen_opapi (no hand-written kernel with "
                                      "these parameters)" if aclnn_of.get(op) else match))
            continue
        seen: set[tuple[str, str, str, str, int, tuple[str, ...]]] = set()
        any_call = False
        for path, fn in chosen:
            torch = tuple(v for v in versions if fn.admits(v))
            for call, via, cpath in _calls_of(fn, path, local_of, by_name):
                any_call = True
                key = (call.aclnn, call.kind, via, cpath, call.line, torch)
                if key in seen:
                    continue
                seen.add(key)
                link.rows.append(OpAclnnRow(op, torch, cname, call.aclnn, call.kind,
                                            call.fallback, via, match, cpath, call.line))
        if not any_call:
            missing = sorted({d for _, f in chosen for d in f.op_api_callees if d not in by_name})
            note = f" (calls op_api::{', op_api::'.join(missing)}, not in these sources)" \
                if missing else ""
            link.unlinked.append((op, f"{cname} calls no aclnn function{note}"))
    return link


def _generated(kernels: list[KernelRow], symint: set[tuple[str, str | None]],
               config: str) -> list[OpAclnnRow]:
    """Links of the kernels generated from ``gen_opapi`` entries, one per (op, aclnn, entry)
    with the torch versions the entry holds for."""
    versions: dict[tuple[str, str, str, int], list[str]] = {}
    for k in kernels:
        if not (k.op_api and k.aclnn and k.schema) or k.status != "kernel":
            continue
        sym = k.section == "symint" or (k.op, k.torch) in symint
        key = (k.op, cpp_kernel_name(k.schema, "symint" if sym else ""), k.aclnn, k.line)
        got = versions.setdefault(key, [])
        if k.torch is not None and k.torch not in got:
            got.append(k.torch)
    return [OpAclnnRow(op, tuple(sorted(vs, key=_minor_key)), cname, aclnn, "exec", "",
                       "gen_opapi", "gen_opapi", config, line)
            for (op, cname, aclnn, line), vs in sorted(versions.items())]
