"""CANN operator-library pages (``docs/aclnn*.md`` of ops-math/ops-nn/ops-cv/ops-transformer).

One page documents one or more aclnn functions (``aclnnLog&aclnnInplaceLog.md``). What a page
gives, and what :func:`parse_page` turns into rows:

* ``产品支持情况`` (or ``支持的产品型号``): a table ``产品 | 是否支持`` (pipe or HTML) with √/× per
  product →
  :class:`ProductSupport`, product names normalised by :func:`opcheck.core.products.product_aliases`.
* per function, the section ``## aclnnXxxGetWorkspaceSize``: a parameter table (an HTML
  ``<table>``, a pipe table, or, on older pages, a bullet list ``- self(aclTensor*，计算输入)：…``)
  → :class:`ParamRow` (parameter, in/out, dtypes, formats, ranks, non-contiguous support);
  product exceptions written below the table or inside its cells
  (``<term>Atlas 训练系列产品</term>：不支持BFLOAT16、INT4``, ``仅支持…``) → :class:`DtypeException`;
  the return codes after ``返回值`` (an HTML table with rowspans, a pipe table, or a text block
  ``返回161002 (ACLNN_ERR_PARAM_INVALID)：1. …``) → :class:`ReturnCodeRow`.
* ``约束说明``: every line, with the products of the bullet it sits under, and the common forms
  structured → :class:`ConstraintLine`.

Pages that are not one function's contract (the ``_en`` partial copies, the return-code
reference page, placeholders pointing to hiascend.com, single-phase helpers, free-form community
pages without a √/× product table, pages without a ``GetWorkspaceSize`` section) are classified by
:func:`skip_reason` and listed, never silently dropped. Anything else that does not fit (a
product name that is no product, a parameter section with no table and no list, a malformed
table) raises :class:`~opcheck.core.errors.ScrapeError` with the file and line.

Pure: text in, rows out. HTML tables are read by :mod:`opcheck.scrapers.html`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from opcheck.scrapers.aclnn_constraints import constraints
from opcheck.scrapers.aclnn_page import (
    DECLARED,
    DTYPE,
    FUNC_HEADING,
    PRODUCT_WORD,
    SUPPORT_MARK,
    TERM,
    TERM_LOOSE,
    AclnnPage,
    ConstraintLine,
    DtypeException,
    Heading,
    HtmlTable,
    PageScan,
    ParamRow,
    ProductSupport,
    ReturnCodeRow,
    ScanPage,
    dtype_tokens,
    html_tables,
    page_aliases,
    page_terms,
)
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.tables import table_at

__all__ = [
    "AclnnPage",
    "ConstraintLine",
    "DtypeException",
    "HtmlTable",
    "PageScan",
    "ParamRow",
    "ProductSupport",
    "ReturnCodeRow",
    "dtype_tokens",
    "html_tables",
    "page_or_skip",
    "parse_page",
    "scan_pages",
    "skip_reason",
]

# --------------------------------------------------------------------------- products


def _product_heading(page: ScanPage) -> Heading | None:
    return next((h for h in page.headings
                 if "产品" in h.title and ("支持" in h.title or "型号" in h.title)), None)


def _product_table(page: ScanPage) -> tuple[Sequence[str], Sequence[tuple[int, Sequence[str]]]] | None:
    """Header and rows of the first table of the product section (HTML or pipe)."""
    head = _product_heading(page)
    if head is None:
        return None
    end = page.section_end(head)
    html = page.html_in(head.index, end)
    if html:
        return html[0].header, html[0].rows
    for i in range(head.index + 1, end):
        if page.lines[i].strip().startswith("|"):
            table, _ = table_at(page.lines, i)
            if table is None:
                raise page.fail("product table without a delimiter row", i)
            return table.header, table.rows
    return None


def _is_support_table(header: Sequence[str]) -> bool:
    return len(header) >= 2 and "产品" in header[0] and "是否支持" in header[1]


def _products(page: ScanPage) -> tuple[ProductSupport, ...]:
    found = _product_table(page)
    if found is None or not _is_support_table(found[0]):
        raise page.fail("产品支持情况 is not a 产品 | 是否支持 table")
    rows = found[1]
    out: list[ProductSupport] = []
    for line, cells in rows:
        if len(cells) < 2:
            raise page.fail(f"product row with {len(cells)} cell(s)", line - 1)
        name = TERM_LOOSE.sub("", cells[0]).strip().strip("`").strip()
        mark = cells[1].strip()
        if mark not in SUPPORT_MARK:
            raise page.fail(f"product support mark {mark!r}", line - 1)
        out.append(ProductSupport(name, page_aliases(page, name, line - 1), SUPPORT_MARK[mark], line))
    return tuple(out)


# --------------------------------------------------------------------------- parameters

_COLUMNS = (  # header substring → field, first match wins
    ("输入/输出", "direction"), ("输入输出", "direction"), ("参数名", "param"),
    ("数据类型", "dtypes"), ("数据格式", "formats"), ("维度", "ranks"), ("shape", "ranks"),
    ("非连续", "non_contiguous"), ("使用说明", "notes"), ("参数", "param"),
)
_SKIP_PARAMS = {"workspaceSize", "executor", "workspace", "stream"}
_TRUE_MARKS = {"√", "✓", "✔", "是", "支持"}
_FALSE_MARKS = {"×", "✗", "✘", "否", "不支持"}


def _columns(header: Sequence[str]) -> dict[str, int]:
    cols: dict[str, int] = {}
    for k, cell in enumerate(header):
        for key, fieldname in _COLUMNS:
            if key in cell:
                cols.setdefault(fieldname, k)
                break
    return cols


def _is_param_header(header: Sequence[str]) -> bool:
    return bool(header) and "参数" in header[0]


def _mark(cell: str) -> bool | None:
    c = cell.strip()
    if c in _TRUE_MARKS:
        return True
    if c in _FALSE_MARKS:
        return False
    return None


def _split_list(cell: str) -> tuple[str, ...]:
    parts = re.split(r"[、,，/\n]", TERM_LOOSE.sub("", cell))
    return tuple(p.strip() for p in parts if p.strip() and p.strip() != "-")


_NON_PARENS = re.compile(r"[（(][^（()）]*[)）]")


def _param_rows(page: ScanPage, function: str, rows: Iterable[tuple[int, Sequence[str]]],
                cols: dict[str, int]) -> tuple[list[ParamRow], list[DtypeException]]:
    params: list[ParamRow] = []
    exceptions: list[DtypeException] = []

    def cell(cells: Sequence[str], key: str) -> str:
        k = cols.get(key)
        return cells[k] if k is not None and k < len(cells) else ""

    for line, cells in rows:
        # "self（aclTensor*）": some tables append the C type to the name
        name = TERM_LOOSE.sub("", cell(cells, "param"))
        name = re.split(r"[（(]", name, maxsplit=1)[0].strip().strip("`*").strip()
        if not name or name in _SKIP_PARAMS:
            continue
        dtype_text = cell(cells, "dtypes")
        # "INT4（暂不支持非连续Tensor）": remarks in brackets are not extra dtypes; 9.1.0 wraps
        # whole lists in <term> ("<term> FLOAT、FLOAT16</term>"): only product names are dropped
        dtypes = dtype_tokens(_NON_PARENS.sub("", _drop_products(dtype_text)))
        formats, format_nc = _formats(cell(cells, "formats"))
        nc = _mark(cell(cells, "non_contiguous"))
        params.append(ParamRow(function, name, cell(cells, "direction").strip(), dtypes,
                               dtype_text, formats, cell(cells, "ranks").strip(),
                               format_nc if nc is None else nc,
                               cell(cells, "notes").strip(), line))
        for c in cells:
            if "<term>" in c:
                for seg in _term_segments(c):
                    if page_terms(page, seg, line - 1):  # a <term> naming no product: emphasis
                        exceptions.append(_exception(page, function, seg, line, (name,)))
    return params, exceptions


def _drop_products(text: str) -> str:
    """The text without the product names written as <term>s; other <term>s unwrapped."""
    return TERM_LOOSE.sub("", TERM.sub(
        lambda m: "" if PRODUCT_WORD.search(m.group(1)) else m.group(1), text))


_FORMAT_NC = re.compile(r"^(.*?)\s*[（(]\s*(不)?支持非连续(?:的)?Tensor\s*[)）]$", re.I)


def _formats(cell: str) -> tuple[tuple[str, ...], bool | None]:
    """Format tokens, and non-contiguous support when a token states it: some pages write
    ``ND（支持非连续Tensor）`` in the format column instead of a column of their own."""
    out: list[str] = []
    nc: bool | None = None
    for token in _split_list(cell):
        m = _FORMAT_NC.match(token)
        if m:
            token, nc = m.group(1).strip(), m.group(2) is None
        if token and token not in out:
            out.append(token)
    return tuple(out), nc


def _term_segments(text: str) -> list[str]:
    """A cell's text split so that each piece starts at a run of ``<term>``s."""
    pieces = re.split(r"\n(?=\s*(?:[-*]\s*)?<term>)", text)
    return [p for p in pieces if "<term>" in p]


_NOT = re.compile(r"不支持")
_EXTRA = re.compile(r"额外支持")
_DT = DTYPE.pattern.replace("(?<![A-Za-z0-9_])(", "(?<![A-Za-z0-9_])(?:", 1)
# "<product>：数据类型支持FLOAT、FLOAT16。", "self和out数据类型支持…", "支持数据类型…": a plain
# list of what those products accept (nothing else said), so exhaustive there, as 仅支持 is
_LIST_STATEMENT = re.compile(
    rf"^(?:(?:入参|出参)?`?[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_])`?\s*(?:[、和与及,，]\s*)?)*(?:的)?(?:数据类型)?(?:支持|为)"
    rf"(?:的)?(?:数据类型)?\s*[：:]?\s*{_DT}(?:\s*[、,，/]\s*{_DT})*\s*"
    r"(?:[。；;.]|，且与\S+满足\[?互推导关系.*)?$")
_CONDITION = re.compile(r"当|仅当|时[，,：:]|场景|如下条件|情况下")
_ONLY = re.compile(r"仅支持|只支持")


def _exception(page: ScanPage, function: str, text: str, line: int,
               params: tuple[str, ...] = (), known: Sequence[str] = ()) -> DtypeException:
    products = page_terms(page, text, line - 1)
    rest = text[text.rfind("</term>") + len("</term>"):] if "</term>" in text else text
    rest = re.sub(r"^[\s：:，,]*(?:[-*+]\s+)?", "", rest).strip()
    dtypes = dtype_tokens(rest)
    if not dtypes:
        kind = "note"
    elif _NOT.search(rest):
        kind = "not"
    elif _EXTRA.search(rest):
        kind = "extra"  # added to the parameter's list on those products
    elif _ONLY.search(rest) or _LIST_STATEMENT.match(rest):
        kind = "only"
    else:
        kind = "supports"
    if not params:
        params = tuple(p for p in known
                       if re.search(rf"(?<![A-Za-z0-9_]){re.escape(p)}(?![A-Za-z0-9_])", rest))
    conditional = bool(_CONDITION.search(rest))
    return DtypeException(function, products, kind, dtypes, params, rest, line, conditional)


_BULLET_PARAM = re.compile(
    r"^\s*[-*+]\s*(?:\*\*)?`?(?P<name>[A-Za-z_]\w*)`?(?:\*\*)?\s*[（(](?P<sig>[^)）]*)[)）]\s*[：:]?\s*(?P<rest>.*)$")
_DIRECTION = re.compile(r"计算输入|计算输出|输入|输出|入参|出参|属性")


def _bullet_params(page: ScanPage, function: str, start: int, end: int) -> list[ParamRow]:
    out: list[ParamRow] = []
    for i in range(start, end):
        if page.in_code[i]:
            continue
        m = _BULLET_PARAM.match(page.lines[i])
        if not m or m.group("name") in _SKIP_PARAMS:
            continue
        rest = m.group("rest")
        d = _DIRECTION.search(m.group("sig"))
        dm = re.search(r"数据类型(?:支持|为|仅支持)?[：:]?\s*([^，。；;]*)", rest)
        dtype_text = dm.group(1) if dm else ""
        fm = re.search(r"数据格式[^，。；]*?支持\s*([A-Z0-9_、,/ ]+)", rest)
        nc: bool | None = None
        if "非连续" in rest:
            nc = not bool(re.search(r"不支持\s*\[?非连续", rest))
        out.append(ParamRow(function, m.group("name"), d.group(0) if d else "",
                            dtype_tokens(dtype_text), dtype_text,
                            _split_list(fm.group(1)) if fm else (), "", nc, rest, i + 1))
    return out


def _fill_list_dtypes(params: list[ParamRow], exc: Sequence[DtypeException]) -> list[ParamRow]:
    """List-form pages often give dtypes only per product in sub-bullets: the parameter's
    dtypes are then the union of those lists."""
    out: list[ParamRow] = []
    for p in params:
        if not p.dtypes:
            union: list[str] = []
            for e in exc:
                if p.param in e.params and e.kind in ("supports", "only"):
                    union += [d for d in e.dtypes if d not in union]
            p = replace(p, dtypes=tuple(union))
        out.append(p)
    return out


# --------------------------------------------------------------------------- return codes

_CODE_TEXT = re.compile(
    r"^(?:[-*+]\s*)?(?:返回)?\s*\**\s*(\d{6})\s*[（(]\s*(ACLNN_\w+)\s*[)）]\s*\**\s*[：:]?\s*\**(.*)$")
_NUMBERED = re.compile(r"^\d+[.、．)]\s*(.+)$")
_CODE_CONT = re.compile(r"^\s*(?:\d+[.、．)]|[-*])\s*(.+)$")


def _code_row(page: ScanPage, current: tuple[str, int | None] | None, cells: Sequence[str],
              line: int) -> tuple[str, int | None]:
    """(name, code) of a return-code table row. A row with neither is a further condition of
    the row above: upstream rowspans are sometimes shorter than the rows they cover."""
    code = next((c.strip() for c in cells if re.fullmatch(r"\d{6}", c.strip())), None)
    name = next((c.strip() for c in cells if c.strip().startswith("ACLNN_")), "")
    if code is None and not name:
        if current is None:
            raise page.fail(f"return-code row without a code: {tuple(cells)!r}", line - 1)
        return current
    return name, int(code) if code else None


def _condition(cells: Sequence[str]) -> str:
    last = cells[-1].strip() if cells else ""
    return "" if re.fullmatch(r"\d{6}|ACLNN_\w+", last) else last


def _return_codes(page: ScanPage, function: str, start: int, end: int) -> list[ReturnCodeRow]:
    out: list[ReturnCodeRow] = []
    current: tuple[str, int | None] | None = None
    for t in page.html_in(start, end):
        if not any("错误码" in h or "返回码" in h for h in t.header):
            continue
        current = None
        for line, cells in t.rows:
            current = _code_row(page, current, cells, line)
            out.append(ReturnCodeRow(function, current[0], current[1], _condition(cells), line))
    i = start
    current = None
    while i < end:
        s = page.lines[i].strip()
        if s.startswith("|") and not page.in_code[i]:
            table, j = table_at(page.lines, i)
            if table is not None and any("错误码" in h or "返回码" in h for h in table.header):
                for line, cells in table.rows:
                    current = _code_row(page, current, cells, line)
                    out.append(ReturnCodeRow(function, current[0], current[1], _condition(cells),
                                             line))
            current = None
            i = max(j, i + 1)
            continue
        m = _CODE_TEXT.search(s)
        if m:
            current = (m.group(2), int(m.group(1)))
            cond = m.group(3).strip()
            first = _CODE_CONT.match(cond)
            if cond:  # "**161002 (…)**：" alone heads the numbered conditions below it
                out.append(ReturnCodeRow(function, m.group(2), int(m.group(1)),
                                         first.group(1).strip() if first else cond, i + 1))
        elif current is not None and s and not s.startswith("```"):
            # further conditions of the code above: "2. …" lines (in a text block, any list
            # item continues it; in Markdown, only numbered items do)
            c = _CODE_CONT.match(s) if page.in_code[i] else _NUMBERED.match(s)
            if c:
                out.append(ReturnCodeRow(function, current[0], current[1], c.group(1).strip(),
                                         i + 1))
            elif not page.in_code[i]:
                current = None
        i += 1
    return out


# --------------------------------------------------------------------------- the page


_PLACEHOLDER = "本文档内容正按全新接口模板整改中"


def skip_reason(path: str, text: str) -> str | None:
    """Why a page is not one aclnn function's contract, or None when it is."""
    reason = _text_skip_reason(path, text)
    if reason is not None:
        return reason
    return _page_skip_reason(ScanPage(text, Origin(path)), text)


def _text_skip_reason(path: str, text: str) -> str | None:
    """The reasons of :func:`skip_reason` read off the name and text alone."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith("_en.md"):
        return "English copy (partial; the Chinese page is the contract)"
    if "返回码" in name or "return_code" in name:
        return "return-code reference page, not a function"
    if _PLACEHOLDER in text[:2000]:
        return "placeholder: upstream is rewriting the page (it points to the hiascend.com docs)"
    if not DECLARED.search(text):
        return "no aclnnXxxGetWorkspaceSize function (a single-phase helper, not a kernel)"
    return None


def _page_skip_reason(page: ScanPage, text: str) -> str | None:
    """The reasons of :func:`skip_reason` that need the page's structure."""
    if not _function_headings(page, text):
        if re.search(r"^#{1,6}\s+`?aclnn\w+GetWorkspaceSize", text, re.M | re.I):
            return "the GetWorkspaceSize heading is inside an unclosed code fence (broken Markdown)"
        return "no section for a GetWorkspaceSize function (helper page or no per-function sections)"
    if _product_heading(page) is None:
        return "no 产品支持情况 section"
    found = _product_table(page)
    if found is None or not _is_support_table(found[0]):
        return "product section is not a 产品 | 是否支持 table (free-form community page)"
    return None


def page_or_skip(text: str, *, origin: Origin) -> tuple[str | None, AclnnPage | None]:
    """(:func:`skip_reason`, None) for a page that is skipped, else (None, :func:`parse_page`);
    the page's structure (headings, HTML tables: most of the work) is built once for both."""
    reason = _text_skip_reason(origin.path, text)
    if reason is not None:
        return reason, None
    page = ScanPage(text, origin)
    reason = _page_skip_reason(page, text)
    if reason is not None:
        return reason, None
    return None, _parse_page(page, text, origin)


def _function_headings(page: ScanPage, text: str) -> list[tuple[Heading, str]]:
    """The section of each function's first phase: ``## aclnnXxxGetWorkspaceSize``; on pages
    whose headings drop the suffix, the first ``## aclnnXxx`` of a declared function."""
    funcs = [(h, m.group(1)) for h in page.headings if (m := FUNC_HEADING.match(h.title))]
    if funcs:
        return funcs
    declared = {m.group(1) for m in DECLARED.finditer(text)}
    seen: set[str] = set()
    for h in page.headings:
        name = h.title.strip("`").strip()
        if h.level >= 2 and name in declared and name not in seen:
            seen.add(name)
            funcs.append((h, name))
    return funcs


def parse_page(text: str, *, origin: Origin) -> AclnnPage:
    """Rows of one aclnn page. Raises ScrapeError on a structure it does not know."""
    return _parse_page(ScanPage(text, origin), text, origin)


def _parse_page(page: ScanPage, text: str, origin: Origin) -> AclnnPage:
    title = page.headings[0].title if page.headings else ""
    products = _products(page)
    funcs = _function_headings(page, text)
    if not funcs:
        raise page.fail("no aclnnXxxGetWorkspaceSize section")
    params: list[ParamRow] = []
    exceptions: list[DtypeException] = []
    codes: list[ReturnCodeRow] = []
    forms: list[str] = []
    for h, function in funcs:
        start, end = h.index, page.section_end(h)
        ret = next((i for i in range(start, end)
                    if not page.in_code[i] and not page.in_html(i) and "返回值" in page.lines[i]),
                   end)
        form, table_end = "", start
        fparams: list[ParamRow] = []
        table = next((t for t in page.html_in(start, ret) if _is_param_header(t.header)), None)
        if table is not None:
            cols = _columns(table.header)
            if "param" not in cols:
                raise page.fail(f"parameter table header {table.header!r}", table.line - 1)
            fparams, cell_exc = _param_rows(page, function, table.rows, cols)
            exceptions += cell_exc
            form, table_end = "html", table.end_line
        else:
            for i in range(start, ret):
                if page.lines[i].strip().startswith("|") and not page.in_code[i]:
                    pt, j = table_at(page.lines, i)
                    if pt is not None and _is_param_header(pt.header):
                        cols = _columns(pt.header)
                        fparams, cell_exc = _param_rows(page, function, pt.rows, cols)
                        exceptions += cell_exc
                        form, table_end = "pipe", j
                        break
            if not form:
                fparams = _bullet_params(page, function, start, ret)
                if not fparams:
                    raise page.fail(f"{function}: parameters neither in a table nor a list",
                                    start)
                form, table_end = "list", start
        known = [p.param for p in fparams]
        owner: tuple[str, ...] = ()
        fexc: list[DtypeException] = []
        block: tuple[int, str] | None = None  # (indent, "<term>…</term>：") heading a block
        lead: tuple[int, str] | None = None
        for i in range(table_end, ret):
            s = page.lines[i]
            if page.in_code[i] or page.in_html(i) or not s.strip():
                continue
            indent = len(s) - len(s.lstrip())
            if block is not None and indent <= block[0]:
                block = lead = None
            if form == "list" and (m := _BULLET_PARAM.match(s)):
                owner = (m.group("name"),)  # sub-bullets below a parameter are about it
            if "<term>" in s:
                tail = s[s.rfind("</term>") + len("</term>"):] if "</term>" in s else ""
                if not tail.strip(" ：:。") and page_terms(page, s, i):
                    # "- <term>…</term>：" alone: the lines indented below it are its clauses
                    block, lead = (indent, s.strip()), None
                    continue
                fexc.append(_exception(page, function, s.strip(), i + 1, owner, known))
            elif block is not None:
                bulleted = s.lstrip().startswith(("- ", "* ", "+ "))
                if lead is not None and (indent < lead[0] or (indent == lead[0] and not bulleted)):
                    lead = None
                clause = (lead[1] if lead else "") + s.strip()
                if s.rstrip().endswith(("：", ":")):
                    lead = (indent, s.strip())  # "当…时，需要满足如下条件：" governs the lines below
                fexc.append(_exception(page, function, block[1] + clause, i + 1, owner, known))
        exceptions += fexc
        if form == "list":
            fparams = _fill_list_dtypes(fparams, fexc)
        params += fparams
        forms.append(form)
        # some pages have no 返回值 marker outside the table: scan all after the parameters
        codes += _return_codes(page, function, ret if ret < end else table_end, end)
    return AclnnPage(origin.path, title, tuple(f for _, f in funcs), forms[0], products,
                     tuple(params), tuple(exceptions), tuple(codes), tuple(constraints(page)))


def scan_pages(items: Iterable[tuple[Origin, str]]) -> PageScan:
    """Every page either parsed or skipped with its reason; a page that fails raises."""
    scan = PageScan()
    for origin, text in items:
        reason = skip_reason(origin.path, text)
        if reason is not None:
            scan.skipped.append((origin.path, reason))
        else:
            scan.pages.append(parse_page(text, origin=origin))
    return scan
