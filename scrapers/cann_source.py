"""CANN's op_api C++ files read into what the engine analysis walks: tokens, a statement tree
of each function body with line numbers, the functions (name, namespace, parameters) and the
dtype lists of a file (:func:`parse_source`). Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.cann_formula import torch_dtype
from opcheck.scrapers.rows import Origin

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
