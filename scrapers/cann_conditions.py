"""The routing conditions of CANN's op_api sources: an ``if`` condition's tokens read into a
:data:`~opcheck.scrapers.cann_formula.Formula` (dtype and SoC comparisons structured, bool
helpers expanded with their parameters renamed to the caller's arguments, anything else kept
as text with its file and line). Used by :mod:`opcheck.scrapers.cann_engine`'s analysis."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from opcheck.scrapers.cann_formula import (
    _ARCHS,
    _REGBASE,
    _SOCS,
    _TYPE_CLASSES,
    FALSE,
    TRUE,
    Const,
    DtypeEq,
    DtypeIs,
    Formula,
    SocIs,
    Unknown,
    _rename,
    f_and,
    f_not,
    f_or,
    torch_dtype,
)
from opcheck.scrapers.cann_source import Function, Stmt, Tok, _match

_EMPTY = re.compile(r"\w*(?:num|size|count|len)\w*(?:\(\))?\s*==\s*0$", re.I)
_SETTING = re.compile(r"[Dd]eterministic")
# memory layout: strides, offsets, aliasing, workspace tensors (a trace records none of them)
_LAYOUT = re.compile(r"IsFromWorkspace|GetData\(\)|Stride|Offset|IsContiguous|IsView|"
                     r"GetStorageShape|ViewShape\(\) *[!=]= *\w+->GetStorageShape")
_PRIVATE_FORMAT = re.compile(r"FORMAT_(?:FRACTAL|NC1HWC0|NDC1HWC0|C1HWNCoC0|FRACTAL_NZ|NZ|C04)")
_FORMAT_CALLS = ("GetStorageFormat", "GetViewFormat", "GetOriginalFormat", "GetFormat")
_SIZE_WORDS = re.compile(r"GetDimNum|GetShapeSize|GetDim\b|Size\b|size|Num\b|num|NUM|LIMIT|"
                         r"\bdims?\b|Dim\b|Prod|[Tt]ail|MAX_|MIN_|[Ss]hape|[Ll]en\b|[Cc]ount")
_GUARD_WORDS = re.compile(r"IsEmpty|nullptr|NULL\b|ACLNN_SUCCESS|ACL_SUCCESS|RT_ERROR_NONE|"
                          r"GRAPH_SUCCESS|\bret\b|CheckParams|Check\w*Param|OP_CHECK")
_DTYPE_WORDS = re.compile(r"GetDataType|DataType|Dtype|dtype|SocVersion|GetSoc|NpuArch")
def _returns_true(stmts: Sequence[Stmt]) -> bool:
    for st in stmts:
        if st.kind == "return":
            return [t.text for t in st.toks] == ["true"]
        if st.kind == "block":
            return _returns_true(st.body)
    return False


def _split_args(toks: Sequence[Tok]) -> list[list[Tok]]:
    out: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        if t.text == "," and depth == 0:
            out.append([])
        else:
            out[-1].append(t)
    return [a for a in out if a] if any(out) else []


def _root(arg: Sequence[Tok]) -> tuple[str, str]:
    """The variable an argument expression reads, and ``first`` when it indexes ``[0]``."""
    texts = [t.text for t in arg]
    ids = [x for x in texts if re.fullmatch(r"[A-Za-z_]\w*", x)
           and x not in ("const_cast", "static_cast", "const", "aclTensor", "aclTensorList",
                         "op", "l0op", "std", "move")]
    if not ids:
        return "", "one"
    root = ids[0]
    k = texts.index(root)
    nxt = texts[k + 1:k + 4]
    if nxt[:3] == ["[", "0", "]"] or (nxt[:1] == [")"] and texts[k + 2:k + 5] == ["[", "0", "]"]):
        return root, "first"
    return root, "one"


def _arg_names(params: Sequence[str], args: Sequence[Sequence[Tok]]
               ) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for p, a in zip(params, args, strict=False):
        root, pick = _root(a)
        if root:
            out[p] = (root, pick)
    return out


class Helpers(Protocol):
    """What a condition reads of the library it is in (:class:`opcheck.scrapers.cann_engine`'s
    analysis): dtype lists by file and by name, and the bool helpers a condition calls."""

    lists: dict[str, dict[str, tuple[str, ...]]]
    global_lists: dict[str, tuple[str, ...]]

    def find(self, name: str, path: str, nargs: int, qualified: bool) -> Function | None: ...

    def bool_formula(self, fn: Function) -> Formula: ...


class _CondParser:
    """A C++ condition → :data:`Formula` (recursive descent over ``||``, ``&&``, ``!``,
    parentheses; each comparison becomes one atom)."""

    def __init__(self, lib: Helpers, toks: Sequence[Tok], fn: Function,
                 env: Mapping[str, Formula], loop: bool) -> None:
        self.lib, self.toks, self.fn, self.env, self.loop = lib, list(toks), fn, env, loop
        self.i = 0

    def parse(self) -> Formula:
        if not self.toks:
            return TRUE
        try:
            f = self._or()
        except IndexError:
            return self._unknown(self.toks)
        if self.i < len(self.toks):  # a ternary, a cast, an assignment: not understood
            return self._unknown(self.toks)
        return f

    def _peek(self) -> str:
        return self.toks[self.i].text if self.i < len(self.toks) else ""

    def _or(self) -> Formula:
        items = [self._and()]
        while self._peek() == "||":
            self.i += 1
            items.append(self._and())
        return f_or(*items)

    def _and(self) -> Formula:
        items = [self._unary()]
        while self._peek() == "&&":
            self.i += 1
            items.append(self._unary())
        return f_and(*items)

    def _unary(self) -> Formula:
        if self._peek() == "!":
            self.i += 1
            return f_not(self._unary())
        if self._peek() == "(":
            close = _match(self.toks, self.i, "(", ")")
            inner = self.toks[self.i + 1:close]
            after = self.toks[close + 1].text if close + 1 < len(self.toks) else ""
            if after in ("", "&&", "||", ")"):
                sub = _CondParser(self.lib, inner, self.fn, self.env, self.loop).parse()
                self.i = close + 1
                return sub
        # one comparison: tokens up to && / || / an unmatched ')'
        start = self.i
        depth = 0
        while self.i < len(self.toks):
            x = self.toks[self.i].text
            if x in "([{":
                depth += 1
            elif x in ")]}":
                if depth == 0:
                    break
                depth -= 1
            elif x in ("&&", "||") and depth == 0:
                break
            self.i += 1
        return self._atom(self.toks[start:self.i])

    def _unknown(self, toks: Sequence[Tok]) -> Formula:
        text = _text(toks)
        where = f"{self.fn.path}:{toks[0].line if toks else self.fn.line}"
        if _GUARD_WORDS.search(text) or _EMPTY.search(text):
            return Unknown("guard", text, where)
        if _SETTING.search(text):
            return Unknown("setting", text, where)
        if _LAYOUT.search(text):
            return Unknown("layout", text, where)
        if _DTYPE_WORDS.search(text):
            return Unknown("other", text, where)
        return Unknown("size" if _SIZE_WORDS.search(text) else "runtime", text, where)

    def _atom(self, toks: Sequence[Tok]) -> Formula:
        texts = [t.text for t in toks]
        where = f"{self.fn.path}:{toks[0].line}" if toks else f"{self.fn.path}:{self.fn.line}"
        if not texts:
            return TRUE
        if texts == ["true"]:
            return TRUE
        if texts == ["false"]:
            return FALSE
        # x == true / x == false / x != false
        if len(texts) >= 3 and texts[-1] in ("true", "false") and texts[-2] in ("==", "!="):
            inner = self._atom(toks[:-2])
            positive = (texts[-1] == "true") == (texts[-2] == "==")
            return inner if positive else f_not(inner)
        ops = [k for k, x in enumerate(texts) if x in ("==", "!=", "<", ">=", ">", "<=")]
        if len(ops) == 1:
            got = self._compare(toks, ops[0], where)
            if got is not None:
                return got
        if len(texts) == 1 and re.fullmatch(r"[A-Za-z_]\w*", texts[0]):
            if texts[0] in self.env:
                return self.env[texts[0]]
            return self._unknown(toks)
        call = self._call(toks, where)
        if call is not None:
            return call
        return self._unknown(toks)

    def _dtype_of(self, toks: Sequence[Tok]) -> tuple[str, str] | None:
        texts = [t.text for t in toks]
        if len(texts) == 1 and texts[0] in self.fn.dtype_params:
            # the helper's DataType parameter: the caller's argument renames it (_rename)
            return texts[0], "one"
        if "GetDataType" not in texts:
            return None
        root, pick = _root(toks[:texts.index("GetDataType")])
        if not root:
            return None
        if pick == "one" and "[" in texts[:texts.index("GetDataType")]:
            pick = "any" if self.loop else "first"
        return root, pick

    def _compare(self, toks: Sequence[Tok], k: int, where: str) -> Formula | None:
        texts = [t.text for t in toks]
        op = texts[k]
        left, right = toks[:k], toks[k + 1:]
        lt, rt = [t.text for t in left], [t.text for t in right]
        if op in ("==", "!=") and any(w in x for x in lt + rt for w in _FORMAT_CALLS):
            # op-plugin calls op_api only on base-format inputs: never a private format
            # (NZ, NC1HWC0, FRACTAL_Z...), and two tensors of one call share their format
            both = all(any(w in x for x in side for w in _FORMAT_CALLS) for side in (lt, rt))
            if both:
                return Const(op == "==")
            if any(_PRIVATE_FORMAT.search(x) for x in lt + rt):
                return Const(op == "!=")
        if texts[:3] == ["std", "::", "find"] and op in ("==", "!=") and "end" in rt:
            got = self._find(toks[:k], where)
            if got is not None:
                return got if op == "!=" else f_not(got)
        da, db = self._dtype_of(left), self._dtype_of(right)
        if da is not None and db is not None and op in ("==", "!="):
            eq: Formula = DtypeEq(da[0], db[0], where)
            return eq if op == "==" else f_not(eq)
        for a, b in ((left, right), (right, left)):
            bt = [t.text for t in b]
            dt = self._dtype_of(a)
            if dt is not None and bt and bt[-1].startswith("DT_") and op in ("==", "!="):
                f: Formula = DtypeIs(dt[0], (torch_dtype(bt[-1]),), where, dt[1])
                return f if op == "==" else f_not(f)
            at = [t.text for t in a]
            if self._is_soc(at) and bt and bt[-1] in _SOCS and "SocVersion" in bt:
                soc = _SOCS[bt[-1]]
                if op in ("==", "!="):
                    f = SocIs((soc,), where)
                    return f if op == "==" else f_not(f)
                flipped = a is right
                less = (op in ("<", "<=")) != flipped
                if soc == "ascend910b" and op in ("<", ">=") and not flipped:
                    # ASCEND910 is the first SocVersion; 910B and 910_93 are not below 910B.
                    # Other SoCs' order is not in the open sources: left undecided.
                    older = SocIs(("ascend910",), where)
                    newer = SocIs(("ascend910b", "ascend910_93"), where)
                    known = f_or(older, newer)
                    unk = Unknown("other", _text(toks), where)
                    yes = older if less else newer
                    return f_or(yes, f_and(f_not(known), unk))
                return Unknown("other", _text(toks), where)
            arch = "GetCurNpuArch" in at or (len(at) == 1 and "arch" in at[0].lower())
            if arch and bt and bt[-1].startswith("DAV_") and op in ("==", "!="):
                if bt[-1] in _ARCHS:
                    f = SocIs(_ARCHS[bt[-1]], where)
                else:  # another architecture: not that of a SoC whose architecture is known
                    archs_known = tuple(x for socs in _ARCHS.values() for x in socs)
                    f = f_and(f_not(SocIs(archs_known, where)), Unknown("other", _text(toks), where))
                return f if op == "==" else f_not(f)
        return None

    def _find(self, toks: Sequence[Tok], where: str) -> Formula | None:
        """``std::find(LIST.begin(), LIST.end(), x->GetDataType())``: x's dtype in LIST."""
        texts = [t.text for t in toks]
        if "(" not in texts:
            return None
        k = texts.index("(")
        args = _split_args(toks[k + 1:_match(toks, k, "(", ")")])
        if len(args) != 3:
            return None
        dt = self._dtype_of(args[2])
        name = args[0][0].text if args[0] else ""
        dtypes = self.lib.lists.get(self.fn.path, {}).get(name) or \
            self.lib.global_lists.get(name)
        if dt is None or dtypes is None:
            return None
        return DtypeIs(dt[0], dtypes, where, dt[1])

    def _is_soc(self, texts: Sequence[str]) -> bool:
        if "GetSocVersion" in texts:
            return True
        return len(texts) == 1 and texts[0].lower() in ("socversion", "soc", "curarch",
                                                       "socver", "shortsocversion")

    def _call(self, toks: Sequence[Tok], where: str) -> Formula | None:
        texts = [t.text for t in toks]
        if texts[-1] != ")" or "(" not in texts:
            return None
        k = texts.index("(")
        if _match(toks, k, "(", ")") != len(toks) - 1 or k == 0:
            return None
        name = texts[k - 1]
        qualified = texts[:k - 1][-2:] == ["l0op", "::"]
        args = _split_args(toks[k + 1:-1])
        if name in ("IsRegbase", "IsRegBase"):  # IsRegBase(curArch) reads the current arch too
            return SocIs(_REGBASE, where)
        if name == "CheckType" and len(args) == 2:
            dt = self._dtype_of(args[0])
            lst = [t.text for t in args[1]]
            dtypes = self.lib.lists.get(self.fn.path, {}).get(lst[-1]) if lst else None
            if dtypes is None and lst:
                dtypes = self.lib.global_lists.get(lst[-1])
            if dt is not None and dtypes is not None:
                return DtypeIs(dt[0], dtypes, where, dt[1])
            return None
        if name in ("IsComplexType", "IsFloatingType", "IsIntegralType") and args:
            dt = self._dtype_of(args[0])
            if dt is not None:
                return DtypeIs(dt[0], _TYPE_CLASSES[name], where, dt[1])
        if texts[:k - 1] and texts[k - 2] in (".", "->"):
            return None
        callee = self.lib.find(name, self.fn.path, len(args), qualified)
        if callee is None or "bool" not in callee.returns.split():
            return None
        inner = self.lib.bool_formula(callee)
        return _rename(inner, _arg_names(callee.params, args))


def _text(toks: Sequence[Tok]) -> str:
    out = ""
    for t in toks:
        if (out and (re.match(r"\w", t.text) and re.search(r"\w$", out))) or (out and t.text in ("==", "!=", "&&", "||", "<", ">", "<=", ">=", "=")) or \
                out.endswith(("==", "!=", "&&", "||", "<=", ">=", " =", " <", " >")):
            out += " "
        out += t.text
    return out
