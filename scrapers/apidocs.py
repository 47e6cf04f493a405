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

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.apidocs_blocks import (
    Block,
    Heading,
    Marker,
    Para,
    Table,
    TableRow,
    markdown_blocks,
)
from opcheck.scrapers.apidocs_dtypes import (
    _HW,
    ArgLimit,
    DtypeRestriction,
    parse_arg_limits,
    parse_dtypes,
)
from opcheck.scrapers.rows import Origin

GENERATIONS = ("html-table", "pipe-table", "sections", "list")

# --------------------------------------------------------------------------- row types


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
