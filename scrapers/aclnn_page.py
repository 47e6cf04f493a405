"""The aclnn page model :mod:`opcheck.scrapers.aclnn_docs` reads in steps: the rows a page gives,
dtype words, HTML tables, and the page itself (its lines, headings, product terms). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from opcheck.core.errors import ScrapeError
from opcheck.core.products import product_aliases
from opcheck.scrapers import html
from opcheck.scrapers.rows import Origin

# --------------------------------------------------------------------------- row types


@dataclass(frozen=True)
class ProductSupport:
    name: str  # as written, without <term>
    products: tuple[str, ...]  # aliases (910A, 910B, ...)
    supported: bool
    line: int


@dataclass(frozen=True)
class ParamRow:
    function: str  # aclnnCast (the GetWorkspaceSize section it comes from)
    param: str
    direction: str  # 输入 / 输出 / 属性 / 计算输入 ... as written
    dtypes: tuple[str, ...]  # canonical tokens (FLOAT16, BFLOAT16, DOUBLE, ...), union over products
    dtype_text: str  # the cell / clause as written (may name C types: "aclIntArray*")
    formats: tuple[str, ...] = ()
    ranks: str = ""  # "0-8", "1-8", "-" ... as written
    non_contiguous: bool | None = None  # √ / × ; None when the page does not say
    notes: str = ""  # 使用说明 (accepted shapes, value rules), as written
    line: int = 0


@dataclass(frozen=True)
class DtypeException:
    """A per-product statement about data types (below the parameter table or in a cell).

    ``kind``: ``not`` (不支持: the dtypes are excluded on those products), ``only`` (仅支持 /
    只支持, or a plain list "数据类型支持X、Y": the list is exhaustive there), ``extra``
    (额外支持: added to the parameter's list there), ``supports`` (dtypes named without 不支持/仅支持, e.g.
    a 数据类型支持 list for those products; may hold only in a case: see ``conditional`` and
    ``text``), ``note`` (no dtype named: kept as text). ``params``: parameters of the function
    the text names (empty: the statement is for the whole function, or it names none).
    """

    function: str
    products: tuple[str, ...]
    kind: str
    dtypes: tuple[str, ...]
    params: tuple[str, ...]
    text: str
    line: int
    conditional: bool = False  # the text limits it to a case (当…时, 场景, 如下条件)


@dataclass(frozen=True)
class ReturnCodeRow:
    function: str
    name: str  # ACLNN_ERR_PARAM_INVALID
    code: int | None  # 161002
    condition: str
    line: int


@dataclass(frozen=True)
class ConstraintLine:
    """One line of 约束说明, structured when it has a common form. ``kind``: ``rank_max``
    (value N of "不超过N维"), ``size_max`` (value N of "大小/shape/尾轴… ≤ N"), ``range`` (value
    "lo,hi" as written, of a 取值范围 [lo, hi] or lo~hi), ``only`` (value: what follows
    仅支持/只支持), ``dims`` (value: the convolution dimensionalities the products support,
    "1,2", of a line excluding some: "暂不支持3D卷积"), ``dims_dtype`` (subject "3D", value the
    dtypes that dimensionality is limited to: "3D卷积正向场景仅支持FLOAT16"), else ``text``.
    ``products``: also the column of a per-product HTML table the line is in. The structure
    is a reading aid: ``text`` stays the fact."""

    line: int
    text: str
    products: tuple[str, ...] = ()  # from the line's own <term>s or the bullet it is under
    kind: str = "text"
    subject: str = ""  # first parameter-like identifier of the line, when any
    value: str = ""


@dataclass(frozen=True)
class AclnnPage:
    path: str
    title: str
    functions: tuple[str, ...]
    param_form: str  # html | pipe | list (how the first function's parameters are written)
    products: tuple[ProductSupport, ...]
    params: tuple[ParamRow, ...]
    exceptions: tuple[DtypeException, ...]
    return_codes: tuple[ReturnCodeRow, ...]
    constraints: tuple[ConstraintLine, ...]

    def supported_on(self) -> tuple[str, ...]:
        """Aliases with a √ row. Some pages split one alias into rows (Atlas A2 训练系列产品 √,
        Atlas 800I A2 推理产品 ×): the alias counts as supported when any of its rows is √."""
        out: list[str] = []
        for p in self.products:
            out += [a for a in p.products if p.supported and a not in out]
        return tuple(out)


@dataclass
class PageScan:
    pages: list[AclnnPage] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


# --------------------------------------------------------------------------- dtypes

DTYPE = re.compile(
    r"(?<![A-Za-z0-9_])("
    r"HIFLOAT8|FLOAT8_E\dM\d(?:FN)?|FLOAT4_E\dM\d|FLOAT8_E8M0|B?FLOAT(?:16|32|64)?|BF16|FP16|FP32"
    r"|DOUBLE|U?INT(?:1|2|4|8|16|32|64)|BOOL|COMPLEX(?:32|64|128)|QINT8|QUINT8|QINT32"
    r")(?![A-Za-z0-9_])"
)
_CANON = {"FLOAT32": "FLOAT", "FLOAT64": "DOUBLE", "BF16": "BFLOAT16", "FP16": "FLOAT16",
          "FP32": "FLOAT"}


def dtype_tokens(text: str) -> tuple[str, ...]:
    """Data types named in a text, canonical (FLOAT32 → FLOAT, FLOAT64 → DOUBLE), in order."""
    out: list[str] = []
    for m in DTYPE.finditer(text):
        tok = _CANON.get(m.group(1), m.group(1))
        if tok not in out:
            out.append(tok)
    return tuple(out)


# --------------------------------------------------------------------------- HTML tables


@dataclass(frozen=True)
class HtmlTable:
    header: tuple[str, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]  # (1-based line of the <tr>, cells)
    line: int  # line of <table
    end_line: int  # line of </table>


def _cell_text(text: str) -> str:
    return "\n".join(" ".join(part.split()) for part in text.split("\n")).strip()


def _int_attr(value: str | None) -> int:
    try:
        return max(1, int(value or "1"))
    except ValueError:
        return 1


def html_tables(text: str) -> list[HtmlTable]:
    """Every top-level HTML table of a Markdown text, spans expanded into a rectangular grid."""
    out: list[HtmlTable] = []
    for t in html.tables(text, html.CANN_CELLS):
        first = t.line
        rows = [(r.line - first + 1, any(c.header for c in r.cells),
                 [(_cell_text(c.text), _int_attr(c.rowspan), _int_attr(c.colspan))
                  for c in r.cells]) for r in t.rows]
        grid: list[tuple[int, tuple[str, ...]]] = []
        header: tuple[str, ...] = ()
        pending: dict[int, tuple[int, str]] = {}  # column → (rows left, text)
        for line, is_th, cells in rows:
            if not cells and not is_th:
                continue
            row: list[str] = []
            queue = list(cells)
            col = 0
            while queue or any(c >= col for c in pending):
                if col in pending:
                    left, txt = pending[col]
                    row.append(txt)
                    if left <= 1:
                        del pending[col]
                    else:
                        pending[col] = (left - 1, txt)
                    col += 1
                    continue
                if not queue:
                    col += 1
                    if col > 64:
                        break
                    continue
                txt, rs, cs = queue.pop(0)
                for k in range(cs):
                    row.append(txt)
                    if rs > 1:
                        pending[col + k] = (rs - 1, txt)
                col += cs
            if is_th and not header and not grid:
                header = tuple(row)
            else:
                grid.append((first + line - 1, tuple(row)))
        if not header and grid:
            header = grid.pop(0)[1]
        out.append(HtmlTable(header, tuple(grid), first, t.end_line))
    return out


# --------------------------------------------------------------------------- page model

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FUNC_HEADING = re.compile(r"^`?(aclnn\w+?)GetWorkspaceSize`?(?:\s*[（(].*)?$", re.I)
DECLARED = re.compile(r"(aclnn\w+?)GetWorkspaceSize\s*\(", re.I)
TERM = re.compile(r"<term>(.*?)</term>", re.S)
TERM_LOOSE = re.compile(r"</?term>")
SUPPORT_MARK = {"√": True, "✓": True, "✔": True, "Y": True, "×": False, "x": False, "✗": False,
            "✘": False, "X": False, "N": False}


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    index: int  # 0-based line index


class ScanPage:
    def __init__(self, text: str, origin: Origin) -> None:
        self.origin = origin
        self.lines = text.splitlines()
        self.in_code = [False] * len(self.lines)
        self.headings: list[Heading] = []
        fence: str | None = None
        for i, line in enumerate(self.lines):
            s = line.strip()
            if fence is not None:
                self.in_code[i] = True
                # CommonMark: a closing fence has no info string ("```cpp" inside stays code)
                if s.startswith(fence) and not s.lstrip(fence[0]):
                    fence = None
                continue
            if s.startswith(("```", "~~~")):
                fence = s[:3]
                self.in_code[i] = True
                continue
            m = _HEADING.match(line)
            if m:
                self.headings.append(Heading(len(m.group(1)), m.group(2).strip(), i))
        self.html = html_tables(text)

    def fail(self, message: str, index: int | None = None) -> ScrapeError:
        return ScrapeError(message, source=self.origin.path,
                           line=index + 1 if index is not None else None)

    def section_end(self, h: Heading) -> int:
        for other in self.headings:
            if other.index > h.index and other.level <= h.level:
                return other.index
        return len(self.lines)

    def html_in(self, start: int, end: int) -> list[HtmlTable]:
        return [t for t in self.html if start < t.line <= end]

    def in_html(self, index: int) -> bool:
        return any(t.line <= index + 1 <= t.end_line for t in self.html)


PRODUCT_WORD = re.compile(r"Atlas|Atla |Ascend|昇腾|Kirin|A2|A3|910|950|310")


def page_aliases(page: ScanPage, name: str, index: int) -> tuple[str, ...]:
    # markup slips seen upstream: "<term>term>Atlas …", a colon and the clause inside the term
    name = re.sub(r"^\s*term>", "", name).split("：")[0]
    aliases = product_aliases(name)
    if aliases is None:
        raise page.fail(f"not a known product name: {name!r}", index)
    return aliases


def page_terms(page: ScanPage, text: str, index: int) -> tuple[str, ...]:
    out: list[str] = []
    for m in TERM.finditer(text):
        if not PRODUCT_WORD.search(m.group(1)):
            continue  # <term> used as emphasis (约束类型, cubeMathType, a dtype list)
        for a in page_aliases(page, m.group(1), index):
            if a not in out:
                out.append(a)
    return tuple(out)
