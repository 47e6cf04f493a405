"""Reads of the CANN contract tables: which aclnn functions an op's kernel calls in a release,
and what each CANN version's docs say of a function (products, per-parameter dtypes,
per-product exceptions, constraints), each fact with the page URL and line it comes from.

Rows group the versions that state a fact identically (``canns`` and ``lines`` are parallel
lists); these functions expand them per version, so callers never parse those columns.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from sqlalchemy import Engine, bindparam, text

from opcheck.core.versions import CANN_HEAD
from opcheck.db.reads import has_rows

HEAD = CANN_HEAD  # a library documented at a commit, not a release tag


# torch dtype names (as traced) → the tokens CANN's docs use
_CANN_DTYPES = {
    "float32": "FLOAT", "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float64": "DOUBLE",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8",
    "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "bool": "BOOL",
    "complex32": "COMPLEX32", "complex64": "COMPLEX64", "complex128": "COMPLEX128",
    "float8_e4m3fn": "FLOAT8_E4M3FN", "float8_e5m2": "FLOAT8_E5M2",
}  # fmt: skip


def cann_dtype(traced: str) -> str:
    return _CANN_DTYPES.get(traced.removeprefix("torch."), "")


def _split(value: str) -> tuple[str, ...]:
    return tuple(x for x in value.split(",") if x)


@dataclass(frozen=True)
class OpLink:
    op: str
    aclnn: str
    kind: str  # exec | compat | probe
    fallback: str
    via: str
    url: str  # the kernel source line at the newest release's pin


@dataclass(frozen=True)
class ParamFact:
    param: str
    direction: str
    dtypes: frozenset[str]
    formats: tuple[str, ...]
    ranks: str
    non_contiguous: bool | None
    line: int

    @property
    def is_output(self) -> bool:
        return "输出" in self.direction or self.direction.lower().startswith("out")


@dataclass(frozen=True)
class ExceptionFact:
    products: tuple[str, ...]
    kind: str  # not | only | supports | extra (额外支持: added for those products) | note
    dtypes: frozenset[str]
    params: tuple[str, ...]
    conditional: bool
    line: int
    text: str = ""


@dataclass(frozen=True)
class ConstraintFact:
    kind: str
    subject: str
    value: str
    products: tuple[str, ...]
    line: int
    text: str = ""


@dataclass
class FunctionDoc:
    """One aclnn function as one CANN version documents it."""

    function: str
    cann: str
    library: str
    path: str
    page_url: str  # without a line anchor
    line: int
    supported: tuple[str, ...]
    unsupported: tuple[str, ...]
    products_line: int
    params: list[ParamFact] = field(default_factory=list)
    exceptions: list[ExceptionFact] = field(default_factory=list)
    constraints: list[ConstraintFact] = field(default_factory=list)

    def url(self, line: int) -> str:
        return f"{self.page_url}#L{line}" if self.page_url and line else self.page_url


@lru_cache(maxsize=8)  # per engine: a catalog file never changes under an engine
def has_contract(engine: Engine) -> bool:
    """Whether the catalog holds the aclnn tables with rows (older catalogs do not)."""
    return has_rows(engine, ("aclnn_function", "op_aclnn"))


def documented_canns(engine: Engine) -> list[str]:
    """The CANN versions whose operator docs the catalog read (``head`` excluded)."""
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(text(
            "SELECT DISTINCT cann FROM aclnn_function WHERE cann != :h"), {"h": HEAD})]


def linked_releases(engine: Engine) -> set[str]:
    """Releases whose pinned op-plugin sources were read (their op → aclnn links are exact)."""
    out: set[str] = set()
    with engine.connect() as conn:
        for (rels,) in conn.execute(text("SELECT DISTINCT releases FROM op_aclnn")):
            out.update(_split(rels))
    return out


def op_link_rows(engine: Engine, ops: Sequence[str]) -> dict[str, list[tuple[OpLink, frozenset[str]]]]:
    """Every aclnn link of each op with the releases it holds in (only ops with links)."""
    if not ops:
        return {}
    out: dict[str, list[tuple[OpLink, frozenset[str]]]] = defaultdict(list)
    q = text("SELECT o.op, o.aclnn, o.kind, o.fallback, o.via, o.releases, o.path, o.line, "
             "s.url FROM op_aclnn o LEFT JOIN source s ON s.id = o.source_id "
             "WHERE o.op IN :ops ORDER BY o.op, o.aclnn, o.kind").bindparams(
        bindparam("ops", expanding=True))
    with engine.connect() as conn:
        for op, aclnn, kind, fallback, via, rels, path, line, base in conn.execute(
                q, {"ops": list(ops)}):
            url = f"{base}/{path}#L{line}" if base else ""
            out[op].append((OpLink(op, aclnn, kind, fallback, via, url),
                            frozenset(_split(rels))))
    return dict(out)


def links_in(rows: dict[str, list[tuple[OpLink, frozenset[str]]]],
             release: str) -> dict[str, list[OpLink]]:
    """:func:`op_link_rows` narrowed to one release."""
    out = {op: [link for link, rels in found if release in rels] for op, found in rows.items()}
    return {op: links for op, links in out.items() if links}


def op_functions(engine: Engine, op: str) -> dict[str, list[str]]:
    """aclnn function → the releases whose kernel for ``op`` calls it (every kind)."""
    out: dict[str, set[str]] = defaultdict(set)
    with engine.connect() as conn:
        for aclnn, rels in conn.execute(text(
                "SELECT aclnn, releases FROM op_aclnn WHERE op = :op"), {"op": op}):
            out[aclnn].update(_split(rels))
    return {k: sorted(v) for k, v in sorted(out.items())}


def function_ops(engine: Engine, function: str) -> dict[str, list[str]]:
    """ATen op → the releases whose kernel for it calls ``function`` (every kind): the
    reverse of :func:`op_functions`, for the aclnn function's page."""
    out: dict[str, set[str]] = defaultdict(set)
    with engine.connect() as conn:
        for op, rels in conn.execute(text(
                "SELECT op, releases FROM op_aclnn WHERE aclnn = :f"), {"f": function}):
            out[op].update(_split(rels))
    return {k: sorted(v) for k, v in sorted(out.items())}


def known_function(engine: Engine, function: str) -> str:
    """``function`` as the catalog spells it (aclnnabs → aclnnAbs), or "" when no table names
    it."""
    with engine.connect() as conn:
        for q in ("SELECT function FROM aclnn_function WHERE lower(function) = lower(:f) LIMIT 1",
                  "SELECT aclnn FROM op_aclnn WHERE lower(aclnn) = lower(:f) LIMIT 1"):
            row = conn.execute(text(q), {"f": function}).first()
            if row is not None:
                return str(row[0])
    return ""


def _expand(canns: str, lines: str) -> Iterable[tuple[str, int]]:
    for version, line in zip(_split(canns), _split(lines), strict=False):
        yield version, int(line)


def function_docs(engine: Engine, function: str) -> dict[str, FunctionDoc]:
    """CANN version → what that version's docs say of ``function`` (none: undocumented)."""
    docs: dict[str, FunctionDoc] = {}
    with engine.connect() as conn:
        for fn, cann, lib, path, line, sup, unsup, pline, base in conn.execute(text(
                "SELECT f.function, f.cann, f.library, f.path, f.line, f.supported, "
                "f.unsupported, f.products_line, s.url FROM aclnn_function f "
                "LEFT JOIN source s ON s.id = f.source_id WHERE f.function = :f"),
                {"f": function}):
            docs[cann] = FunctionDoc(fn, cann, lib, path, f"{base}{path}" if base else "",
                                     line, _split(sup), _split(unsup), pline)
        if not docs:
            return {}
        for param, direction, dtypes, formats, ranks, nc, canns, lines in conn.execute(text(
                "SELECT param, direction, dtypes, formats, ranks, non_contiguous, canns, lines "
                "FROM aclnn_param WHERE function = :f ORDER BY id"), {"f": function}):
            for version, line in _expand(canns, lines):
                if version in docs:
                    docs[version].params.append(ParamFact(
                        param, direction, frozenset(_split(dtypes)), _split(formats), ranks,
                        None if nc is None else bool(nc), line))
        for products, kind, dtypes, names, cond, canns, lines, prose in conn.execute(text(
                "SELECT products, kind, dtypes, params, conditional, canns, lines, text "
                "FROM aclnn_exception WHERE function = :f ORDER BY id"), {"f": function}):
            for version, line in _expand(canns, lines):
                if version in docs:
                    docs[version].exceptions.append(ExceptionFact(
                        _split(products), kind, frozenset(_split(dtypes)), _split(names),
                        bool(cond), line, prose or ""))
        pages = {(d.library, d.path) for d in docs.values()}
        for lib, path in pages:
            for kind, subject, value, products, canns, lines, prose in conn.execute(text(
                    "SELECT kind, subject, value, products, canns, lines, text "
                    "FROM aclnn_constraint WHERE library = :l AND path = :p ORDER BY id"),
                    {"l": lib, "p": path}):
                for version, line in _expand(canns, lines):
                    doc = docs.get(version)
                    if doc is not None and (doc.library, doc.path) == (lib, path):
                        doc.constraints.append(ConstraintFact(
                            kind, subject, value, _split(products), line, prose or ""))
    for doc in docs.values():
        doc.constraints.sort(key=lambda c: c.line)
    return docs


def return_codes(engine: Engine, function: str) -> list[tuple[str, str, str, str]]:
    """(code, name, triggers, params) of ``function``'s return-code rows, then the shared
    table's (function "")."""
    with engine.connect() as conn:
        return [(r[0], r[1], r[2], r[3]) for r in conn.execute(text(
            "SELECT code, name, triggers, params FROM aclnn_code WHERE function IN (:f, '') "
            "ORDER BY function = '', line"), {"f": function})]
