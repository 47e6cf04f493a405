"""The ``约束说明`` section of a CANN operator page: every line, with the products it holds
for (of the bullet it sits under, its own ``<term>``, or its column of a per-product HTML
table), and the common forms structured → :class:`ConstraintLine` (``rank_max``,
``size_max``, ``range``, ``only``, the convolution dimensionality kinds ``dims`` and
``dims_dtype``; anything else is ``text``). Pure, part of :mod:`opcheck.scrapers.aclnn_docs`."""

from __future__ import annotations

import re

from opcheck.scrapers.aclnn_page import TERM, ConstraintLine, ScanPage, dtype_tokens, page_terms

_LE = r"(?:不超过|不大于|不能超过|小于等于|应小于等于|<=|≤|最大(?:为|支持)?|最多(?:支持)?|至多)"
_RANK_MAX = re.compile(rf"{_LE}\s*(\d+)\s*维")
_SIZE_MAX = re.compile(rf"(?:大小|size|shape|尾轴|元素数|长度)[^，。；;]*?{_LE}\s*(\d[\d,]*)", re.I)
_TAGS = re.compile(r"<[^>]+>")
_NUM = r"-?\d+(?:\.\d+)?(?:e\d+|[KMG])?"
_RANGE = re.compile(
    rf"[\[(（]\s*({_NUM})\s*[,，]\s*({_NUM})\s*[\])）]|({_NUM})\s*\\?[~～]\s*({_NUM})")
_IDENT = re.compile(r"`?([A-Za-z_][A-Za-z0-9_]*)`?")


# Convolution dimensionality: "支持1D和2D卷积", "暂不支持1D、3D卷积", "3D卷积正向场景仅支持FLOAT16",
# "Conv3D正向场景仅支持FLOAT16"
_DIMS = r"[123]D(?:\s*[、,，和及与]\s*[123]D)*"
_DIMS_SAID = re.compile(rf"(暂不支持|不支持|仅支持|只支持|支持)\s*({_DIMS})\s*卷积")
_DIMS_DTYPE = re.compile(
    r"(?:([123])D\s*卷积|[Cc]onv([123])[Dd])[^，。；;]*?(?:仅支持|只支持)\s*"
    r"([A-Z][A-Z0-9_]*(?:\s*[、,，]\s*[A-Z][A-Z0-9_]*)*)")
_CELL = re.compile(r"<(t[hd])\b([^>]*)>")
_COLSPAN = re.compile(r"colspan\s*=\s*[\"']?(\d+)")


def _dims(plain: str) -> tuple[str, str, str] | None:
    """(kind, subject, value) of a convolution-dimensionality statement: ``dims`` (value: the
    spatial dimensionalities the product supports, "1,2") when the line excludes one
    (仅支持/不支持), ``dims_dtype`` (subject "3D", value the dtypes it is limited to)."""
    if m := _DIMS_DTYPE.search(plain):
        dtypes = dtype_tokens(m.group(3))
        if not dtypes:
            raise ValueError(f"no dtype in {m.group(0)!r}")
        return "dims_dtype", f"{m.group(1) or m.group(2)}D", ",".join(dtypes)
    said = [(m.group(1), re.findall(r"[123]", m.group(2))) for m in _DIMS_SAID.finditer(plain)]
    if not said or all(verb == "支持" for verb, _ in said):
        return None  # "支持1D、2D和3D卷积": names what works, limits nothing
    yes = {d for verb, ds in said if "不" not in verb for d in ds}
    no = {d for verb, ds in said if "不" in verb for d in ds}
    if yes & no:
        raise ValueError(f"a dimensionality both supported and not: {plain!r}")
    if not yes:  # only what is excluded: the rest of 1-3 D stands
        yes = {"1", "2", "3"} - no
    return "dims", "", ",".join(sorted(yes))


def _column_products(page: ScanPage, i: int, header: list[tuple[str, ...]],
                     state: dict[str, int]) -> tuple[str, ...] | None:
    """Products of the HTML constraint-table column a line is in: per-product tables (one
    column per product, "约束类型" first) name the product only in the header. ``state``
    carries the column and whether the header row is being read across lines; None: not in
    a cell, or more than one cell opens on the line (which one a statement is in is
    ambiguous)."""
    s = page.lines[i]
    if "<thead" in s:
        state["head"], header[:] = 1, []
    if "</thead" in s:
        state["head"] = 0
    if re.search(r"<tr\b", s):
        state["col"] = -1
    opened, last = 0, -1
    for m in _CELL.finditer(s):
        if state.get("head"):
            header.append(page_terms(page, s[m.end():].split("</th>")[0], i))
            continue
        span = int(c.group(1)) if (c := _COLSPAN.search(m.group(2))) else 1
        state["first"] = state.get("col", -1) + 1
        state["col"] = state.get("col", -1) + span
        opened, last = opened + 1, m.end()
    inside = bool(opened) or bool(state.get("in"))
    # a cell closed after the last one opened: the lines up to the next cell are markup
    state["in"] = int(inside and not re.search(r"</t[dh]>|</tr>", s[max(last, 0):]))
    if state.get("head") or not inside or opened > 1 or state.get("col", -1) < 0:
        return None
    cols = header[state["first"]:state["col"] + 1]
    return tuple(dict.fromkeys(p for c in cols for p in c)) or None


def constraints(page: ScanPage) -> list[ConstraintLine]:
    head = next((h for h in page.headings if "约束" in h.title and h.level <= 2), None)
    if head is None:
        return []
    out: list[ConstraintLine] = []
    stack: list[tuple[int, tuple[str, ...]]] = []  # (indent, products of that bullet)
    header: list[tuple[str, ...]] = []  # per-column products of the HTML table being read
    state: dict[str, int] = {}
    for i in range(head.index + 1, page.section_end(head)):
        raw = page.lines[i]
        s = raw.strip()
        if not s or page.in_code[i] or s.startswith("```"):
            continue
        column = _column_products(page, i, header, state)
        if "</table" in s:
            header, state = [], {}
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        own = page_terms(page, s, i)
        inherited = stack[-1][1] if stack else ()
        text = re.sub(r"^[-*]\s+|^\d+[.、]\s*", "", s)
        products = own or inherited or column or ()
        if own and s.startswith(("-", "*", "<term>")):
            stack.append((indent, own))
        kind, value = "text", ""
        plain = _TAGS.sub(" ", TERM.sub("", text))
        try:
            dims = _dims(plain)
        except ValueError as e:
            raise page.fail(str(e), i) from None
        if dims is not None:
            kind, subject, value = dims
            out.append(ConstraintLine(i + 1, text, products, kind, subject, value))
            continue
        if m := _RANK_MAX.search(plain):
            kind, value = "rank_max", m.group(1)
        elif m := _SIZE_MAX.search(plain):
            kind, value = "size_max", m.group(1).replace(",", "")
        elif (m := _RANGE.search(plain)) and ("范围" in plain or "取值" in plain):
            lo, hi = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            kind, value = "range", f"{lo},{hi}"
        elif m := re.search(r"(?:仅支持|只支持)\s*([^，。；;]+)", plain):
            kind, value = "only", m.group(1).strip()
        ident = _IDENT.search(plain)
        subject = ident.group(1) if ident and kind != "text" else ""
        out.append(ConstraintLine(i + 1, text, products, kind, subject, value))
    return out
