"""Per-Python-API support docs of torch_npu: which API is supported, on which product, how.

Three upstream generations are parsed, plus the small single-column API lists:

* ``html-table``: ``docs/api/torch_npu_apis.md`` (v2.1.0-7.2.0): English HTML tables
  ``PyTorch API | [Ascend NPU API] | Compatibility | Limitations`` with ``Y`` or blank
  (blank = not tested, per the file's own note, so ``supported`` is ``None``).
* ``pipe-table``: ``docs/zh/native_apis/pytorch_X-Y-Z/*.md`` (v2.7.1-7.3.0) and
  ``private_apis.md``: ``API名称 | [NPU形式名称] | 是否支持 | 限制与说明``.
* ``sections``: ``docs/zh/api/native_api/pytorch_X-Y-Z/*.md`` (master, 26.x): one block per
  API with ``**原生文档**``, a ``硬件 | 是否支持`` table of ✔/✘ per product and an optional
  ``**限制与说明**``.
* ``list``: one-column ``API名称`` tables (graph mode, DTensor, deterministic, inf/nan).

Markdown (with its embedded HTML tables) is first turned into a block stream (headings,
tables, paragraphs, markers; pipe tables via :mod:`opcheck.scrapers.tables`), which one
interpreter per generation reads, so a layout rule is written once. Parsers are pure; anything
that does not fit the known layout raises ``ScrapeError`` with the file and line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.html import CellText
from opcheck.scrapers.html import tables as html_tables
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.tables import table_at

GENERATIONS = ("html-table", "pipe-table", "sections", "list")

# --------------------------------------------------------------------------- row types


@dataclass(frozen=True)
class DtypeClause:
    """One dtype statement of a restriction text.

    ``kind``: ``only`` (仅支持 / 支持 / Only support: the list is exhaustive), ``not``
    (不支持), ``extra`` (额外支持: added on the named products). ``hardware`` empty = all
    products; ``condition`` non-empty = only under that condition (``属性mode为constant时``),
    so it is kept but not used by ``DtypeRestriction.only``/``unsupported``.
    """

    kind: str
    dtypes: tuple[str, ...]
    args: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()
    condition: str = ""
    text: str = ""


@dataclass(frozen=True)
class DtypeRestriction:
    clauses: tuple[DtypeClause, ...] = ()

    def _applies(self, c: DtypeClause, hardware: str) -> bool:
        return not c.condition and (not c.hardware or hardware in c.hardware)

    def only(self, hardware: str = "") -> frozenset[str] | None:
        """The exhaustive dtype set on ``hardware`` ("" = no product named), or None.

        Product-specific lists win over general ones (the docs give a general list and then
        "Atlas 训练系列产品：仅支持…" for the odd product out); 额外支持 adds to either.
        """
        scoped = [
            c
            for c in self.clauses
            if c.kind == "only" and c.hardware and self._applies(c, hardware)
        ]
        general = [
            c for c in self.clauses if c.kind == "only" and not c.hardware and not c.condition
        ]
        chosen = scoped or general
        if not chosen:
            return None
        out: set[str] = set()
        for c in chosen:
            out.update(c.dtypes)
        for c in self.clauses:
            if c.kind == "extra" and self._applies(c, hardware):
                out.update(c.dtypes)
        return frozenset(out)

    def allowed(self, hardware: str = "") -> frozenset[str] | None:
        """``only`` minus what is explicitly not supported on ``hardware``."""
        only = self.only(hardware)
        return None if only is None else only - self.unsupported(hardware)

    def unsupported(self, hardware: str = "") -> frozenset[str]:
        out: set[str] = set()
        for c in self.clauses:
            if c.kind == "not" and self._applies(c, hardware):
                out.update(c.dtypes)
        return frozenset(out)


@dataclass(frozen=True)
class ArgLimit:
    """An argument restriction that parsed cleanly ("dilation仅支持设置为1").

    ``kind``: ``only`` (the argument only accepts ``values``), ``not`` (rejects ``values``),
    ``unsupported_param`` (the parameter itself is not supported).
    """

    arg: str
    kind: str
    values: tuple[str, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class ApiSupportRow:
    """One API × doc version × product statement.

    ``hardware`` is the product name ("Atlas A2 训练系列产品"); "" when the doc does not
    name a product (the older generations, or the general value of a mixed cell).
    ``supported`` is None when the doc leaves it open (blank / "-").
    ``feature`` is "" for the eager support tables and names the list otherwise
    (``graph_mode``, ``dtensor``, ``deterministic``, ``inf_nan_difference``).
    ``line`` is the line of the entry (shared by the rows of one entry).
    """

    api: str
    hardware: str
    supported: bool | None
    restriction: str
    doc_version: str  # torch version of the doc folder ("2.7.1"); "" = not version-specific
    ref: str
    generation: str
    section: str = ""
    npu_api: str = ""
    doc_url: str = ""
    feature: str = ""
    dtypes: DtypeRestriction = field(default_factory=DtypeRestriction)
    only_dtypes: tuple[str, ...] | None = None  # dtypes allowed on this product; None = no list
    unsupported_dtypes: tuple[str, ...] = ()
    arg_limits: tuple[ArgLimit, ...] = ()
    line: int = 0


# --------------------------------------------------------------------------- block model


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int


@dataclass(frozen=True)
class Para:
    text: str
    line: int
    links: tuple[tuple[str, str], ...] = ()  # (text, href)


@dataclass(frozen=True)
class Marker:
    """A structural boundary: a method marker (``> <font>abs()</font>``), a ``</div>``."""

    text: str
    line: int


@dataclass(frozen=True)
class TableRow:
    cells: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[TableRow, ...]
    line: int


Block = Heading | Para | Marker | Table

# --------------------------------------------------------------------------- text helpers

_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_BR = re.compile(r"<br\s*/?>", re.I)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_WS = re.compile(r"[ \t\r\f\v\u00a0\u3000]+")
_INLINE_SPECIAL = re.compile(r"[<\[*\\&]")
_HTML_LINK = re.compile(r"<a\s[^>]*href=\"([^\"]*)\"[^>]*>(.*?)</a>", re.I | re.S)


def clean_lines(text: str) -> str:
    """Collapse blanks per line, drop empty lines: both readers end with this."""
    if "\n" not in text:
        return _WS.sub(" ", text).strip()
    lines = (_WS.sub(" ", ln).strip() for ln in text.split("\n"))
    return "\n".join(ln for ln in lines if ln)


@lru_cache(maxsize=65536)
def md_inline(s: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Markdown/inline-HTML text → (plain text, links). Backticks are kept: they mark args."""
    if not _INLINE_SPECIAL.search(s):
        return clean_lines(s), ()
    links: list[tuple[str, str]] = []

    def _link(m: re.Match[str]) -> str:
        links.append((_MD_ESCAPE.sub(r"\1", m.group(1)), _MD_ESCAPE.sub(r"\1", m.group(2))))
        return m.group(1)

    s = _MD_LINK.sub(_link, s)
    s = _BR.sub("\n", s)
    for m in _HTML_LINK.finditer(s):
        links.append((_TAG.sub("", m.group(2)), m.group(1)))
    s = _TAG.sub("", s)
    s = s.replace("**", "")
    s = _MD_ESCAPE.sub(r"\1", s)
    s = html.unescape(s)
    return clean_lines(s), tuple(links)


# the old English HTML tables: paragraphs and list items end a line, <code> marks an argument
_API_CELLS = CellText(breaks=frozenset({"br"}), ends=frozenset({"p", "li", "div"}),
                      marks=(("code", "`", "`"),))


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^[*+]\s+")
_FENCE = re.compile(r"^(```|~~~)")
_FONT_MARKER = re.compile(r"^>\s*<font[^>]*>(.*?)</font>\s*$")


def _html_table_chunk(chunk: str, first_line: int, source: str) -> Table:
    header: tuple[str, ...] | None = None
    rows: list[TableRow] = []
    for t in html_tables(chunk, _API_CELLS):
        for r in t.rows:
            cells = tuple(clean_lines(c.text) for c in r.cells)
            line = first_line + r.line - 1
            if header is None and cells and all(c.header for c in r.cells):
                header = cells
                continue
            rows.append(TableRow(cells, line))
    if header is None:
        raise ScrapeError("HTML table without a header row", source=source, line=first_line)
    return Table(header, tuple(rows), first_line)


def markdown_blocks(text: str, *, source: str = "") -> list[Block]:
    """Tokenise Markdown (with embedded HTML tables) into the shared block stream."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i, n = 0, len(lines)
    while i < n:
        raw = lines[i]
        s = raw.strip()
        lineno = i + 1
        if not s:
            i += 1
            continue
        if s.lower().startswith("<table"):
            j = i
            while j < n and "</table>" not in lines[j].lower():
                j += 1
            if j >= n:
                raise ScrapeError("unterminated <table>", source=source, line=lineno)
            blocks.append(_html_table_chunk("\n".join(lines[i : j + 1]), lineno, source))
            i = j + 1
            continue
        fence = _FENCE.match(s)
        if fence:
            j = i + 1
            while j < n and not lines[j].strip().startswith(fence.group(1)):
                j += 1
            code = clean_lines("\n".join(lines[i + 1 : j]))
            if code:
                blocks.append(Para(code, lineno))
            i = j + 1
            continue
        h = _HEADING.match(s) if raw.startswith("#") else None
        if h:
            blocks.append(Heading(len(h.group(1)), md_inline(h.group(2))[0], lineno))
            i += 1
            continue
        if s.startswith("|"):
            pipe, j = table_at(lines, i)
            if pipe is not None:
                header = tuple(md_inline(c)[0] for c in pipe.header)
                rows = tuple(
                    TableRow(tuple(md_inline(c)[0] for c in cells), line)
                    for line, cells in pipe.rows
                )
                blocks.append(Table(header, rows, lineno))
            else:
                for k in range(i, j):
                    blocks.append(Para(md_inline(lines[k].strip())[0], k + 1))
            i = j
            continue
        fm = _FONT_MARKER.match(s)
        if fm:
            blocks.append(Marker(md_inline(fm.group(1))[0], lineno))
            i += 1
            continue
        low = s.lower()
        if low.startswith("</div") or low.startswith("<div"):
            blocks.append(Marker("", lineno))
            i += 1
            continue
        body, links = md_inline(_BULLET.sub("- ", s))
        if body:
            blocks.append(Para(body, lineno, links))
        i += 1
    return blocks


# --------------------------------------------------------------------------- dtypes

_DTYPE_ALIASES: dict[str, str] = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32",
    "fp64": "fp64", "float64": "fp64", "double": "fp64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "long": "int64",
    "bool": "bool",
    "complex32": "complex32", "chalf": "complex32",
    "complex64": "complex64", "cfloat": "complex64",
    "complex128": "complex128", "cdouble": "complex128",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}  # fmt: skip


def norm_dtype(name: str) -> str | None:
    """``torch.float`` / ``float32`` / ``fp32`` → ``fp32``; None for non-dtypes."""
    key = name.strip().lower()
    key = key.removeprefix("torch.")
    return _DTYPE_ALIASES.get(key)


_TOK = (
    "(?:torch\\.)?(?:"
    + "|".join(sorted(map(re.escape, _DTYPE_ALIASES), key=len, reverse=True))
    + ")(?![A-Za-z0-9_])"
)
_DTYPE_LIST = re.compile(
    rf"\s*(?:输出)?\s*(?P<list>{_TOK}(?:\s*(?:，|,|、|和|及|与|/|\bor\b|\band\b)\s*{_TOK})*)",
    re.I,
)
_VERB = re.compile(
    r"仅支持|额外支持|暂不支持|不支持|支持|[Oo]nly supports?|[Dd]on[`'’]?t support|[Dd]o not support|[Nn]ot support(?:ed)?|[Ss]upports?"
)
_HW = re.compile(r"Atlas [^：:，,、/。；;\n]*?(?:系列产品|产品|系列)|Ascend \d+[A-Za-z]*")
_SEGMENT_SPLIT = re.compile(r"[\n。；;]")


def _verb_kind(verb: str) -> str:
    v = verb.lower()
    if "不" in v or "n't" in v or "not" in v or "don" in v:
        return "not"
    if "额外" in v:
        return "extra"
    return "only"


def _subject(prefix: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(args, hardware, condition) from the text before a verb."""
    hardware = tuple(dict.fromkeys(h.strip() for h in _HW.findall(prefix)))
    parts = [p.strip() for p in re.split(r"[，,：:]", prefix.strip().lstrip("-* ").strip())]
    parts = [p for p in parts if p]
    cond_parts: list[str] = []
    args: tuple[str, ...] = ()
    for idx, part in enumerate(parts):
        rest = _HW.sub("", part)
        rest = re.sub(r"^针对|[、/\s]|和", "", rest)
        if not rest:
            continue  # a product-only part: scope, not condition
        if idx == len(parts) - 1:
            ticked = re.findall(r"`([^`]+)`", part)
            bare = re.sub(r"`[^`]+`|[、/\s]|和|的|参数|输入", "", _HW.sub("", part))
            if ticked and not bare:
                args = tuple(ticked)
                continue
            if not ticked and re.fullmatch(r"[A-Za-z_]\w*", bare):
                args = (bare,)
                continue
        cond_parts.append(part)
    return args, hardware, "，".join(cond_parts)


@lru_cache(maxsize=16384)
def parse_dtypes(restriction_text: str) -> DtypeRestriction:
    """Dtype statements of a 限制与说明 / Limitations text.

    Plain 支持 lists (pipe-table generation) count as exhaustive: the next generation
    rewrote the same lists as 仅支持. A verb only counts when dtypes follow it directly, so
    "int64类型不支持三个tensor同时广播" (a dtype before the verb) yields nothing.
    """
    clauses: list[DtypeClause] = []
    for segment in _SEGMENT_SPLIT.split(restriction_text):
        pos = 0
        for vm in _VERB.finditer(segment):
            if vm.start() < pos:
                continue
            lm = _DTYPE_LIST.match(segment, vm.end())
            if not lm:
                continue
            toks = re.findall(_TOK, lm.group("list"), re.I)
            dtypes = tuple(dict.fromkeys(d for t in toks if (d := norm_dtype(t))))
            args, hardware, condition = _subject(segment[pos : vm.start()])
            if segment[vm.end() : lm.start("list")].strip() == "输出":
                args = ("output",)
            clauses.append(
                DtypeClause(
                    kind=_verb_kind(vm.group(0)),
                    dtypes=dtypes,
                    args=args,
                    hardware=hardware,
                    condition=condition,
                    text=segment[pos : lm.end()].strip(" ，,-"),
                )
            )
            pos = lm.end()
    return DtypeRestriction(tuple(clauses))


_ID = r"(?<![A-Za-z0-9_])`?(?P<arg>[A-Za-z_][A-Za-z0-9_]*)`?"
_VAL = r"`?(?:\([0-9,\s]*\)|[A-Za-z0-9_.+\-]+)`?"
# A value must end at punctuation or the text end: "仅支持2维及以上的输入" is no arg limit.
_VAL_END = r"(?=$|[\s，,。；;)）]|或|和|、)"
_ARG_ONLY = re.compile(
    _ID + r"\s*(?:参数)?(?:的值)?(?:目前)?(?:在NPU上)?仅支持(?:设置为|设为|为)?\s*"
    rf"(?P<vals>{_VAL}{_VAL_END}(?:\s*(?:或|和|、)\s*{_VAL}{_VAL_END})*)"
)
_ARG_NOT_VALUE = re.compile(
    r"(?:不支持|[Dd]on[`'’]?t support)\s*" + _ID + r"\s*=\s*`?(?P<val>[A-Za-z0-9_.]+)"
)
_ARG_NOT_PARAM = re.compile(r"(?:不支持|[Dd]on[`'’]?t support)\s*" + _ID + r"\s*(?:参数|parameter)")


@lru_cache(maxsize=16384)
def parse_arg_limits(restriction_text: str) -> tuple[ArgLimit, ...]:
    out: list[ArgLimit] = []
    for segment in _SEGMENT_SPLIT.split(restriction_text):
        for m in _ARG_ONLY.finditer(segment):
            vals = tuple(
                v.strip().strip("`") for v in re.split(r"\s*(?:或|和|、)\s*", m.group("vals"))
            )
            if any(norm_dtype(v) for v in vals):
                continue  # a dtype list, handled by parse_dtypes
            out.append(ArgLimit(m.group("arg"), "only", vals, m.group(0)))
        for m in _ARG_NOT_VALUE.finditer(segment):
            out.append(ArgLimit(m.group("arg"), "not", (m.group("val"),), m.group(0)))
        for m in _ARG_NOT_PARAM.finditer(segment):
            out.append(ArgLimit(m.group("arg"), "unsupported_param", (), m.group(0)))
    return tuple(out)


# --------------------------------------------------------------------------- versions/paths

_TORCH_FOLDER = re.compile(r"(?:^|/)pytorch_(\d+)-(\d+)-(\d+)(?:/|$)")
_BRANCH = re.compile(r"(?:^|/)v(\d+\.\d+\.\d+)-\d+(?:\.\d+)*(?:\.rc\d+)?/")
_TAG_REF = re.compile(r"(?:^|/)v[\d.]+(?:rc\d+)?-pytorch(\d+\.\d+\.\d+)/")


def doc_version_from_path(path: str) -> str:
    """Torch version a doc describes: ``pytorch_2-7-1/`` → 2.7.1; a ``v2.1.0-7.2.0/`` branch
    or ``v7.2.0-pytorch2.1.0/`` tag gives it for single-version docs; "" otherwise."""
    m = _TORCH_FOLDER.search(path)
    if m:
        return ".".join(m.groups())
    m = _TAG_REF.search(path)
    if m:
        return m.group(1)
    m = _BRANCH.search(path)
    if m:
        return m.group(1)
    return ""


def ref_from_path(path: str) -> str:
    """``github/<owner>/<repo>/<ref>/…`` → ref."""
    parts = path.split("/")
    if len(parts) > 4 and parts[0] == "github":
        return parts[3]
    return ""


_LIST_FEATURES = {
    "graph_supported_apis": "graph_mode",
    "dtensor_supported_apis": "dtensor",
    "deterministic_computing_apis": "deterministic",
    "inf_nan_difference_apis": "inf_nan_difference",
}
_API_DOC = re.compile(
    r"(?:^|/)docs/(?:api/torch_npu_apis\.md"
    r"|zh/(?:native_apis|api/native_api)/(?:pytorch_\d+-\d+-\d+/(?!overview\.md|PyTorch-|_menu)[^/]+\.md"
    r"|(?:appendixes/)?(?:graph_supported_apis|dtensor_supported_apis|private_apis"
    r"|deterministic_computing_apis|inf_nan_difference_apis)\.md))$"
)


def api_doc_paths(all_paths: Iterable[str]) -> list[str]:
    """The paths among ``all_paths`` that are per-API support docs (sorted)."""
    return sorted(p for p in all_paths if _API_DOC.search(p))


def feature_from_path(path: str) -> str:
    stem = path.rsplit("/", 1)[-1].removesuffix(".md").removesuffix(".html")
    return _LIST_FEATURES.get(stem, "")


# --------------------------------------------------------------------------- interpretation

_LABEL = re.compile(r"^(原生文档|NPU\s*形式名称|支持情况|限制与说明)\s*[：:]\s*(.*)$", re.S)
_MARKS = {"✔": True, "✓": True, "✘": False, "✗": False, "×": False}
_NO_RESTRICTION = {"", "-", "—", "–"}


def _is_list_header(header: Sequence[str]) -> bool:
    return len(header) == 1 and header[0] in ("API名称", "API")


def _is_pipe_header(header: Sequence[str]) -> bool:
    return bool(header) and header[0] == "API名称" and "是否支持" in header


def _is_html_header(header: Sequence[str]) -> bool:
    return bool(header) and header[0] == "PyTorch API"


def detect_generation_blocks(blocks: Sequence[Block]) -> str | None:
    tables = [b for b in blocks if isinstance(b, Table)]
    if any(
        isinstance(b, Para) and _LABEL.match(b.text) and b.text.startswith("支持情况")
        for b in blocks
    ):
        return "sections"
    if any(_is_pipe_header(t.header) for t in tables):
        return "pipe-table"
    if any(_is_html_header(t.header) for t in tables):
        return "html-table"
    if tables and all(_is_list_header(t.header) for t in tables):
        return "list"
    return None


def detect_generation(text: str) -> str | None:
    """``html-table`` | ``pipe-table`` | ``sections`` | ``list``; None: not an API doc."""
    return detect_generation_blocks(markdown_blocks(text))


@dataclass
class _Ctx:
    origin: Origin
    doc_version: str
    ref: str
    generation: str
    feature: str
    rows: list[ApiSupportRow] = field(default_factory=list)

    def fail(self, message: str, line: int | None) -> ScrapeError:
        return ScrapeError(message, source=self.origin.path, line=line)

    def emit(
        self,
        *,
        api: str,
        support: Sequence[tuple[str, bool | None]],
        restriction: str,
        line: int,
        section: str = "",
        npu_api: str = "",
        doc_url: str = "",
    ) -> None:
        restriction = "" if restriction.strip() in _NO_RESTRICTION else restriction.strip()
        dtypes = parse_dtypes(restriction) if restriction else DtypeRestriction()
        limits = parse_arg_limits(restriction) if restriction else ()
        for hardware, supported in support:
            only = dtypes.allowed(hardware)
            self.rows.append(
                ApiSupportRow(
                    api=api,
                    hardware=hardware,
                    supported=supported,
                    restriction=restriction,
                    doc_version=self.doc_version,
                    ref=self.ref,
                    generation=self.generation,
                    section=section,
                    npu_api="" if npu_api.strip() in _NO_RESTRICTION else npu_api.strip(),
                    doc_url=doc_url,
                    feature=self.feature,
                    dtypes=dtypes,
                    only_dtypes=tuple(sorted(only)) if only is not None else None,
                    unsupported_dtypes=tuple(sorted(dtypes.unsupported(hardware))),
                    arg_limits=limits,
                    line=line,
                )
            )


_API_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _api_name(cell: str) -> str:
    """First line of an API cell; later lines are notes (the sdpa cell carries one)."""
    first = cell.split("\n", 1)[0].strip().strip("`").strip()
    m = _API_IDENT.match(first)
    return m.group(0) if m else first


def _cells(ctx: _Ctx, table: Table, row: TableRow) -> tuple[str, ...]:
    # GFM pads/ignores cells; a short row here means a shifted layout, so it is fatal. Extra
    # trailing cells are dropped as GFM does (one upstream row ends in a stray "a").
    if len(row.cells) < len(table.header):
        raise ctx.fail(
            f"row has {len(row.cells)} cells, header {list(table.header)} has {len(table.header)}",
            row.line,
        )
    return row.cells[: len(table.header)]


_PIPE_SUPPORT = {"是": True, "否": False, "-": None, "": None}
_HW_CELL = re.compile(
    r"^(?P<hw>(?:(?:Atlas [^：:]*?产品|Ascend \d+[A-Za-z]*)\s*[/、]?\s*)+)[：:]\s*(?P<v>是|否)$"
)


def _pipe_support(ctx: _Ctx, cell: str, line: int) -> list[tuple[str, bool | None]]:
    out: list[tuple[str, bool | None]] = []
    for part in (p.strip() for p in cell.split("\n") or [""]):
        if part in _PIPE_SUPPORT:
            out.append(("", _PIPE_SUPPORT[part]))
            continue
        m = _HW_CELL.match(part)
        if m:
            for hw in _HW.findall(m.group("hw")):
                out.append((hw.strip(), m.group("v") == "是"))
            continue
        m2 = re.fullmatch(
            r"暂不支持\s*((?:(?:Atlas [^：:，,]*?产品|Ascend \d+[A-Za-z]*)\s*[/、]?\s*)+)", part
        )
        if m2:
            for hw in _HW.findall(m2.group(1)):
                out.append((hw.strip(), False))
            continue
        raise ctx.fail(f"unknown 是否支持 value {part!r}", line)
    if not out:
        out.append(("", None))
    return out


def _section_tables(blocks: Sequence[Block]) -> Iterator[tuple[str, Table]]:
    """Each table with the title of the level-1/2 heading above it ("" before any)."""
    section = ""
    for b in blocks:
        if isinstance(b, Heading) and b.level <= 2:
            section = b.text
        elif isinstance(b, Table):
            yield section, b


def _interpret_pipe(ctx: _Ctx, blocks: Sequence[Block]) -> None:
    for section, b in _section_tables(blocks):
        h = b.header
        if h == ("API名称", "是否支持", "限制与说明"):
            idx_npu = None
        elif h == ("API名称", "NPU形式名称", "是否支持", "限制与说明"):
            idx_npu = 1
        else:
            raise ctx.fail(
                f"unexpected table header {list(h)} (expected API名称|是否支持|限制与说明)", b.line
            )
        for row in b.rows:
            cells = _cells(ctx, b, row)
            if all(set(c) <= {"-", ":", " "} for c in cells):
                continue
            ctx.emit(
                api=_api_name(cells[0]),
                support=_pipe_support(ctx, cells[-2], row.line),
                restriction=cells[-1],
                line=row.line,
                section=section,
                npu_api=cells[idx_npu] if idx_npu is not None else "",
            )


def _interpret_html_table(ctx: _Ctx, blocks: Sequence[Block]) -> None:
    for section, b in _section_tables(blocks):
        h = b.header
        if h == ("PyTorch API", "Compatibility", "Limitations"):
            idx_npu = None
        elif h == ("PyTorch API", "Ascend NPU API", "Compatibility", "Limitations"):
            idx_npu = 1
        else:
            raise ctx.fail(
                f"unexpected table header {list(h)} (expected PyTorch API|Compatibility|Limitations)",
                b.line,
            )
        for row in b.rows:
            cells = _cells(ctx, b, row)
            mark = cells[-2].strip()
            if mark not in ("Y", ""):
                raise ctx.fail(
                    f"unknown Compatibility mark {mark!r} (expected Y or blank)", row.line
                )
            ctx.emit(
                api=_api_name(cells[0]),
                support=[("", True if mark == "Y" else None)],
                restriction=cells[-1],
                line=row.line,
                section=section,
                npu_api=cells[idx_npu] if idx_npu is not None else "",
            )


def _interpret_list(ctx: _Ctx, blocks: Sequence[Block]) -> None:
    for section, b in _section_tables(blocks):
        if not _is_list_header(b.header):
            raise ctx.fail(f"unexpected table header {list(b.header)} (expected API名称)", b.line)
        for row in b.rows:
            cells = _cells(ctx, b, row)
            text = cells[0].strip()
            if not text or set(text) <= {"-", ":"} or text in ("API名称", "API"):
                continue  # a repeated header inside the table body
            m = re.fullmatch(r"`?([\w.]+)`?\s*(.*)", text)
            if not m:
                raise ctx.fail(f"not an API name: {text!r}", row.line)
            ctx.emit(
                api=m.group(1),
                support=[("", True)],
                restriction=m.group(2),  # "反向": only the backward is meant
                line=row.line,
                section=section,
            )


@dataclass
class _Entry:
    api: str
    doc_url: str
    line: int
    section: str
    npu_api: str = ""
    want_table: bool = False
    support: list[tuple[str, bool | None]] | None = None
    restriction: list[str] | None = None


def _hardware_table(ctx: _Ctx, table: Table) -> list[tuple[str, bool | None]]:
    if table.header != ("硬件", "是否支持"):
        raise ctx.fail(
            f"unexpected hardware table header {list(table.header)} (expected 硬件|是否支持)",
            table.line,
        )
    out: list[tuple[str, bool | None]] = []
    for row in table.rows:
        hw, mark = _cells(ctx, table, row)
        if mark not in _MARKS:
            raise ctx.fail(f"unknown support mark {mark!r} for {hw!r} (expected ✔ or ✘)", row.line)
        if not hw:
            raise ctx.fail("hardware table row without a product", row.line)
        out.append((hw, _MARKS[mark]))
    if not out:
        raise ctx.fail("empty hardware table", table.line)
    return out


def _interpret_sections(ctx: _Ctx, blocks: Sequence[Block]) -> None:
    section = ""
    cur: _Entry | None = None
    collecting = False

    def finish(e: _Entry | None) -> None:
        if e is None:
            return
        if e.support is None:
            raise ctx.fail(f"API section {e.api!r} has no 支持情况 hardware table", e.line)
        ctx.emit(
            api=e.api,
            support=e.support,
            restriction="\n".join(e.restriction or []),
            line=e.line,
            section=e.section,
            npu_api=e.npu_api,
            doc_url=e.doc_url,
        )

    for b in blocks:
        if isinstance(b, Heading):
            finish(cur)
            cur, collecting = None, False
            if b.level == 1:
                section = b.text
            continue
        if isinstance(b, Marker):
            if cur is not None and cur.want_table:
                raise ctx.fail(
                    f"支持情况 of {cur.api!r} is not followed by its hardware table", b.line
                )
            collecting = False
            continue
        if isinstance(b, Table):
            if cur is not None and cur.want_table:
                cur.support = _hardware_table(ctx, b)
                cur.want_table = False
            elif collecting and cur is not None and cur.restriction is not None:
                cur.restriction.extend(" | ".join(r.cells) for r in b.rows)
            else:
                raise ctx.fail(f"table {list(b.header)} outside an API section's 支持情况", b.line)
            continue
        m = _LABEL.match(b.text)
        if cur is not None and cur.want_table:
            raise ctx.fail(f"支持情况 of {cur.api!r} is not followed by its hardware table", b.line)
        if not m:
            if collecting and cur is not None and cur.restriction is not None:
                cur.restriction.append(b.text)
            continue
        label, rest = re.sub(r"\s+", "", m.group(1)), m.group(2).strip()
        collecting = False
        if label == "原生文档":
            finish(cur)
            name, url = b.links[0] if b.links else (rest, "")
            cur = _Entry(api=_api_name(name), doc_url=url, line=b.line, section=section)
            continue
        if cur is None:
            raise ctx.fail(f"**{label}** outside an API section (no 原生文档 before it)", b.line)
        if label == "NPU形式名称":
            cur.npu_api = rest
        elif label == "支持情况":
            if cur.support is not None:
                raise ctx.fail(f"second 支持情况 in the section of {cur.api!r}", b.line)
            cur.want_table = True
        elif label == "限制与说明":
            cur.restriction = [rest] if rest else []
            collecting = True
    if cur is not None and cur.want_table:
        raise ctx.fail(f"支持情况 of {cur.api!r} is not followed by its hardware table", cur.line)
    finish(cur)


_INTERPRETERS = {
    "html-table": _interpret_html_table,
    "pipe-table": _interpret_pipe,
    "sections": _interpret_sections,
    "list": _interpret_list,
}


def interpret_blocks(blocks: Sequence[Block], *, origin: Origin) -> list[ApiSupportRow]:
    """The shared core: a block stream (from Markdown or site HTML) → rows."""
    generation = detect_generation_blocks(blocks)
    if generation is None:
        for b in blocks:
            # an API table whose columns changed: point at it rather than at the file
            if isinstance(b, Table) and b.header and b.header[0] in ("API名称", "PyTorch API"):
                raise ScrapeError(
                    f"unexpected table header {list(b.header)}", source=origin.path, line=b.line
                )
        raise ScrapeError(
            "not a recognised API support doc (no API名称/PyTorch API table, no 支持情况 section)",
            source=origin.path,
        )
    ctx = _Ctx(
        origin=origin,
        doc_version=doc_version_from_path(origin.path),
        ref=origin.ref or ref_from_path(origin.path),
        generation=generation,
        feature=feature_from_path(origin.path) if generation == "list" else "",
    )
    _INTERPRETERS[generation](ctx, blocks)
    return ctx.rows


def parse_markdown(text: str, *, origin: Origin) -> list[ApiSupportRow]:
    """Rows of one Markdown API doc (any generation; see the module docstring)."""
    return interpret_blocks(markdown_blocks(text, source=origin.path), origin=origin)
