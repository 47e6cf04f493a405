"""Reads the checker, contributions and web pages make beside :class:`~opcheck.db.catalog.Catalog`.

Every statement that reads the catalog lives in ``opcheck.db`` (``tests/core/test_sql_in_db.py``
fails on SQL anywhere else). A read that returns rows of one table returns that table's model
(``opcheck.db.tables``) where the process can afford it: the table classes cost a quarter of a
second to set up (SQLModel, the ORM), so the reads a command makes on its way (a check's API
docs, an op's deprecations) return named tuples of the same columns, and the server's whole-row
reads (sources, workarounds, read once at start-up) return the models. Tables a catalog of an
older schema lacks read as empty where the callers always tolerated it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Engine, bindparam, text
from sqlalchemy.exc import OperationalError

if TYPE_CHECKING:
    from sqlmodel import Session

    from opcheck.db.tables import Source, Workaround


def _session(engine: Engine) -> Session:
    from sqlmodel import Session

    # Read models only: nothing is written back, and expiring them on commit would reload.
    return Session(engine, expire_on_commit=False, autoflush=False)


def api_products(engine: Engine) -> list[str]:
    """The hardware products torch_npu's API docs name, sorted (the product list)."""
    with engine.connect() as conn:
        return [str(r[0]) for r in conn.execute(text(
            "SELECT DISTINCT hardware FROM api_support WHERE hardware != '' ORDER BY hardware"))]


def has_rows(engine: Engine, tables: tuple[str, ...]) -> bool:
    """Whether every table of a group a newer opcheck added exists and the first holds rows
    (older catalogs lack the group, or have it empty)."""
    with engine.connect() as conn:
        names = {r[0] for r in conn.execute(text(
            "SELECT name FROM sqlite_master WHERE type = 'table'"))}
        if not set(tables) <= names:
            return False
        first = conn.execute(text(f"SELECT 1 FROM {tables[0]} LIMIT 1")).first()
        return first is not None


def has_api_docs(engine: Engine) -> bool:
    """Both per-API tables exist (catalogs written before them lack both: added together)."""
    with engine.connect() as conn:
        found = conn.execute(text(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('api_support', 'api_op')")).scalar_one()
    return int(found) == 2


def api_support_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT COUNT(*) FROM api_support")).scalar_one())


def api_op_links(engine: Engine) -> list[tuple[str, str]]:
    """(api, op): which Python API calls which op, ordered by op (none in an old catalog)."""
    try:
        with engine.connect() as conn:
            return [(str(api), str(op)) for api, op in conn.execute(
                text("SELECT api, op FROM api_op ORDER BY op"))]
    except OperationalError:  # a catalog written before the per-API tables
        return []


def source_urls(engine: Engine) -> dict[int, str]:
    with engine.connect() as conn:
        return {int(sid): str(url) for sid, url in conn.execute(text("SELECT id, url FROM source"))}


class ApiSupportRow(NamedTuple):
    """``api_support`` columns a check reads (``opcheck.db.tables.ApiSupport``)."""

    doc_version: str
    hardware: str
    supported: bool | None
    only_dtypes: str
    unsupported_dtypes: str
    restriction: str
    source_id: int | None
    line: int


def api_support_rows(engine: Engine, api: str) -> list[ApiSupportRow]:
    """What the docs say of ``api`` for the API as a whole (no feature rows)."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT doc_version, hardware, supported, only_dtypes, unsupported_dtypes, "
            "restriction, source_id, line FROM api_support WHERE api = :a AND feature = ''"),
            {"a": api}).all()
    return [ApiSupportRow(r[0], r[1], None if r[2] is None else bool(r[2]), r[3], r[4], r[5],
                          r[6], r[7]) for r in rows]


class ApiDocRow(NamedTuple):
    """An API doc row of one op's APIs, with its page URL."""

    api: str
    doc_version: str
    hardware: str
    supported: bool | None
    only_dtypes: str
    unsupported_dtypes: str
    arg_limits: str
    restriction: str
    url: str


def op_api_docs(engine: Engine, op: str) -> list[ApiDocRow]:
    """The doc rows of every API that calls ``op`` (no feature rows), by API."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT a.api, a.doc_version, a.hardware, a.supported, a.only_dtypes, "
            "a.unsupported_dtypes, a.arg_limits, a.restriction, s.url "
            "FROM api_op o JOIN api_support a ON a.api = o.api "
            "LEFT JOIN source s ON s.id = a.source_id "
            "WHERE o.op = :op AND a.feature = '' ORDER BY a.api"), {"op": op}).all()
    return [ApiDocRow(r[0], r[1], r[2], None if r[3] is None else bool(r[3]), r[4], r[5], r[6],
                      r[7], r[8] or "") for r in rows]


class DeprecationRow(NamedTuple):
    op: str
    replacement: str  # "" when none is named


def deprecations(engine: Engine) -> list[DeprecationRow]:
    with engine.connect() as conn:
        return [DeprecationRow(str(op), str(repl)) for op, repl in conn.execute(
            text("SELECT op, replacement FROM deprecation ORDER BY id"))]


def aclnn_op_links(engine: Engine) -> list[tuple[str, str]]:
    """(aclnn field, op): the kernel rows naming aclnn functions, then op-plugin's calls
    (``op_aclnn``: catalogs of schema 2 on). The field may list several functions."""
    out: list[tuple[str, str]] = []
    queries = ["SELECT DISTINCT aclnn, op FROM npukernel WHERE aclnn != ''",
               "SELECT DISTINCT aclnn, op FROM op_aclnn"]
    with engine.connect() as conn:
        for sql in queries:
            try:
                rows = conn.execute(text(sql)).all()
            except OperationalError:
                continue
            out.extend((str(fn), str(op)) for fn, op in rows)
    return out


class AclnnCodeRow(NamedTuple):
    function: str  # "" for the shared table
    code: str
    name: str
    triggers: str
    params: str
    line: int
    url: str


def aclnn_code_rows(engine: Engine, function: str, code: str, family: str) -> list[AclnnCodeRow]:
    """The rows for ``code`` (or its ``family``) of ``function`` and of the shared table:
    the function's own first, the exact code before its family, newest source first."""
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT a.function, a.code, a.name, a.triggers, a.params, a.line, s.url "
                "FROM aclnn_code a LEFT JOIN source s ON s.id = a.source_id "
                "WHERE a.function IN (:f, '') AND a.code IN (:c, :fam) "
                "ORDER BY a.function DESC, a.code = :fam, a.source_id DESC"),
                {"f": function, "c": code, "fam": family}).all()
    except OperationalError:
        return []  # a catalog built before the table existed
    return [AclnnCodeRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), int(r[5]),
                         str(r[6] or "")) for r in rows]


class WorkaroundOpRow(NamedTuple):
    op: str
    id: str
    title: str
    kind: str
    path: str
    releases: str  # JSON list of release ranges
    hardware: str  # slugs, comma-separated ("all": every product)
    fix: str = ""  # Markdown


def workaround_ops(engine: Engine) -> list[WorkaroundOpRow]:
    """Each op a workaround names, with the workaround's facts, by workaround id."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT o.op, w.id, w.title, w.kind, w.path, w.releases, w.hardware, w.fix "
            "FROM workaround_op o "
            "JOIN workaround w ON w.id = o.workaround_id ORDER BY w.id"))
        return [WorkaroundOpRow(*(str(v) if v is not None else "" for v in r)) for r in rows]


def sources(engine: Engine) -> list[Source]:
    from sqlmodel import col, select

    from opcheck.db.tables import Source

    with _session(engine) as s:
        return list(s.exec(select(Source).order_by(col(Source.id))).all())


def workarounds(engine: Engine) -> list[Workaround]:
    from sqlmodel import col, select

    from opcheck.db.tables import Workaround

    with _session(engine) as s:
        return list(s.exec(select(Workaround).order_by(col(Workaround.id))).all())


def operator_source_id(engine: Engine, op: str) -> int | None:
    with engine.connect() as conn:
        row = conn.execute(text("SELECT source_id FROM operator WHERE op = :op"),
                           {"op": op}).first()
    return None if row is None or row[0] is None else int(row[0])


def kernel_source_ids(engine: Engine, op: str) -> dict[str, int | None]:
    """Release → the source of ``op``'s kernel row there."""
    with engine.connect() as conn:
        return {str(rel): sid for rel, sid in conn.execute(
            text("SELECT release, source_id FROM npukernel WHERE op = :op"), {"op": op})}


def ops_tagged(engine: Engine, tags: tuple[str, ...]) -> dict[str, tuple[tuple[str, ...], str]]:
    """Op → (its tags, the source URL of its schema) for the ops PyTorch's
    native_functions.yaml tags with any of ``tags`` (a few dozen rows)."""
    if not tags:
        return {}
    where = " OR ".join(f"(',' || o.tags || ',') LIKE :t{i}" for i in range(len(tags)))
    params = {f"t{i}": f"%,{t},%" for i, t in enumerate(tags)}
    with engine.connect() as conn:
        return {str(op): (tuple(x for x in str(tg).split(",") if x), str(url or ""))
                for op, tg, url in conn.execute(text(
                    "SELECT o.op, o.tags, s.url FROM operator o LEFT JOIN source s "
                    f"ON s.id = o.source_id WHERE {where}"), params)}


class ProductPageRow(NamedTuple):
    function: str
    cann: str
    library: str
    path: str
    line: int
    supported: tuple[str, ...]
    unsupported: tuple[str, ...]
    products_line: int
    base_url: str


def aclnn_product_pages(engine: Engine, functions: list[str]) -> list[ProductPageRow]:
    """The docs pages of ``functions``, one row per function and CANN version, with only the
    product lists (the fused-op tips need no more), in one query."""
    if not functions:
        return []
    q = text("SELECT f.function, f.cann, f.library, f.path, f.line, f.supported, "
             "f.unsupported, f.products_line, s.url FROM aclnn_function f LEFT JOIN source s "
             "ON s.id = f.source_id WHERE f.function IN :fns").bindparams(
        bindparam("fns", expanding=True))
    with engine.connect() as conn:
        return [ProductPageRow(fn, cann, lib, path, int(line),
                               tuple(x for x in sup.split(",") if x),
                               tuple(x for x in unsup.split(",") if x), int(pline), base or "")
                for fn, cann, lib, path, line, sup, unsup, pline, base in conn.execute(
                    q, {"fns": list(functions)})]
