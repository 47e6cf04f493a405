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

This is a reading of the source, not a compiler: assignments after a declaration are folded
in as ``(path ∧ new) ∨ (¬path ∧ old)``, loops are read as "some iteration", and a call into a
function this reading cannot find (CANN's closed ``aclnn_kernels``: ``Cast``, ``Contiguous``,
``Transpose``…) launches nothing it can see. Facts from here say so where they are shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin

__all__ = [
    "And", "Const", "DtypeIs", "EngineSite", "Formula", "Not", "Or", "SocIs", "SourceFile",
    "Unknown", "analyze", "formula_from_json", "formula_to_json", "parse_source", "role",
    "torch_dtype",
]

ENGINES = {"AICORE": "aicore", "AICPU": "aicpu", "DSA": "dsa"}

# CANN dtype token → torch dtype name (the OpList's spelling)
_DTYPES = {
    "DT_FLOAT": "float32", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16",
    "DT_DOUBLE": "float64", "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32",
    "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32",
    "DT_UINT64": "uint64", "DT_BOOL": "bool", "DT_COMPLEX64": "complex64",
    "DT_COMPLEX128": "complex128", "DT_COMPLEX32": "complex32",
    "DT_HIFLOAT8": "hifloat8", "DT_FLOAT8_E4M3FN": "float8_e4m3fn",
    "DT_FLOAT8_E5M2": "float8_e5m2", "DT_INT4": "int4", "DT_QINT8": "qint8",
    "DT_QUINT8": "quint8", "DT_QINT32": "qint32", "DT_FLOAT8_E8M0": "float8_e8m0fnu",
    "DT_FLOAT4_E2M1": "float4_e2m1", "DT_FLOAT4_E1M2": "float4_e1m2", "DT_STRING": "string",
    "DT_UNDEFINED": "undefined",
}

# SocVersion::X → the SoC name of CANN's binary lists (op_host/config/<soc>/)
_SOCS = {
    "ASCEND910": "ascend910", "ASCEND910B": "ascend910b", "ASCEND910_93": "ascend910_93",
    "ASCEND910_95": "ascend910_95", "ASCEND950": "ascend950", "ASCEND310P": "ascend310p",
    "ASCEND310B": "ascend310b", "ASCEND310": "ascend310", "ASCEND310C": "ascend310c",
    "ASCEND610LITE": "ascend610lite", "ASCEND910E": "ascend910e", "KIRINX90": "kirinx90",
    "ASCEND031": "ascend031", "ASCEND035": "ascend035", "ASCEND350": "ascend350",
    "KIRIN9030": "kirin9030", "MC62CM12A": "mc62cm12a",
}
# NpuArch::DAV_XXXX → SoCs (only the architectures whose SoCs are certain)
_ARCHS = {"DAV_3510": ("ascend910_95", "ascend950"), "DAV_2201": ("ascend910b", "ascend910_93")}
_REGBASE = _ARCHS["DAV_3510"]
_TYPE_CLASSES = {
    "IsComplexType": ("complex32", "complex64", "complex128"),
    "IsFloatingType": ("float16", "bfloat16", "float32", "float64"),
    "IsIntegralType": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                       "uint64"),
}  # IsRegbase(): the DAV_3510 architecture


def torch_dtype(token: str) -> str:
    """``DT_DOUBLE`` / ``DataType::DT_DOUBLE`` → ``float64`` (unknown tokens lower-cased)."""
    t = token.rsplit("::", 1)[-1]
    return _DTYPES.get(t, t.lower().removeprefix("dt_"))


@lru_cache(maxsize=4096)
def role(name: str) -> str:
    """The argument a C++ variable stands for, comparable with an ATen argument name:
    ``selfRef``/``selfCast``/``inputCast``/``x`` → ``self``, ``values``/``value`` → ``value``,
    ``allDefinedIndices``/``indices`` → ``indice``."""
    n = re.sub(r"[^a-z0-9]", "", name.lower()) or name.lower()
    n = re.sub(r"^(?:all)?(?:defined)?", "", n) or name.lower()
    n = re.sub(r"(?:ref|contiguous|cast|tensor|list|fp32)+$", "", n) or n
    n = n[:-1] if len(n) > 3 and n.endswith("s") else n
    # the primary input: ATen names it ``self`` (methods) or ``input``, aclnn entries ``self``,
    # ``input`` or ``x`` (aclnnCos(input, out) receives aten::cos's ``self``)
    return "self" if n in _PRIMARY else n


_PRIMARY = frozenset({"self", "input", "x"})


# --- formulas ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class DtypeIs:
    """The dtype of argument ``arg`` (its C++ name; ``pick`` ``first`` for ``x[0]``, ``any``
    for a list element in a loop, ``one`` for a tensor) is one of ``dtypes``."""

    arg: str
    dtypes: tuple[str, ...]
    where: str
    pick: str = "one"


@dataclass(frozen=True)
class SocIs:
    socs: tuple[str, ...]
    where: str


@dataclass(frozen=True)
class Unknown:
    # size (ranks, element and index counts), layout (strides, offsets, aliasing),
    # runtime (index positions, argument values),
    # setting (deterministic mode), other (a dtype or SoC test not understood), guard (empty
    # tensors, null pointers, failed checks)
    kind: str
    text: str
    where: str


@dataclass(frozen=True)
class DtypeEq:
    """Arguments ``a`` and ``b`` have the same dtype."""

    a: str
    b: str
    where: str


@dataclass(frozen=True)
class Not:
    item: Formula


@dataclass(frozen=True)
class And:
    items: tuple[Formula, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Formula, ...]


Formula = Const | DtypeIs | DtypeEq | SocIs | Unknown | Not | And | Or
TRUE = Const(True)
FALSE = Const(False)


def f_and(*items: Formula) -> Formula:
    out: list[Formula] = []
    for it in items:
        if it == TRUE:
            continue
        if it == FALSE:
            return FALSE
        for x in (it.items if isinstance(it, And) else (it,)):
            if x not in out:
                out.append(x)
    return TRUE if not out else out[0] if len(out) == 1 else And(tuple(out))


def f_or(*items: Formula) -> Formula:
    out: list[Formula] = []
    for it in items:
        if it == FALSE:
            continue
        if it == TRUE:
            return TRUE
        for x in (it.items if isinstance(it, Or) else (it,)):
            if x not in out:
                out.append(x)
    return FALSE if not out else out[0] if len(out) == 1 else Or(tuple(out))


def f_not(item: Formula) -> Formula:
    if isinstance(item, Const):
        return Const(not item.value)
    if isinstance(item, Not):
        return item.item
    return Not(item)


def formula_to_json(f: Formula) -> Any:
    if isinstance(f, Const):
        return f.value
    if isinstance(f, DtypeIs):
        return {"dtype": f.arg, "in": list(f.dtypes), "pick": f.pick, "at": f.where}
    if isinstance(f, SocIs):
        return {"soc": list(f.socs), "at": f.where}
    if isinstance(f, DtypeEq):
        return {"same_dtype": [f.a, f.b], "at": f.where}
    if isinstance(f, Unknown):
        return {"unknown": f.kind, "text": f.text, "at": f.where}
    if isinstance(f, Not):
        return {"not": formula_to_json(f.item)}
    if isinstance(f, And):
        return {"and": [formula_to_json(x) for x in f.items]}
    return {"or": [formula_to_json(x) for x in f.items]}


def formula_from_json(raw: Any) -> Formula:
    if isinstance(raw, str):
        raw = json.loads(raw)
    if isinstance(raw, bool):
        return Const(raw)
    if "dtype" in raw:
        return DtypeIs(raw["dtype"], tuple(raw["in"]), raw["at"], raw.get("pick", "one"))
    if "soc" in raw:
        return SocIs(tuple(raw["soc"]), raw["at"])
    if "same_dtype" in raw:
        return DtypeEq(raw["same_dtype"][0], raw["same_dtype"][1], raw["at"])
    if "unknown" in raw:
        return Unknown(raw["unknown"], raw["text"], raw["at"])
    if "not" in raw:
        return Not(formula_from_json(raw["not"]))
    if "and" in raw:
        return And(tuple(formula_from_json(x) for x in raw["and"]))
    if "or" in raw:
        return Or(tuple(formula_from_json(x) for x in raw["or"]))
    raise ValueError(f"not a routing formula: {raw!r}")


def _rename(f: Formula, names: Mapping[str, tuple[str, str]]) -> Formula:
    """A callee's formula in the caller's words: parameter → (caller's root name, pick)."""
    if isinstance(f, DtypeIs):
        got = names.get(f.arg)
        if got is None:
            return f
        root, pick = got
        return DtypeIs(root, f.dtypes, f.where, pick if pick != "one" else f.pick)
    if isinstance(f, DtypeEq):
        return DtypeEq(names.get(f.a, (f.a, ""))[0], names.get(f.b, (f.b, ""))[0], f.where)
    if isinstance(f, Not):
        return f_not(_rename(f.item, names))
    if isinstance(f, And):
        return f_and(*(_rename(x, names) for x in f.items))
    if isinstance(f, Or):
        return f_or(*(_rename(x, names) for x in f.items))
    return f


# --- tokens and statements --------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<nl>\n)
  | (?P<pp>^[ \t]*\#(?:[^\n]*\\\n)*[^\n]*)
  | [ \t\r\f\v]+
  | //[^\n]*
  | (?P<block>/\*.*?\*/)
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | '(?:\\.|[^'\\\n])*'
  | (?P<tok>[A-Za-z_]\w*|\d[\w.']*
      |::|->|==|!=|<=|>=|&&|\|\||<<|>>|\+\+|--|\+=|-=|\*=|/=|[-+*/%<>=!&|^~?:;,.(){}\[\]\#\\@$])
  | .
""", re.X | re.M | re.S)


@dataclass(frozen=True)
class Tok:
    text: str
    line: int


def tokenize(text: str) -> list[Tok]:
    """Tokens with line numbers; comments and the preprocessor's lines dropped, each string
    literal one opaque token."""
    out: list[Tok] = []
    line = 1
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "tok":
            out.append(Tok(m.group("tok"), line))
        elif kind == "nl":
            line += 1
        elif kind == "str":
            out.append(Tok('""', line))
        elif kind in ("block", "pp"):
            line += m.group(0).count("\n")
    return out


@dataclass
class Stmt:
    kind: str  # block | if | loop | return | simple | switch
    line: int
    toks: list[Tok] = field(default_factory=list)  # condition / expression / statement
    body: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] | None = None


def _match(toks: Sequence[Tok], i: int, open_: str, close: str) -> int:
    """Index of the token closing the bracket at ``i``."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t == open_:
            depth += 1
        elif t == close:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def _statements(toks: Sequence[Tok], i: int, end: int) -> list[Stmt]:
    out: list[Stmt] = []
    while i < end:
        st, i = _statement(toks, i, end)
        if st is not None:
            out.append(st)
    return out


def _statement(toks: Sequence[Tok], i: int, end: int) -> tuple[Stmt | None, int]:
    t = toks[i]
    if t.text == ";":
        return None, i + 1
    if t.text == "{":
        j = _match(toks, i, "{", "}")
        return Stmt("block", t.line, body=_statements(toks, i + 1, j)), j + 1
    if t.text == "if" and i + 1 < end:
        k = i + 1
        if toks[k].text == "constexpr":
            k += 1
        j = _match(toks, k, "(", ")")
        cond = list(toks[k + 1:j])
        then, nxt = _statement(toks, j + 1, end)
        st = Stmt("if", t.line, cond, [then] if then else [])
        if nxt < end and toks[nxt].text == "else":
            other, nxt = _statement(toks, nxt + 1, end)
            st.orelse = [other] if other else []
        return st, nxt
    if t.text in ("for", "while", "switch") and i + 1 < end and toks[i + 1].text == "(":
        j = _match(toks, i + 1, "(", ")")
        body, nxt = _statement(toks, j + 1, end)
        return Stmt("switch" if t.text == "switch" else "loop", t.line, list(toks[i + 2:j]),
                    [body] if body else []), nxt
    if t.text == "do":
        body, nxt = _statement(toks, i + 1, end)
        while nxt < end and toks[nxt].text != ";":
            nxt += 1
        return Stmt("loop", t.line, [], [body] if body else []), nxt + 1
    if t.text in ("case", "default"):
        while i < end and toks[i].text != ":":
            i += 1
        return None, i + 1
    # an expression statement or declaration: up to ';' outside brackets (lambdas included)
    j = i
    depth = 0
    while j < end:
        x = toks[j].text
        if x in "([{":
            depth += 1
        elif x in ")]}":
            depth -= 1
            if depth < 0:
                break
        elif x == ";" and depth == 0:
            break
        j += 1
    kind = "return" if t.text == "return" else "simple"
    body_toks = list(toks[i + 1:j] if kind == "return" else toks[i:j])
    return Stmt(kind, t.line, body_toks), j + 1


# --- files ------------------------------------------------------------------------------------


@dataclass
class Function:
    name: str
    namespace: str  # "l0op" for level-0 functions, "" otherwise
    static: bool
    params: tuple[str, ...]  # parameter names, in order
    returns: str  # the return type as written
    line: int
    body: list[Stmt]
    path: str  # the file (library-relative)
    # parameters declared as a DataType value (``DataType inputDtype``): a helper such as
    # ``IsAiCoreSupport(DataType d)`` tests the dtype its caller passes (``x->GetDataType()``)
    dtype_params: tuple[str, ...] = ()


@dataclass
class SourceFile:
    path: str
    functions: list[Function]
    dtype_lists: dict[str, tuple[str, ...]]  # name → torch dtypes
    ops_registered: tuple[str, ...] = ()  # OP_TYPE_REGISTER(X)


_SKIP_HEADS = {"if", "for", "while", "switch", "return", "catch", "sizeof", "decltype"}


def _param_names(toks: Sequence[Tok], *, dtype_only: bool = False) -> tuple[str, ...]:
    """The parameters' names; with ``dtype_only``, only those passed as a DataType value."""
    names: list[str] = []
    depth = 0
    cur: list[str] = []
    for t in [*toks, Tok(",", 0)]:
        if t.text in "(<[{":
            depth += 1
        elif t.text in ")>]}":
            depth -= 1
        if t.text == "," and depth == 0:
            head = cur[:cur.index("=")] if "=" in cur else cur
            ids = [x for x in head if re.fullmatch(r"[A-Za-z_]\w*", x)]
            if ids and not (len(ids) == 1 and ids[0] == "void") and (
                    not dtype_only or ("DataType" in ids[:-1] and "*" not in head)):
                names.append(ids[-1])
            cur = []
        else:
            cur.append(t.text)
    return tuple(names)


def parse_source(text: str, *, origin: Origin, path: str = "") -> SourceFile:
    """One op_api C++ file → its functions and dtype lists. ``path``: how facts cite the file
    (library-relative); defaults to ``origin.path``."""
    where = path or origin.path
    toks = tokenize(text)
    functions: list[Function] = []
    lists: dict[str, tuple[str, ...]] = {}
    registered: list[str] = []
    ns_stack: list[str | None] = []  # open braces: namespace name, or None for other blocks
    i = 0
    start = 0  # first token of the current top-level declaration
    while i < len(toks):
        t = toks[i].text
        if t == "namespace":
            j = i + 1
            name = ""
            while j < len(toks) and toks[j].text not in ("{", ";", "="):
                name += toks[j].text
                j += 1
            if j < len(toks) and toks[j].text == "{":
                ns_stack.append(name or "<anon>")
                i = start = j + 1
                continue
        if t == "extern" and i + 2 < len(toks) and toks[i + 1].text == '""' \
                and toks[i + 2].text == "{":
            ns_stack.append("<extern>")
            i = start = i + 3
            continue
        if t == "}" and ns_stack:
            ns_stack.pop()
            i = start = i + 1
            continue
        if t == ";":
            decl = toks[start:i]
            _dtype_list(decl, lists)
            texts = [x.text for x in decl]
            if texts[:2] == ["OP_TYPE_REGISTER", "("] and len(texts) > 2:
                registered.append(texts[2])
            i = start = i + 1
            continue
        if t == "{":
            decl = toks[start:i]
            close = _match(toks, i, "{", "}")
            fn = _function_head(decl)
            if fn is not None:
                name, params, static, returns = fn
                namespace = "l0op" if "l0op" in ns_stack else ""
                functions.append(Function(name, namespace, static, params, returns,
                                          decl[0].line if decl else toks[i].line,
                                          _statements(toks, i + 1, close), where,
                                          _dtype_params(decl)))
                i = start = close + 1
            else:
                # an initializer (`= {…}`), class or enum body: up to the ';' after it
                _dtype_list(toks[start:close + 1], lists)
                i = close + 1
                if i < len(toks) and toks[i].text == ";":
                    i += 1
                start = i
            continue
        i += 1
    if ns_stack and not functions:
        raise ScrapeError(f"{origin.path}: unbalanced braces (no function found)")
    return SourceFile(where, functions, lists, tuple(registered))


def _function_head(decl: Sequence[Tok]) -> tuple[str, tuple[str, ...], bool, str] | None:
    texts = [t.text for t in decl]
    if not texts or ")" not in texts or "(" not in texts or "=" in texts[:texts.index("(")]:
        return None
    close = len(texts) - 1 - texts[::-1].index(")")
    # skip trailing qualifiers (const, noexcept, override) between ')' and '{'
    if any(x not in ("const", "noexcept", "override", "final") for x in texts[close + 1:]):
        return None
    depth = 0
    open_ = close
    for j in range(close, -1, -1):
        if texts[j] == ")":
            depth += 1
        elif texts[j] == "(":
            depth -= 1
            if depth == 0:
                open_ = j
                break
    if open_ == 0 or not re.fullmatch(r"[A-Za-z_]\w*", texts[open_ - 1]):
        return None
    name = texts[open_ - 1]
    if name in _SKIP_HEADS or texts[0] in ("class", "struct", "enum", "union"):
        return None
    head = texts[:open_ - 1]
    if head and head[-1] == "::":  # Class::method
        name = f"{head[-2]}::{name}" if len(head) > 1 else name
        head = head[:-2]
    static = "static" in head
    returns = " ".join(x for x in head if x not in ("static", "inline", "extern", "const",
                                                   "constexpr", "[[nodiscard]]"))
    return name, _param_names(decl[open_ + 1:close]), static, returns


def _dtype_params(decl: Sequence[Tok]) -> tuple[str, ...]:
    texts = [t.text for t in decl]
    if "DataType" not in texts or ")" not in texts:
        return ()
    close = len(texts) - 1 - texts[::-1].index(")")
    open_ = _match_back(texts, close)
    return _param_names(decl[open_ + 1:close], dtype_only=True) if open_ > 0 else ()


def _match_back(texts: Sequence[str], close: int) -> int:
    depth = 0
    for j in range(close, -1, -1):
        if texts[j] == ")":
            depth += 1
        elif texts[j] == "(":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _dtype_list(decl: Sequence[Tok], lists: dict[str, tuple[str, ...]]) -> None:
    texts = [t.text for t in decl]
    if "DataType" not in texts or "=" not in texts or "{" not in texts:
        return
    eq = texts.index("=")
    names = [x for x in texts[:eq] if re.fullmatch(r"[A-Za-z_]\w*", x)]
    if not names:
        return
    dts = [torch_dtype(x) for x in texts[eq:] if x.startswith("DT_")]
    if dts and not any(x in ("(", "map", "pair") for x in texts[eq + 1:eq + 3]):
        lists[names[-1]] = tuple(dict.fromkeys(dts))


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


class _CondParser:
    """A C++ condition → :data:`Formula` (recursive descent over ``||``, ``&&``, ``!``,
    parentheses; each comparison becomes one atom)."""

    def __init__(self, lib: _Library, toks: Sequence[Tok], fn: Function,
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


# --- deciding a call --------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """What a decision knows of one call: the SoC and each argument's dtypes (by role)."""

    soc: str
    dtypes: Mapping[str, tuple[str, ...]]


def evaluate(f: Formula, call: Call) -> bool | None:
    """Kleene three-valued truth of ``f`` for ``call`` (None: undecided). Guards (empty
    tensors, null pointers, failed status) are decided as the valid, non-empty call."""
    if isinstance(f, Const):
        return f.value
    if isinstance(f, SocIs):
        return call.soc in f.socs
    if isinstance(f, DtypeIs):
        got = call.dtypes.get(role(f.arg))
        if not got:
            return None
        hits = [d in f.dtypes for d in (got[:1] if f.pick == "first" else got)]
        if f.pick == "one" and len(got) > 1:
            return None
        return any(hits)
    if isinstance(f, DtypeEq):
        a, b = call.dtypes.get(role(f.a)), call.dtypes.get(role(f.b))
        if not a or not b or len(a) > 1 or len(b) > 1:
            return None
        return a == b
    if isinstance(f, Unknown):
        # guards: the call is valid and non-empty; settings: their default (deterministic off)
        return False if f.kind in ("guard", "setting") else None
    if isinstance(f, Not):
        v = evaluate(f.item, call)
        return None if v is None else not v
    vals = [evaluate(x, call) for x in f.items]
    if isinstance(f, And):
        return False if False in vals else None if None in vals else True
    return True if True in vals else None if None in vals else False


def _free_atoms(f: Formula, call: Call, out: dict[Formula, None]) -> bool:
    """Collect the undecided atoms of ``f`` into ``out`` (in order); False as soon as there are
    more than :data:`MAX_FREE` (the caller gives up then, so the walk stops too)."""
    if isinstance(f, Unknown) and f.kind == "opaque":
        return False  # stands for many conditions: never split (the case count would explode)
    if isinstance(f, (Unknown, DtypeIs, DtypeEq)):
        if f not in out and evaluate(f, call) is None:
            out[f] = None
        return len(out) <= MAX_FREE
    if isinstance(f, Not):
        return _free_atoms(f.item, call, out)
    if isinstance(f, (And, Or)):
        return all(_free_atoms(x, call, out) for x in f.items)
    return True


def _assign(f: Formula, call: Call, values: Mapping[Formula, bool]) -> bool | None:
    if f in values:
        return values[f]
    if isinstance(f, Not):
        v = _assign(f.item, call, values)
        return None if v is None else not v
    if isinstance(f, (And, Or)):
        vals = [_assign(x, call, values) for x in f.items]
        if isinstance(f, And):
            return False if False in vals else None if None in vals else True
        return True if True in vals else None if None in vals else False
    return evaluate(f, call)


MAX_FREE = 8  # undecided atoms tried both ways (2^8 cases at most)


def holds(f: Formula, call: Call) -> bool | None:
    """Like :func:`evaluate`, but an undecided atom is tried both ways: ``(d ∧ x) ∨ (d ∧ ¬x)``
    holds whatever ``x`` is (the AI CPU branch a setting picks between two AI CPU kernels)."""
    v = evaluate(f, call)
    if v is not None:
        return v
    atoms: dict[Formula, None] = {}
    if not _free_atoms(f, call, atoms) or not atoms:
        return None
    free = list(atoms)
    seen: set[bool | None] = set()
    for bits in range(1 << len(free)):
        seen.add(_assign(f, call, {a: bool(bits >> k & 1) for k, a in enumerate(free)}))
        if len(seen) > 1:
            return None
    return seen.pop()


def deciding_atoms(f: Formula, call: Call) -> list[Formula]:
    """The structured atoms (dtype, SoC) that hold for ``call`` in ``f``: what a finding cites."""
    out: list[Formula] = []
    if isinstance(f, (DtypeIs, SocIs)):
        return [f] if evaluate(f, call) else []
    if isinstance(f, (And, Or)):
        for x in f.items:
            if evaluate(x, call) is not False:
                out += deciding_atoms(x, call)
    return out


def undecided_atoms(f: Formula, call: Call) -> list[Unknown | DtypeIs | DtypeEq]:
    """The atoms that left ``f`` undecided for ``call`` (their text and line)."""
    return _undecided(f, call)[1]


def _undecided(f: Formula, call: Call
               ) -> tuple[bool | None, list[Unknown | DtypeIs | DtypeEq]]:
    """(Kleene value, the atoms leaving it undecided) in one pass over ``f``."""
    if isinstance(f, (And, Or)):
        parts = [_undecided(x, call) for x in f.items]
        vals = [v for v, _ in parts]
        if isinstance(f, And):
            v: bool | None = False if False in vals else None if None in vals else True
        else:
            v = True if True in vals else None if None in vals else False
        return v, ([a for pv, atoms in parts if pv is None for a in atoms] if v is None else [])
    if isinstance(f, Not):
        v, atoms = _undecided(f.item, call)
        return (None if v is None else not v), atoms
    v = evaluate(f, call)
    if v is None and isinstance(f, (Unknown, DtypeIs, DtypeEq)):
        return v, [f]
    return v, []


def describe(f: Formula) -> str:
    """A formula as text for a report line."""
    if isinstance(f, Const):
        return "always" if f.value else "never"
    if isinstance(f, DtypeIs):
        which = {"first": f"{f.arg}[0]", "any": f"any {f.arg}"}.get(f.pick, f.arg)
        return f"{which} dtype in {{{', '.join(f.dtypes)}}}"
    if isinstance(f, SocIs):
        return f"SoC in {{{', '.join(f.socs)}}}"
    if isinstance(f, DtypeEq):
        return f"{f.a} dtype == {f.b} dtype"
    if isinstance(f, Unknown):
        return f.text
    if isinstance(f, Not):
        return f"not ({describe(f.item)})"
    joiner = " and " if isinstance(f, And) else " or "
    return joiner.join(f"({describe(x)})" for x in f.items)


def formula_dumps(f: Formula) -> str:
    """Compact JSON of ``f``: each row's file paths and condition texts are listed once
    (``{"p": [paths], "t": [texts], "f": formula}``, atoms citing ``"at": "i:line"`` and
    ``"text": j``), since one formula repeats them many times."""
    paths: dict[str, int] = {}
    texts: dict[str, int] = {}

    def intern(node: Any) -> Any:
        if isinstance(node, list):
            return [intern(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: intern(v) for k, v in node.items()}
        if isinstance(node.get("at"), str):
            path, _, line = node["at"].rpartition(":")
            out["at"] = f"{paths.setdefault(path, len(paths))}:{line}"
        if isinstance(node.get("text"), str):
            out["text"] = texts.setdefault(node["text"], len(texts))
        return out

    body = intern(formula_to_json(f))
    doc = {"p": list(paths), "t": list(texts), "f": body}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def formula_loads(text: str) -> Formula:
    try:
        doc = json.loads(text)
        paths, texts = doc["p"], doc["t"]

        def expand(node: Any) -> Any:
            if isinstance(node, list):
                return [expand(x) for x in node]
            if not isinstance(node, dict):
                return node
            out = {k: expand(v) for k, v in node.items()}
            if "at" in node:
                i, _, line = node["at"].partition(":")
                out["at"] = f"{paths[int(i)]}:{line}"
            if "text" in node:
                out["text"] = texts[node["text"]]
            return out

        return formula_from_json(expand(doc["f"]))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not a routing formula: {text[:80]!r} ({exc})") from None


def sites_of(files: Mapping[str, str], *, origin_root: str = "") -> list[EngineSite]:
    """Convenience for tests and one-off reads: {library-relative path: text} → sites."""
    return analyze(parse_source(text, origin=Origin(f"{origin_root}/{p}" if origin_root else p),
                                path=p) for p, text in files.items())


def dict_atoms(f: Formula) -> list[dict[str, Any]]:
    """Every atom of ``f`` as JSON (for reports)."""
    if isinstance(f, (DtypeIs, DtypeEq, SocIs, Unknown)):
        return [formula_to_json(f)]
    if isinstance(f, Not):
        return dict_atoms(f.item)
    if isinstance(f, (And, Or)):
        return [a for x in f.items for a in dict_atoms(x)]
    return []
