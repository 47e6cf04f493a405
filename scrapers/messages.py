"""Message sites: the lines of code that print what a user finds in a torch_npu / CANN log.

:func:`parse_source` reads one C++ file (CANN's ``op_api`` sources, op-plugin's opapi/aclops
kernels and utils, torch_npu's ``csrc``) or op-plugin's codegen (``gen.py``, whose C++ is held
in Python strings) and returns each site that prints an error or a warning:

* CANN: ``OP_LOGE(code, "fmt", …)``, ``OP_LOGW``, and the checking macros of CANN's ``opdev``
  headers (``OP_CHECK_DTYPE_NOT_SUPPORT``, ``OP_CHECK_MAX_DIM``, ``OP_CHECK_NULL`` …), whose
  message is fixed by the macro (:data:`MACRO_TEMPLATES`: the texts those macros log, as seen
  in CANN's logs); an ``OP_LOGE`` inside ``OP_CHECK(cond, OP_LOGE(…), …)`` is guarded by
  ``not (cond)``;
* torch_npu and op-plugin: ``TORCH_CHECK(cond, "a", x, "b" + y)`` (streamed pieces and string
  concatenation), ``TORCH_CHECK_*``, ``TORCH_NPU_WARN(_ONCE)``, ``TORCH_WARN(_ONCE)``,
  ``AT_ERROR``, ``TORCH_INTERNAL_ASSERT``, ``ASCEND_LOGE/W``.

Each :class:`MessageSite` carries its template (the format string; a piece that is not a
literal is written ``%{expression}``), the line, the enclosing function, the condition that
guards it (enclosing ``if``s, the ``OP_CHECK`` condition, the check macro's own test) and the
dtype support lists it refers to. :func:`template_pattern` turns a template into the regex a
log line is matched with; :func:`anchor_words` gives the literal words an index can key it on.

Pure: text in, sites out. A file with no message macro costs one regex search.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from opcheck.scrapers.rows import Origin

__all__ = ["MACRO_TEMPLATES", "MessageFile", "MessageSite", "anchor_words", "parse_source",
           "template_pattern"]

# printf-style: the format is the first string-literal argument (OP_LOGE(code, "fmt", …))
_PRINTF = {"OP_LOGE": "error", "OP_LOGW": "warning", "ASCEND_LOGE": "error",
           "ASCEND_LOGW": "warning", "OP_CHECK_ADD_TO_LAUNCHER_LIST_AICORE": "error",
           "OP_CHECK_INFERSHAPE": "error", "OPS_LOG_E": "error", "OP_LOGE_WITHOUT_REPORT": "error"}
_COND_FIRST = {"OP_CHECK_ADD_TO_LAUNCHER_LIST_AICORE", "OP_CHECK_INFERSHAPE"}
# streamed: every argument after the condition is a piece of the message (c10's str(...))
_STREAMED = {"TORCH_CHECK": "error", "TORCH_CHECK_WITH": "error", "TORCH_CHECK_TYPE": "error",
             "TORCH_CHECK_VALUE": "error", "TORCH_CHECK_INDEX": "error",
             "TORCH_CHECK_NOT_IMPLEMENTED": "error", "TORCH_INTERNAL_ASSERT": "error",
             "TORCH_NPU_WARN": "warning", "TORCH_NPU_WARN_ONCE": "warning",
             "TORCH_WARN": "warning", "TORCH_WARN_ONCE": "warning", "AT_ERROR": "error"}
# no condition argument: the message starts at the first argument
_NO_CONDITION = {"TORCH_NPU_WARN", "TORCH_NPU_WARN_ONCE", "TORCH_WARN", "TORCH_WARN_ONCE",
                 "AT_ERROR"}

# The messages CANN's opdev checking macros log (op_error_check.h; the header is not among the
# mirrored sources: these are the texts its macros print). ``{0}`` … are the macro's arguments
# as written at the call site (``#tensor``); the guard is the macro's own test.
MACRO_TEMPLATES: dict[str, tuple[str, str]] = {
    "OP_CHECK_NULL": ("Expected a proper Tensor but got null for argument {0}.", "{0} is null"),
    "OP_CHECK_DTYPE_NOT_SUPPORT": (
        "{0} not implemented for %s, should be in dtype support list %s.",
        "dtype of {0} not in {1}"),
    "OP_CHECK_DTYPE_NOT_MATCH": ("Tensor {0} expected dtype is %s but found %s.",
                                 "dtype of {0} != {1}"),
    "OP_CHECK_DTYPE_NOT_SAME": (
        "Expected both tensors to have same dtype, but found {0} %s and {1} %s.",
        "dtype of {0} != dtype of {1}"),
    "OP_CHECK_RESULT_DTYPE_CAST_FAILED": (
        "Result type %s can't be cast to the desired output type %s.",
        "{0} cannot be cast to {1}"),
    "OP_CHECK_BROADCAST": ("The size of tensor {0} %s must match the size of tensor {1} %s.",
                           "{0} and {1} do not broadcast"),
    "OP_CHECK_BROADCAST_AND_INFER_SHAPE": (
        "The size of tensor {0} %s must match the size of tensor {1} %s.",
        "{0} and {1} do not broadcast"),
    "OP_CHECK_BROADCAST_WITH_SHAPE": ("The size of tensor {0} %s must match the size %s.",
                                      "{0} does not broadcast to {1}"),
    "OP_CHECK_SHAPE_NOT_EQUAL": (
        "Expected tensor for {0} to have same size as tensor for {1}, but %s does not equal %s.",
        "shape of {0} != shape of {1}"),
    "OP_CHECK_SHAPE_NOT_EQUAL_WITH_EXPECTED_SIZE": (
        "Expected tensor for {0} to have same size as %s, but got %s.", "shape of {0} != {1}"),
    "OP_CHECK_WRONG_DIMENSION": ("Expected %zu dimension input, but got {0} with sizes %s.",
                                 "rank of {0} != {1}"),
    "OP_CHECK_MAX_DIM": ("The {0} tensor cannot be larger than %zu dimensions.",
                         "rank of {0} > {1}"),
    "OP_CHECK_MIN_DIM": ("The {0} tensor must have at least %zu dimensions.", "rank of {0} < {1}"),
    "OP_CHECK_COMM_INPUT": ("The workspaceSize or executor is nullptr.",
                            "workspaceSize or executor is null"),
    "OP_CHECK_TENSORLIST_SIZE_EQUAL": (
        "The {0} tensorlist and {1} tensorlist must have the same number of tensors, "
        "but got %ld and %ld.", "{0} and {1} differ in length"),
}
# macros that print a message we cannot know (their text is built elsewhere): counted, not indexed
_OPAQUE = ("OP_LOGE_FOR_",)
# the guard-only wrapper: OP_CHECK(cond, OP_LOGE(...), ret)
_GUARDS = {"OP_CHECK", "OP_CHECK_IF", "OP_API_CHECK"}

_ALL = sorted({*_PRINTF, *_STREAMED, *MACRO_TEMPLATES, *_GUARDS}, key=len, reverse=True)
_KNOWN = frozenset(_ALL)
_MACRO = re.compile(r"\b(OP_[A-Z_]+|TORCH_[A-Z_]+|AT_ERROR|ASCEND_LOG[EW]|OPS_LOG_E)\s*\(")
_NEEDLES = ("OP_LOG", "OP_CHECK", "TORCH_", "AT_ERROR", "ASCEND_LOG", "OPS_LOG", "OP_API_CHECK")
_LEXEME = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*[\s\S]*?\*/')
_PY_LEXEME = re.compile(r'"(?:\\.|[^"\\\n])*"|#[^\n]*')
_STRING = re.compile(r'"((?:\\.|[^"\\\n])*)"')
_STRUCT = re.compile(r"[{};]")
_IF_HEAD = re.compile(r"^\s*(?:else\s+)?if\s*(?:constexpr\s*)?\((?P<cond>[\s\S]*)\)\s*$")
_FUNC_HEAD = re.compile(r"(?P<name>~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*)\s*\([\s\S]*\)\s*"
                        r"(?:const\s*)?(?:override\s*)?(?:noexcept\s*)?(?:->\s*[\w:<>*& ]+)?$")
_NOT_FUNC = {"def", "if", "for", "while", "switch", "catch", "return", "sizeof", "defined"}
_DT_LIST = re.compile(r"(?P<name>[A-Z][A-Z0-9_]*LIST[A-Z0-9_]*)\s*=\s*\{(?P<body>[^{}]*)\}")
_DTYPE = re.compile(r"DT_[A-Z0-9_]+")
_CONST = re.compile(r"(?<![\w])(?P<name>[A-Z][A-Z0-9_]{1,60})\s*=\s*(?P<value>-?\d{1,12})(?![\w.])")
_ESCAPES = {"n": " ", "t": " ", '"': '"', "'": "'", "\\": "\\", "r": ""}
_SPACE = re.compile(r"\s+")
_ACLNN_DEF = re.compile(r"\b(aclnn[A-Z]\w*?)GetWorkspaceSize\s*\(")
_PARENS = re.compile(r"[()]")
_ARGSEP = re.compile(r"[(\[{)\]},]")
MAX_EXPR = 60  # characters kept of a non-literal piece's expression
MAX_CONDITION = 240


@dataclass(frozen=True)
class MessageSite:
    macro: str
    level: str  # error | warning
    template: str  # literal text, printf conversions, %{expr} for pieces that are not literals
    line: int
    function: str = ""
    condition: str = ""  # what holds when it prints ("" when unconditional or unknown)
    lists: str = ""  # dtype lists it refers to: "NAME:DT_A DT_B;EMPTY_LIST:"
    code: str = ""  # the ACLNN_ERR_* / ErrCode the call names


@dataclass
class MessageFile:
    """The sites of one file, and how many message macros it has by family (for coverage):
    ``found``: every call; ``literal``: those whose message has a literal part; ``indexed``:
    those that became a site with a pattern an index can key on."""

    sites: list[MessageSite] = field(default_factory=list)
    aclnn: tuple[str, ...] = ()  # the aclnn functions the file defines (its entry points)
    found: dict[str, int] = field(default_factory=dict)
    literal: dict[str, int] = field(default_factory=dict)
    indexed: dict[str, int] = field(default_factory=dict)


def family(macro: str) -> str:
    """The coverage family of a macro: OP_LOGE, OP_CHECK, TORCH_CHECK, warning, other."""
    if macro in ("OP_LOGE", "OP_LOGE_WITHOUT_REPORT", "OPS_LOG_E") or macro.startswith(_OPAQUE):
        return "OP_LOGE"
    if macro.startswith("OP_CHECK") or macro in _GUARDS:
        return "OP_CHECK"
    if macro.startswith("TORCH_CHECK") or macro in ("AT_ERROR", "TORCH_INTERNAL_ASSERT"):
        return "TORCH_CHECK"
    if "WARN" in macro or macro.endswith("LOGW"):
        return "warning"
    return "other"


def _blank(m: re.Match[str]) -> str:
    s = m.group(0)
    if s[0] in "\"'":  # a literal: kept, so arguments can be read; masked in the structure
        return s
    return re.sub(r"[^\n]", " ", s)


def _mask(m: re.Match[str]) -> str:
    s = m.group(0)
    if s[0] in "\"'":
        return s[0] + "x" * (len(s) - 2) + s[-1]
    return re.sub(r"[^\n]", " ", s)


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def _compact(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _File:
    """One file's text with comments blanked (``code``) and also string contents masked
    (``masked``, for structure), same offsets; its blocks with their heads."""

    def __init__(self, text: str, python: bool) -> None:
        lex = _PY_LEXEME if python else _LEXEME
        if not python and "\\\n" in text:  # macro continuations: same offsets, no backslash
            text = text.replace("\\\n", " \n")
        self.code = lex.sub(_blank, text)
        self.masked = lex.sub(_mask, text)
        self.python = python
        self._lines: list[int] = [m.start() for m in re.finditer("\n", text)]
        # blocks: (open, close, head); head: the text between the statement end before it and {
        self.blocks: list[tuple[int, int, str]] = []
        self.closed: dict[int, str] = {}  # close position → head (an else reads its if)
        stack: list[tuple[int, str]] = []
        last = 0
        for m in _STRUCT.finditer(self.masked):
            ch, pos = m.group(0), m.start()
            if ch == "{":
                stack.append((pos, self.masked[last:pos]))
            elif ch == "}" and stack:
                start, head = stack.pop()
                self.blocks.append((start, pos, head))
                self.closed[pos] = head
            last = pos + 1
        self.blocks.sort()
        self.lists = {m["name"]: tuple(_DTYPE.findall(m["body"]))
                      for m in _DT_LIST.finditer(self.code) if "DT_" in m["body"] or
                      not m["body"].strip()} if "LIST" in self.code else {}
        self._consts: dict[str, str] | None = None

    @property
    def consts(self) -> dict[str, str]:
        if self._consts is None:
            self._consts = {m["name"]: m["value"] for m in _CONST.finditer(self.code)}
        return self._consts

    def line_of(self, pos: int) -> int:
        return bisect.bisect_left(self._lines, pos) + 1

    def close_paren(self, open_pos: int) -> int:
        depth = 0
        for m in _PARENS.finditer(self.masked, open_pos):
            depth += 1 if m.group(0) == "(" else -1
            if depth == 0:
                return m.start()
        return -1

    def args(self, start: int, end: int) -> list[str]:
        """The top-level comma-separated arguments of code[start:end] (strings masked)."""
        out: list[str] = []
        depth, last = 0, start
        for m in _ARGSEP.finditer(self.masked, start, end):
            ch, pos = m.group(0), m.start()
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif depth == 0:
                out.append(self.code[last:pos])
                last = pos + 1
        out.append(self.code[last:end])
        return [a.strip() for a in out if a.strip()]

    def enclosing(self, pos: int) -> tuple[str, list[str]]:
        """The enclosing function's name and the if-conditions around ``pos``, outermost first."""
        func, conds = "", []
        for open_, close, head in self.blocks:
            if open_ >= pos:
                break
            if close < pos:
                continue
            h = head.strip()
            if h.startswith("}"):
                h = h[1:]
            mi = _IF_HEAD.match(h)
            if mi:
                raw = self.code[open_ - len(head):open_].strip().removeprefix("}").strip()
                conds.append(_condition_text(raw))
                continue
            if h.startswith("else"):
                prev = self.closed.get(open_ - len(head) - 1, "").strip().removeprefix("}")
                mp = _IF_HEAD.match(prev.strip())
                conds.append(f"not ({_compact(mp['cond'], MAX_CONDITION)})" if mp else "")
                continue
            mf = _FUNC_HEAD.search(h)
            if mf and mf["name"].split("::")[-1] not in _NOT_FUNC and not h.startswith(("namespace", "class", "struct")):
                func = mf["name"]
                conds = []  # a lambda or function inside: its own guards only
        return func, conds

    def braceless_if(self, pos: int) -> str:
        """``if (cond) MACRO(...)`` without braces: the condition."""
        start = max(self.masked.rfind(c, 0, pos) for c in ";{}") + 1
        head = self.masked[start:pos]
        mi = _IF_HEAD.match(head.removeprefix("else").strip() if head.strip().startswith("else")
                            else head)
        return self.code[start:pos].strip() if mi else ""


def _condition_text(raw: str) -> str:
    """``if (a && b)`` → ``a && b``; ``else if (c)`` → ``c`` (the else noted)."""
    m = _IF_HEAD.match(raw)
    if not m:
        return raw
    return _compact(m["cond"], MAX_CONDITION)


def _pieces(arg: str, python: bool, streamed: bool = False) -> list[tuple[bool, str]]:
    """An argument as (is_literal, text) pieces: adjacent string literals join, ``+`` splits."""
    out: list[tuple[bool, str]] = []
    masked = _LEXEME.sub(_mask, arg)
    parts, depth, last = [], 0, 0
    for m in re.finditer(r"[(\[{)\]}+]", masked):
        ch = m.group(0)
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            parts.append(arg[last:m.start()])
            last = m.end()
    parts.append(arg[last:])
    for part in parts:
        p = part.strip()
        if not p:
            continue
        inner = re.fullmatch(r"(?:std::)?string\s*\(([\s\S]*)\)", p)
        if inner:
            p = inner.group(1).strip()
        strings = list(_STRING.finditer(p))
        rest = _STRING.sub("", p).strip()
        if strings and not rest:
            text = "".join(_unescape(s.group(1)) for s in strings)
            if streamed:  # streamed text is not a format: a % in it is literal
                text = text.replace("%", "%%")
            if python:  # C++ held in a Python f-string: {name} is filled at generation
                text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", r"%{\1}", text)
                text = text.replace("{{", "{").replace("}}", "}")
            out.append((True, text))
        else:
            out.append((False, _compact(p, MAX_EXPR)))
    return out


def parse_source(text: str, *, origin: Origin, python: bool | None = None) -> MessageFile:
    """Every message site of one source file (C++, or ``gen.py`` with C++ in strings)."""
    out = MessageFile()
    if not any(n in text for n in _NEEDLES):
        return out
    is_py = origin.path.endswith(".py") if python is None else python
    f = _File(text, is_py)
    out.aclnn = tuple(dict.fromkeys(_ACLNN_DEF.findall(f.code)))
    guards: list[tuple[int, int, str]] = []  # OP_CHECK spans and their conditions
    for m in _MACRO.finditer(f.masked):
        if f.code[m.start():m.start() + 1] != f.masked[m.start():m.start() + 1]:
            continue
        macro = m.group(1)
        if macro not in _KNOWN and not macro.startswith(_OPAQUE):
            continue
        open_ = m.end() - 1
        close = f.close_paren(open_)
        if close < 0:
            continue
        args = f.args(open_ + 1, close)
        if macro in _GUARDS:
            if args:
                guards.append((open_, close, f"not ({_compact(args[0], MAX_CONDITION)})"))
            continue
        fam = family(macro)
        out.found[fam] = out.found.get(fam, 0) + 1
        if macro.startswith(_OPAQUE):
            continue
        line = f.line_of(m.start())
        func, conds = f.enclosing(m.start())
        cond_parts = list(conds)
        braceless = f.braceless_if(m.start())
        if braceless:
            cond_parts.append(_condition_text(braceless))
        cond_parts += [c for s, e, c in guards if s < m.start() < e]
        code = ""
        level = "error"
        if macro in MACRO_TEMPLATES:
            fmt, test = MACRO_TEMPLATES[macro]
            names = [_compact(a, MAX_EXPR) for a in args]
            vals = [f.consts.get(n, n) for n in names]
            try:
                template = fmt.format(*names)
                cond_parts.append(test.format(*[f"{n} ({v})" if v != n else n
                                                for n, v in zip(names, vals, strict=False)]))
            except IndexError:
                continue
            pieces = [(True, template)]
            refs = [a for a in names if a in f.lists]
        elif macro in _PRINTF:
            level = _PRINTF[macro]
            idx = next((i for i, a in enumerate(args) if a.lstrip().startswith('"')), -1)
            if idx < 0:
                continue
            if macro in _COND_FIRST and args:  # (cond, ret, "fmt", ...): prints when cond
                cond_parts.append(_compact(args[0], MAX_CONDITION))
            elif idx > 0:
                code = _compact(args[0], MAX_EXPR)
            pieces = _pieces(args[idx], is_py)
            refs = []
        else:
            level = _STREAMED[macro]
            msg_args = args if macro in _NO_CONDITION else args[1:]
            if macro not in _NO_CONDITION and args and args[0].strip() != "false":
                cond_parts.append(f"not ({_compact(args[0], MAX_CONDITION)})")
            pieces = [p for a in msg_args for p in _pieces(a, is_py, streamed=True)]
            refs = []
            err = next((t for lit, t in pieces if not lit and "ErrCode::" in t), "")
            code = err[err.find("ErrCode::"):].split(")")[0] if err else ""
            # PTA_ERROR(...)/OPS_ERROR(...) append an error-code suffix: not part of the text
            while pieces and not pieces[-1][0] and ("_ERROR(" in pieces[-1][1]
                                                   or "ErrCode" in pieces[-1][1]):
                pieces.pop()
        if not any(lit and t.strip() for lit, t in pieces):
            continue
        fam_lit = out.literal
        fam_lit[fam] = fam_lit.get(fam, 0) + 1
        template = "".join(t if lit else f"%{{{t}}}" for lit, t in pieces)
        if not anchor_words(template):
            continue
        out.indexed[fam] = out.indexed.get(fam, 0) + 1
        if not refs and (macro == "OP_CHECK_DTYPE_NOT_SUPPORT" or "support list" in template):
            refs = [n for n in f.lists if n in _function_body(f, m.start())] or list(f.lists)
        lists = ";".join(f"{n}:{' '.join(f.lists[n])}" for n in refs[:8])
        out.sites.append(MessageSite(
            macro, level, template, line, func,
            _compact(" and ".join(c for c in cond_parts if c), MAX_CONDITION), lists, code))
    return out


def unit_key(*_: object) -> None:
    """Names the sync's cache entry of one library version's parsed files: its code version
    (this module's) invalidates the entry whenever the parser changes."""


def _function_body(f: _File, pos: int) -> str:
    """The text of the outermost block around ``pos`` (its function), for list references."""
    for open_, close, _ in f.blocks:
        if open_ < pos < close:
            return f.code[open_:close]
    return ""


# ---------------------------------------------------------------------------- patterns

_CONV = re.compile(r"%%|%\{(?:[^{}]|\{[^{}]*\})*\}|%[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
                   r"(?:hh|h|ll|l|z|j|t|L|I64|PRI\w+)?[diuxXoscfFeEgGpa]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")


def split_template(template: str) -> list[tuple[bool, str]]:
    """(is_literal, text) pieces of a template: literals and conversions/expressions."""
    out: list[tuple[bool, str]] = []
    last = 0
    for m in _CONV.finditer(template):
        if m.start() > last:
            out.append((True, template[last:m.start()]))
        out.append((True, "%") if m.group(0) == "%%" else (False, m.group(0)))
        last = m.end()
    if last < len(template):
        out.append((True, template[last:]))
    return out


def _conv_regex(conv: str) -> str:
    c = conv[-1]
    if conv.startswith("%{"):
        return r".{0,400}?"
    if c in "diu":
        return r"-?\d{1,20}"
    if c in "xXop":
        return r"(?:0x)?[0-9a-fA-F]{1,20}|\(nil\)|nullptr"
    if c in "fFeEgGa":
        return r"[-+]?(?:\d[\d.eE+-]{0,30}|inf|nan)"
    if c == "c":
        return "."
    return r".{0,400}?"


def template_pattern(template: str) -> str:
    """The regex a log line is searched with: literals escaped (a run of spaces matches any),
    conversions and expressions bounded wildcards, trailing spaces dropped."""
    out: list[str] = []
    pieces = split_template(template.rstrip())
    # a search needs no wildcard at either end (one there costs a scan per position)
    while pieces and not pieces[0][0]:
        pieces.pop(0)
    while pieces and not pieces[-1][0]:
        pieces.pop()
    for lit, text in pieces:
        if lit:
            out.append(r"\s+".join(re.escape(w) for w in text.split(" ")).replace(r"\s+\s+", r"\s+"))
        else:
            out.append(_conv_regex(text))
    return "".join(out)


def longest_literal(template: str) -> str:
    """The template's longest literal run, spaces trimmed: every line it printed holds it
    (a substring test before the regex)."""
    runs = [t.strip() for lit, t in split_template(template) if lit]
    return max(runs, key=len, default="")


def literal_chars(template: str) -> int:
    """How many literal characters the template has (a match's specificity)."""
    return sum(len(t.strip()) for lit, t in split_template(template) if lit)


def anchor_words(template: str) -> list[str]:
    """The literal words of a template that every line it printed contains whole (a word
    touching a conversion may be extended by the value, so it is left out)."""
    pieces = split_template(template)
    out: list[str] = []
    for i, (lit, text) in enumerate(pieces):
        if not lit:
            continue
        after_conv = i > 0 and not pieces[i - 1][0]
        before_conv = i + 1 < len(pieces) and not pieces[i + 1][0]
        for m in _WORD.finditer(text):
            if (after_conv and m.start() == 0) or (before_conv and m.end() == len(text)):
                continue
            out.append(m.group(0))
    return out
