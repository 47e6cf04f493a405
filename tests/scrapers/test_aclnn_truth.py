"""Data truth (issue 26): per-product dtype statements of real aclnn pages, read again here by a
reading of its own (no code of scrapers/ or core/products), compared with the parser's rows.

The reading is deliberately simple: one Markdown line outside tables and code, a bullet made of
``<term>product</term>`` names joined by 、 then ：, and a statement naming data types
(不支持 / 仅支持 / 额外支持 / "数据类型支持X、Y"), not limited to a case (no 当…时), above the
约束说明 section.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from opcheck.scrapers.aclnn_docs import parse_page
from opcheck.scrapers.rows import Origin

pytestmark = pytest.mark.upstream

# doc product names → the common names (DOMAIN.md's table), by a word each contains
_PRODUCTS = (("Atlas A3", "910C"), ("Atlas A2", "910B"), ("Atlas 800I A2", "910B"),
             ("200I/500 A2", "310B"), ("Atlas 训练系列产品", "910A"),
             ("Atlas 推理系列产品", "310P"), ("950", "950"), ("910_95", "950"))
_DTYPE_WORD = re.compile(r"(?:B|HI)?FLOAT[0-9A-Z_]*|U?INT\d+|BOOL|DOUBLE|COMPLEX\d+")
_ALIAS = {"FLOAT32": "FLOAT", "FP32": "FLOAT", "FP16": "FLOAT16", "BF16": "BFLOAT16",
          "FLOAT64": "DOUBLE"}
_LINE = re.compile(r"^\s*[-*]\s*((?:<term>[^<]+</term>\s*、?\s*)+)[：:]\s*(.+)$")


def _products(names: str) -> set[str]:
    out: set[str] = set()
    for name in re.findall(r"<term>([^<]+)</term>", names):
        hits = {alias for word, alias in _PRODUCTS if word in name}
        out |= hits - ({"910A", "310P"} if hits & {"910B", "910C", "310B"} else set())
    return out


def _dtypes(text: str) -> set[str]:
    words = {_ALIAS.get(w, w) for w in re.findall(r"[A-Z][A-Z0-9_]+", text)}
    return {w for w in words if _DTYPE_WORD.fullmatch(w)}


def _statements(text: str) -> dict[int, tuple[set[str], str, set[str]]]:
    """line → (products, kind, dtypes) of each one-line statement the simple reading knows."""
    out: dict[int, tuple[set[str], str, set[str]]] = {}
    in_code = in_table = False
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("#") and "约束" in s:
            break  # 约束说明 is read as constraints, not as the parameters' dtype statements
        if s.startswith("```"):
            in_code = not in_code
            continue
        if "<table" in s:
            in_table = True
        if "</table>" in s:
            in_table = False
            continue
        m = _LINE.match(line)
        if in_code or in_table or not m or "当" in m.group(2) or "时" in m.group(2):
            continue
        rest, dtypes = m.group(2), _dtypes(m.group(2))
        if not dtypes or "<" in rest:
            continue
        if "不支持" in rest:
            kind = "not"
        elif "额外支持" in rest:
            kind = "extra"
        elif re.search(r"仅支持|只支持", rest) or re.fullmatch(
                r"[A-Za-z0-9_`、和与\s]*(?:的)?数据类型支持[A-Z0-9_、，,\s]+[。；]?", rest):
            kind = "only"
        else:
            continue
        out[i] = (_products(m.group(1)), kind, dtypes)
    return out


def _pages(upstream: Path) -> list[Path]:
    root = upstream / "github" / "hicann"
    found = [p for lib in ("ops-math", "ops-nn", "ops-cv")
             for p in sorted((root / lib / "v9.1.0").rglob("aclnn*.md"))
             if "/docs/" in p.as_posix() and not p.name.endswith("_en.md")
             and _statements(p.read_text(encoding="utf-8"))]
    return random.Random(2026).sample(found, 30)


def test_per_product_dtype_statements_match_an_independent_reading(upstream: Path) -> None:
    pages = _pages(upstream)
    compared = 0
    mismatches: list[str] = []
    for path in pages:
        text = path.read_text(encoding="utf-8")
        page = parse_page(text, origin=Origin(str(path.relative_to(upstream))))
        rows = {e.line: e for e in page.exceptions}
        for line, (products, kind, dtypes) in _statements(text).items():
            e = rows.get(line)
            got = (set(e.products), e.kind, set(e.dtypes)) if e else None
            compared += 1
            if got != (products, kind, dtypes):
                mismatches.append(f"{path.name}:{line}: read {(products, kind, dtypes)}, "
                                  f"parser {got}")
    assert len(pages) >= 20 and compared >= 40
    assert mismatches == []
