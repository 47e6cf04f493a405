"""op-plugin's acl_op kernels (``op_plugin/ops/aclops/*.cpp``): which CANN op types each ATen
overload's acl_op kernel runs.

An acl_op kernel builds one or more graph-mode commands and runs them::

    at_npu::native::OpCommand cmd;
    cmd.Name("Fill").Input(…).Output(result).Run();

The string given to ``Name`` is the CANN op type (what CANN's level-0 launches, binary lists and
error messages name: "Current working aclop is Fill", "kernelName=Fill"). Reading a source
file (:func:`parse_aclop_source`) gives, per namespace-level function:

* its commands: the op type (a literal, or a local variable assigned a literal or a
  ``cond ? "A" : "B"`` choice), the line, the ``if``/``else`` branches around it as a condition
  (``self.dim() == 5``), and the engine the command pins (``.Attr("_exclude_engines",
  "AiCore")``: AI CPU only);
* the functions it calls: by bare name or ``acl_op::`` (helpers and other kernels, followed
  across the pin's files) and ATen calls (``at::fill_(…)``, ``self.zero_()``): these go through
  the dispatcher, which sends them to the op's own NPU kernel; :func:`link_pin` follows them to
  the op's acl_op kernel and marks them ``aten:<name>`` in ``via``.

Which ATen overload a C++ function implements follows op-plugin's naming (torchgen's dispatcher
signature), matched as :mod:`opcheck.scrapers.opapi_sources` does: ``signature`` (name and
parameter type classes), ``arity`` (name and parameter count), never more.

Pure: text in, rows out. A ``Name(…)`` whose op type cannot be read fails with file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.opapi_sources import (
    CppFunction,
    cpp_kernel_name,
    parse_kernel_source,
    schema_arg_classes,
)
from opcheck.scrapers.rows import KernelRow, Origin

__all__ = ["AclFunction", "AclTypeRow", "Command", "link_pin", "parse_aclop_source"]

AICPU = "aicpu"
AICORE = "aicore"


@dataclass(frozen=True)
class Command:
    op_type: str
    line: int
    condition: str = ""  # the branches around it, "" when it always runs
    engine: str = ""  # aicpu when the command excludes the AI Core engine, else ""


@dataclass(frozen=True)
class AclFunction:
    fn: CppFunction  # name, parameters, lines, #if VERSION_BETWEEN guards
    commands: tuple[Command, ...]
    # (kind, name, condition): kind ``call`` for bare-name and acl_op:: calls, ``aten`` for
    # at::name(…) and tensor.name(…) calls; the condition is the branches around the call
    calls: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class AclTypeRow:
    """One CANN op type an ATen overload's acl_op kernel runs (directly or via helpers)."""

    op: str
    torch: tuple[str, ...]
    kernel: str
    op_type: str
    engine: str  # aicpu when the command pins the AI CPU, else ""
    condition: str
    via: str  # "", "helper>helper", "acl_op:fill_", "aten:zero_"
    match: str  # signature | arity
    path: str
    line: int


@dataclass
class PinLink:
    rows: list[AclTypeRow] = field(default_factory=list)
    unlinked: list[tuple[str, str]] = field(default_factory=list)  # (op, reason)


# --------------------------------------------------------------------------- scanning

_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_STRING = re.compile(r'"((?:\\.|[^"\\\n])*)"')
_NAME = re.compile(r"\.\s*Name\s*\(")
_CONST = re.compile(r'\b(?:const\s+)?(?:std::)?string\s+(\w+)\s*(?:=\s*|\()\s*"(\w+)"')
_EXCLUDE = re.compile(r'Attr\s*\(\s*"_exclude_engines"\s*,\s*(?:"(\w+)"|(\w+))\s*\)')
_CALL = re.compile(r"(?<![\w:.>])(?:acl_op::)?([A-Za-z_]\w*)\s*\(")
_ATEN = re.compile(r"(?:(?<![\w:])at::|\.|->)\s*([a-z_]\w*)\s*\(")
_IF = re.compile(r"^(else\s+)?if\s*(?:constexpr\s*)?\((.*)\)$", re.S)
_NOT_CALLS = {"if", "for", "while", "switch", "return", "catch", "sizeof", "decltype",
              "defined", "static_cast", "reinterpret_cast", "const_cast", "make_pair"}


def _keep_strings(m: re.Match[str]) -> str:
    text = m.group(0)
    return text if text.startswith('"') else re.sub(r"[^\n]", " ", text)


def _no_strings(text: str) -> str:
    return _STRING.sub(lambda m: '"' + " " * len(m.group(1)) + '"', text)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _negate(cond: str) -> str:
    return f"!({cond})"


def _branches(seg: str) -> list[tuple[int, str]]:
    """(position, condition) at every ``{`` of ``seg``: the if/else branches it is inside
    (``&&``-joined); ``seg`` has its strings blanked."""
    out: list[tuple[int, str]] = []
    stack: list[tuple[str, list[str]]] = []  # (condition of this block, its if-chain so far)
    last_chain: dict[int, list[str]] = {}  # depth → the if-chain that just closed there
    start = 0
    for m in re.finditer(r"[;{}]", seg):
        i, ch = m.start(), m.group()
        if ch == "{":
            head = _flat(seg[start:i])
            depth = len(stack)
            im = _IF.match(head)
            cond, chain = "", []
            if im and im.group(1) and last_chain.get(depth):
                prev = last_chain[depth]
                chain = [*prev, _flat(im.group(2))]
                cond = " && ".join([*(_negate(p) for p in prev), _flat(im.group(2))])
            elif im:
                chain = [_flat(im.group(2))]
                cond = chain[0]
            elif head == "else" and last_chain.get(depth):
                cond = " && ".join(_negate(p) for p in last_chain[depth])
            last_chain.pop(depth, None)
            stack.append((cond, chain))
            out.append((i, " && ".join(c for c, _ in stack if c)))
        elif ch == "}":
            if stack:
                _, chain = stack.pop()
                if chain:
                    last_chain[len(stack)] = chain
            out.append((i, " && ".join(c for c, _ in stack if c)))
        else:
            last_chain.pop(len(stack), None)
        start = i + 1
    return out


def _condition_at(branches: list[tuple[int, str]], pos: int) -> str:
    cond = ""
    for at, c in branches:
        if at > pos:
            break
        cond = c
    return cond


def _name_arg(seg: str, start: int) -> str:
    depth = 1
    for j in range(start, len(seg)):
        if seg[j] == "(":
            depth += 1
        elif seg[j] == ")":
            depth -= 1
            if depth == 0:
                return seg[start:j]
    return seg[start:]


def _choices(expr: str) -> list[tuple[str, str]] | None:
    """(op type, condition) for a literal or ``cond ? "A" : "B"``; None otherwise."""
    expr = expr.strip()
    lit = re.fullmatch(r'"(\w+)"', expr)
    if lit:
        return [(lit.group(1), "")]
    tern = re.fullmatch(r'\(?\s*(.+?)\s*\)?\s*\?\s*"(\w+)"\s*:\s*"(\w+)"', expr, re.S)
    if tern:
        cond = _flat(tern.group(1)).strip("()").strip()
        return [(tern.group(2), cond), (tern.group(3), _negate(cond))]
    return None


def _resolve(arg: str, seg: str, pos: int, consts: dict[str, str]) -> list[tuple[str, str]] | None:
    got = _choices(arg)
    if got is not None:
        return got
    var = arg.strip()
    if not re.fullmatch(r"\w+", var):
        return None
    # the nearest assignment before the command in the same function
    assigned = None
    for m in re.finditer(rf"\b{var}\s*=\s*([^;]*);", seg[:pos]):
        assigned = m.group(1)
    if assigned is not None:
        return _choices(assigned)
    if var in consts:
        return [(consts[var], "")]
    return None


def _engine(seg: str, pos: int, consts: dict[str, str]) -> str:
    end = seg.find(".Run(", pos)
    tail = seg[pos:end if end >= 0 else len(seg)]
    m = _EXCLUDE.search(tail)
    if not m:
        return ""
    value = m.group(1) or consts.get(m.group(2), "")
    if value.lower() == "aicore":
        return AICPU
    return AICORE if value.lower() == "aicpu" else ""


def parse_aclop_source(text: str, *, origin: Origin) -> tuple[AclFunction, ...]:
    """Every namespace-level function of one aclops source file, with the op types its
    commands run and the functions it calls."""
    fns = parse_kernel_source(text, origin=origin)
    code = _COMMENT.sub(_keep_strings, text)
    lines = code.splitlines(keepends=True)
    consts = {m.group(1): m.group(2) for m in _CONST.finditer(code)}
    out: list[AclFunction] = []
    for fn in fns:
        first = fn.line - 1
        seg = "".join(lines[first:fn.end_line])
        bare = _no_strings(seg)
        branches = _branches(bare)
        bools = {m.group(1): f"({_flat(m.group(2))})"
                 for m in re.finditer(r"\bbool\s+(\w+)\s*=\s*([^;]+);", bare)}

        def named(cond: str, bools: dict[str, str] = bools) -> str:
            # a branch on a local flag reads as the expression that set it
            return re.sub(r"\b\w+\b", lambda w: bools.get(w.group(0), w.group(0)), cond)

        branches = [(at, named(c)) for at, c in branches]
        commands: list[Command] = []
        for m in _NAME.finditer(bare):
            arg = _name_arg(seg, m.end())
            line = fn.line + seg.count("\n", 0, m.start())
            choices = _resolve(arg, seg, m.start(), consts)
            if choices is None:
                if re.fullmatch(r"\s*\w+\s*", arg) and any(p == arg.strip() for _, p in fn.params):
                    choices = [("", "")]  # a helper given the op type by its caller
                else:
                    raise ScrapeError(f"op type of Name({_flat(arg)}) not readable",
                                      source=origin.path, line=line)
            where = _condition_at(branches, m.start())
            engine = _engine(seg, m.start(), consts)
            for op_type, cond in choices:
                full = " && ".join(c for c in (where, cond) if c)
                commands.append(Command(op_type or f"<{arg.strip()}>", line, full, engine))
        calls = [("call", c.group(1), _condition_at(branches, c.start()))
                 for c in _CALL.finditer(bare)
                 if c.group(1) not in _NOT_CALLS and not c.group(1).isupper()
                 and c.group(1) != fn.name]
        calls += [("aten", c.group(1), _condition_at(branches, c.start()))
                  for c in _ATEN.finditer(bare)]
        # a function called on several branches runs on either: no branch condition
        conds: dict[tuple[str, str], set[str]] = {}
        for kind, name, cond in calls:
            conds.setdefault((kind, name), set()).add(cond)
        merged = tuple((k, n, next(iter(c)) if len(c) == 1 else "") for (k, n), c in conds.items())
        out.append(AclFunction(fn, tuple(commands), merged))
    return tuple(out)


# --------------------------------------------------------------------------- linking

_LOOSE = {("T?[]", "T[]"), ("T[]", "T?[]"), ("i[]", "i[]?"), ("i[]?", "i[]")}


def _fits(cpp: tuple[str, ...], want: tuple[str, ...], *, loose: bool) -> bool:
    if len(cpp) != len(want):
        return False
    return all(c == w or (c, w) in _LOOSE or (loose and (c.startswith("?") or w.startswith("?")))
               for c, w in zip(cpp, want, strict=True))


def _reach(start: tuple[str, AclFunction], funcs: dict[str, dict[str, AclFunction]],
           kernels_named: dict[str, list[tuple[str, AclFunction]]], dispatch: set[str],
           ) -> list[tuple[Command, str, str, str]]:
    """(command, via, path, condition) of every command ``start`` runs: its own, its helpers'
    (same file first), other acl_op functions called by name, and ATen calls dispatched to an
    acl_op kernel of the pin (``dispatch``: C++ names of the pin's acl_op kernels). The
    condition joins the branches around each call on the way with the command's own."""
    out: list[tuple[Command, str, str, str]] = []
    seen = {(start[0], start[1].fn.line)}
    frontier: list[tuple[str, AclFunction, str, str]] = [(start[0], start[1], "", "")]
    while frontier:
        path, cur, via, outer = frontier.pop(0)
        out += [(c, via, path, " && ".join(x for x in (outer, c.condition) if x))
                for c in cur.commands]
        steps: list[tuple[str, str, AclFunction, str]] = []
        direct = {name for kind, name, _ in cur.calls if kind == "call"}
        for kind, name, cond in cur.calls:
            local = funcs[path].get(name) if kind == "call" else None
            if local is not None:
                # a kernel of this file called by name is labelled as one, a helper by name
                steps.append((f"acl_op:{name}" if name in dispatch else name, path, local, cond))
            elif kind == "call":
                steps += [(f"acl_op:{name}", p, f, cond) for p, f in kernels_named.get(name, [])]
            elif name in dispatch and name not in direct:
                steps += [(f"aten:{name}", p, f, cond) for p, f in kernels_named.get(name, [])]
        for label, p, f, cond in steps:
            if (p, f.fn.line) in seen:
                continue
            seen.add((p, f.fn.line))
            frontier.append((p, f, f"{via}>{label}" if via else label,
                             " && ".join(x for x in (outer, cond) if x)))
    return out


def link_pin(sources: Iterable[tuple[Origin, str]], kernels: Iterable[KernelRow], *,
             parsed: dict[str, tuple[AclFunction, ...]] | None = None) -> PinLink:
    """ATen overload → CANN op type rows for one op-plugin pin. ``sources``: the pin's
    ``op_plugin/ops/aclops/*.cpp``; ``kernels``: its ``op_plugin_functions.yaml`` rows (the
    ``acl_op`` ones are used); ``parsed``: a memo of file text → functions, shared across pins."""
    memo = {} if parsed is None else parsed
    funcs: dict[str, dict[str, AclFunction]] = {}
    kernels_named: dict[str, list[tuple[str, AclFunction]]] = {}
    for origin, text in sources:
        if text not in memo:
            memo[text] = parse_aclop_source(text, origin=origin)
        funcs[origin.path] = {}
        for f in memo[text]:
            funcs[origin.path].setdefault(f.fn.name, f)
            kernels_named.setdefault(f.fn.name, []).append((origin.path, f))
    kernels_list = [k for k in kernels if k.acl_op and k.schema and k.status == "kernel"]
    symint = {(k.op, k.torch) for k in kernels_list if k.section == "symint"}
    groups: dict[tuple[str, str, str], list[str]] = {}
    for k in kernels_list:
        sym = k.section == "symint" or (k.op, k.torch) in symint
        cname = cpp_kernel_name(k.schema, "symint" if sym else "")
        versions = groups.setdefault((k.op, k.schema, cname), [])
        if k.torch is not None and k.torch not in versions:
            versions.append(k.torch)
    dispatch = {cname for _, _, cname in groups}
    link = PinLink()
    for (op, schema, cname), versions in sorted(groups.items()):
        names = [cname, cname.removesuffix("_symint")] if cname.endswith("_symint") else [cname]
        candidates = [(p, f) for n in dict.fromkeys(names) for p, f in kernels_named.get(n, [])
                      if not versions or any(f.fn.admits(v) for v in versions)]
        want = schema_arg_classes(schema)
        exact = [(p, f) for p, f in candidates if _fits(f.fn.param_classes(), want, loose=False)]
        loose = [(p, f) for p, f in candidates if _fits(f.fn.param_classes(), want, loose=True)]
        if exact:
            chosen, match = exact, "signature"
        elif len(loose) == 1:
            chosen, match = loose, "arity"
        else:
            reason = (f"no acl_op function named {cname}" if not candidates else
                      f"{len(candidates)} functions named {cname}, none with these parameters")
            link.unlinked.append((op, reason))
            continue
        seen: set[tuple[str, str, str, int, tuple[str, ...]]] = set()
        before = len(link.rows)
        for path, f in chosen:
            torch = tuple(v for v in versions if f.fn.admits(v))
            for cmd, via, cpath, cond in _reach((path, f), funcs, kernels_named, dispatch):
                key = (cmd.op_type, via, cpath, cmd.line, torch)
                if key in seen or cmd.op_type.startswith("<"):
                    continue
                seen.add(key)
                link.rows.append(AclTypeRow(op, torch, f.fn.name, cmd.op_type, cmd.engine,
                                            cond, via, match, cpath, cmd.line))
        if len(link.rows) == before:
            link.unlinked.append((op, f"{cname} runs no OpCommand here"))
    return link
