"""CANN's operator API sources (``op_api/*.cpp`` of ops-math, ops-nn, ops-cv, ops-transformer):
on which engine each aclnn function runs its work, and when.

Two steps, both pure:

* :func:`parse_source` reads one C++ file into its functions (name, namespace, parameters, a
  statement tree of the body with line numbers) and its dtype lists
  (``static const std::initializer_list<op::DataType> X = {…}``);
* :func:`analyze` takes every file of one library version and follows each aclnn entry
  (``aclnnXxxGetWorkspaceSize``) through the helpers of its file and the level-0 functions
  (``l0op::IndexPut(…)``, any file) down to the launches
  (``ADD_TO_LAUNCHER_LIST_AICORE(Op, …)`` / ``_AICPU`` / ``_DSA``). Every launch comes with the
  condition under which the entry reaches it, as a :data:`Formula`: the ``if`` conditions on
  the way (negated in ``else`` and after an early ``return``), with the bool helpers they call
  (``IsAiCPUSupport(selfRef, …)``) expanded in place and their parameters renamed to the
  caller's arguments.

Conditions are structured where they are simple: a tensor's dtype (``x->GetDataType() ==
DT_DOUBLE``, ``CheckType(x->GetDataType(), LIST)``), the SoC (``GetSocVersion() ==
SocVersion::ASCEND310P``, ``IsRegbase()``: the DAV_3510 architecture of Ascend 950), constants;
any other comparison is kept as its text with file and line (:class:`Unknown`): ``runtime``
when it reads shapes, sizes, index positions or settings, ``other`` when it reads a dtype or
the SoC in a way not understood, ``guard`` for the empty-tensor, null-pointer and status
checks every entry makes (decided as "the call is valid and non-empty").

The steps live in modules of their own: reading the files (:mod:`cann_source`), the routing
conditions (:mod:`cann_conditions`) and the formulas and deciding a call (:mod:`cann_formula`);
this module follows the entries to the level-0 launches.

This is a reading of the source, not a compiler: assignments after a declaration are folded
in as ``(path ∧ new) ∨ (¬path ∧ old)``, loops are read as "some iteration", and a call into a
function this reading cannot find (CANN's closed ``aclnn_kernels``: ``Cast``, ``Contiguous``,
``Transpose``…) launches nothing it can see. Facts from here say so where they are shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from opcheck.scrapers.cann_conditions import _arg_names, _CondParser, _returns_true, _split_args
from opcheck.scrapers.cann_formula import (
    ENGINES,
    FALSE,
    TRUE,
    And,
    Call,
    Const,
    DtypeEq,
    DtypeIs,
    Formula,
    Not,
    Or,
    SocIs,
    Unknown,
    _rename,
    f_and,
    f_not,
    f_or,
    formula_dumps,
    formula_from_json,
    formula_loads,
    formula_to_json,
    holds,
    role,
    torch_dtype,
)
from opcheck.scrapers.cann_source import (
    _SKIP_HEADS,
    Function,
    SourceFile,
    Stmt,
    Tok,
    _match,
    parse_source,
)
from opcheck.scrapers.rows import Origin

__all__ = [
    "And", "Call", "Const", "DtypeEq", "DtypeIs", "EngineSite", "Formula", "Not", "Or", "SocIs",
    "SourceFile", "Unknown", "analyze", "formula_dumps", "formula_from_json", "formula_loads",
    "formula_to_json", "holds", "parse_source", "role", "sites_of", "torch_dtype"
]

# --- analysis ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineSite:
    """One launch an aclnn entry can reach, and when."""

    aclnn: str
    op_type: str
    engine: str  # aicore | aicpu | dsa
    condition: Formula
    launch: str  # path:line of the ADD_TO_LAUNCHER_LIST_* call
    entry: str  # path:line of the entry function


# test stubs and experimental samples (not shipped) would shadow the real level-0 functions
_STUB = re.compile(r"(?:^|/)(?:stub|tests?|ut|st|experimental)/")


class _Library:
    def __init__(self, files: Sequence[SourceFile]) -> None:
        self.files = [f for f in files if not _STUB.search(f.path)]
        files = self.files
        self.local: dict[tuple[str, str], list[Function]] = {}
        self.l0: dict[str, list[Function]] = {}
        self.lists: dict[str, dict[str, tuple[str, ...]]] = {f.path: f.dtype_lists for f in files}
        self.global_lists: dict[str, tuple[str, ...]] = {}
        for f in files:
            for k, v in f.dtype_lists.items():
                self.global_lists.setdefault(k, v)
            for fn in f.functions:
                self.local.setdefault((f.path, fn.name), []).append(fn)
                if fn.namespace == "l0op" and not fn.static:
                    self.l0.setdefault(fn.name, []).append(fn)
        self._bool: dict[int, Formula] = {}
        self._sites: dict[int, list[tuple[str, str, Formula, str]]] = {}
        self._busy: set[int] = set()

    def find(self, name: str, path: str, nargs: int, qualified: bool) -> Function | None:
        pools = [self.l0.get(name, [])] if qualified else \
            [self.local.get((path, name), []), self.l0.get(name, [])]
        for pool in pools:
            fit = [f for f in pool if len(f.params) == nargs] or pool
            if fit:
                return fit[0]
        return None

    # conditions ---------------------------------------------------------------------------

    def cond(self, toks: Sequence[Tok], fn: Function, env: Mapping[str, Formula],
             loop: bool) -> Formula:
        return _CondParser(self, toks, fn, env, loop).parse()

    def bool_formula(self, fn: Function) -> Formula:
        key = id(fn)
        if key in self._bool:
            return self._bool[key]
        if key in self._busy:
            return Unknown("other", f"{fn.name}(…) (recursive)", f"{fn.path}:{fn.line}")
        self._busy.add(key)
        try:
            got, _ = self._returns(fn.body, fn, TRUE, {}, False)
        finally:
            self._busy.discard(key)
        self._bool[key] = got
        return got

    def _returns(self, stmts: Sequence[Stmt], fn: Function, path: Formula,
                 env: dict[str, Formula], loop: bool) -> tuple[Formula, bool]:
        """(OR over the returns of path ∧ value, whether the block always returns)."""
        acc: Formula = FALSE
        for st in stmts:
            if st.kind == "return":
                val = self.cond(st.toks, fn, env, loop) if st.toks else Unknown(
                    "other", "return", f"{fn.path}:{st.line}")
                return f_or(acc, f_and(path, val)), True
            if st.kind == "simple":
                self._assign(st, fn, path, env, loop)
            elif st.kind == "block":
                got, done = self._returns(st.body, fn, path, env, loop)
                acc = f_or(acc, got)
                if done:
                    return acc, True
            elif st.kind == "if":
                c = self.cond(st.toks, fn, env, loop)
                got, done = self._returns(st.body, fn, f_and(path, c), dict(env), loop)
                acc = f_or(acc, got)
                got2, done2 = self._returns(st.orelse or [], fn, f_and(path, f_not(c)),
                                            dict(env), loop)
                acc = f_or(acc, got2)
                if done and done2:
                    return acc, True
                if done and not _returns_true(st.body):
                    path = f_and(path, f_not(c))
                elif done2:
                    path = f_and(path, c)
            elif st.kind in ("loop", "switch"):
                got, _ = self._returns(st.body, fn, path, dict(env), True)
                acc = f_or(acc, got)
        return acc, False

    def _assign(self, st: Stmt, fn: Function, path: Formula, env: dict[str, Formula],
                loop: bool) -> None:
        texts = [t.text for t in st.toks]
        if "=" not in texts:
            return
        eq = texts.index("=")
        lhs = [x for x in texts[:eq] if re.fullmatch(r"[A-Za-z_]\w*", x)]
        if not lhs or texts[eq - 1] in ("]", ")"):
            return
        name = lhs[-1]
        if len(lhs) == 1 and name not in env:
            return  # an assignment to something not declared here (a parameter, a member)
        rhs = st.toks[eq + 1:]
        val = self.cond(rhs, fn, env, loop)
        if len(lhs) > 1 or name not in env:
            env[name] = val
        else:
            env[name] = f_or(f_and(path, val), f_and(f_not(path), env[name]))

    # launches -----------------------------------------------------------------------------

    def sites(self, fn: Function) -> list[tuple[str, str, Formula, str]]:
        """(op type, engine, condition over fn's parameters, launch path:line) of every launch
        fn reaches."""
        key = id(fn)
        if key in self._sites:
            return self._sites[key]
        if key in self._busy:
            return []
        self._busy.add(key)
        out: list[tuple[str, str, Formula, str]] = []
        try:
            self._walk(fn.body, fn, TRUE, {}, False, out)
        finally:
            self._busy.discard(key)
        self._sites[key] = out
        return out

    def _walk(self, stmts: Sequence[Stmt], fn: Function, path: Formula,
              env: dict[str, Formula], loop: bool, out: list[tuple[str, str, Formula, str]]
              ) -> bool:
        """Collects launches under ``path``; True when the block always returns."""
        for st in stmts:
            if st.kind in ("simple", "return"):
                self._calls(st.toks, fn, path, env, loop, out)
                if st.kind == "simple":
                    self._assign(st, fn, path, env, loop)
                else:
                    return True
            elif st.kind == "block":
                if self._walk(st.body, fn, path, env, loop, out):
                    return True
            elif st.kind == "if":
                self._calls(st.toks, fn, path, env, loop, out)
                c = self.cond(st.toks, fn, env, loop)
                done = self._walk(st.body, fn, f_and(path, c), dict(env), loop, out)
                done2 = self._walk(st.orelse or [], fn, f_and(path, f_not(c)), dict(env),
                                   loop, out)
                if done and done2:
                    return True
                if done:
                    path = f_and(path, f_not(c))
                elif done2:
                    path = f_and(path, c)
            elif st.kind in ("loop", "switch"):
                self._calls(st.toks, fn, path, env, True, out)
                self._walk(st.body, fn, path, dict(env), True, out)
        return False

    def _calls(self, toks: Sequence[Tok], fn: Function, path: Formula, env: Mapping[str, Formula],
               loop: bool, out: list[tuple[str, str, Formula, str]]) -> None:
        texts = [t.text for t in toks]
        for i, x in enumerate(texts):
            if i + 1 >= len(texts) or texts[i + 1] != "(":
                continue
            m = re.fullmatch(r"ADD_TO_LAUNCHER_LIST_(AICORE|AICPU|DSA)", x)
            if m:
                j = i + 2
                while j < len(texts) and not re.fullmatch(r"[A-Za-z_]\w*", texts[j]):
                    j += 1
                if j < len(texts):
                    out.append((texts[j], ENGINES[m.group(1)], path,
                                f"{fn.path}:{toks[i].line}"))
                continue
            if not re.fullmatch(r"[A-Za-z_]\w*", x) or x in _SKIP_HEADS:
                continue
            qualified = i > 1 and texts[i - 1] == "::" and texts[i - 2] == "l0op"
            if (i > 0 and texts[i - 1] in (".", "->")) or (i > 0 and texts[i - 1] == "::"
                                                        and not qualified):
                continue
            close = _match(toks, i + 1, "(", ")")
            args = _split_args(toks[i + 2:close])
            callee = self.find(x, fn.path, len(args), qualified)
            if callee is None or callee is fn:
                continue
            names = _arg_names(callee.params, args)
            for op, eng, cond, at in self.sites(callee):
                out.append((op, eng, f_and(path, _rename(cond, names)), at))


MAX_CONDITION = 12_000  # characters of compact JSON kept per AI CPU condition (see _bounded)
# the SoCs an AI Core launch's reachability is recorded for
SOCS = ("ascend910", "ascend910b", "ascend910_93", "ascend310p", "ascend310b", "ascend910_95",
        "ascend950")


def _bounded(f: Formula, engine: str, entry: str) -> Formula:
    """What is kept of a condition. An AI Core launch only needs the SoCs it is reachable on
    (the binary check): its condition becomes that SoC list. An AI CPU condition is kept
    whole unless it is large (helpers shared by many entries, convolutions), then its dtype
    and SoC atoms are kept and the rest becomes one opaque atom: a decision on it is "may",
    never a guess."""
    if engine != "aicpu":
        socs = tuple(s for s in SOCS if holds(f, Call(s, {})) is not False)
        if len(socs) == len(SOCS):
            return TRUE
        return SocIs(socs, entry) if socs else FALSE
    if len(formula_dumps(f)) <= MAX_CONDITION:
        return f
    opaque = Unknown("opaque", "other conditions (not kept)", entry)
    return _project(f, (SocIs, DtypeIs, DtypeEq), opaque)


def _project(f: Formula, keep: tuple[type, ...], opaque: Unknown) -> Formula:
    if isinstance(f, (Const, *keep)):
        return f
    if isinstance(f, Not):
        inner = _project(f.item, keep, opaque)
        return opaque if inner == opaque else f_not(inner)
    if isinstance(f, And):
        return f_and(*(_project(x, keep, opaque) for x in f.items))
    if isinstance(f, Or):
        return f_or(*(_project(x, keep, opaque) for x in f.items))
    return opaque


def _decide_guards(f: Formula) -> Formula:
    """Guards (empty tensors, null pointers, failed checks) decided as the valid, non-empty
    call every decision assumes: they would only repeat in every stored condition."""
    if isinstance(f, Unknown) and f.kind == "guard":
        return FALSE
    if isinstance(f, Not):
        return f_not(_decide_guards(f.item))
    if isinstance(f, And):
        return f_and(*(_decide_guards(x) for x in f.items))
    if isinstance(f, Or):
        return f_or(*(_decide_guards(x) for x in f.items))
    return f


def _at(f: SourceFile | tuple[str, SourceFile]) -> SourceFile:
    if isinstance(f, SourceFile):
        return f
    path, src = f
    return SourceFile(path, [replace(fn, path=path) for fn in src.functions], src.dtype_lists,
                      src.ops_registered)


def analyze(files: Iterable[SourceFile | tuple[str, SourceFile]]) -> list[EngineSite]:
    """Every launch each aclnn entry of one library version reaches, with its condition.
    A ``(path, file)`` pair cites the file as ``path`` (a parse reused across versions keeps
    the path of the version it was first read at otherwise)."""
    lib = _Library([_at(f) for f in files])
    out: list[EngineSite] = []
    for f in lib.files:
        for fn in f.functions:
            if not (fn.name.startswith("aclnn") and fn.name.endswith("GetWorkspaceSize")):
                continue
            aclnn = fn.name.removesuffix("GetWorkspaceSize")
            names = {p: (p, "one") for p in fn.params}
            merged: dict[tuple[str, str, str], Formula] = {}
            for op, eng, cond, at in lib.sites(fn):
                cond = _decide_guards(_rename(cond, names))
                if cond == FALSE:
                    continue
                key = (op, eng, at)
                merged[key] = f_or(merged[key], cond) if key in merged else cond
            entry = f"{fn.path}:{fn.line}"
            for (op, eng, at), cond in merged.items():
                kept = _bounded(cond, eng, entry)
                if kept != FALSE:
                    out.append(EngineSite(aclnn, op, eng, kept, at, entry))
    return out


def sites_of(files: Mapping[str, str], *, origin_root: str = "") -> list[EngineSite]:
    """Convenience for tests and one-off reads: {library-relative path: text} → sites."""
    return analyze(parse_source(text, origin=Origin(f"{origin_root}/{p}" if origin_root else p),
                                path=p) for p, text in files.items())
