"""Reads of the engine tables: the launches each aclnn function reaches per CANN version
(``engine_site``) and the kernel binaries each op type has per SoC (``op_binary``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import Engine, bindparam, text

from opcheck.db.reads import has_rows


@dataclass(frozen=True)
class SiteRow:
    aclnn: str
    cann: str
    library: str
    op_type: str
    engine: str
    condition: str  # JSON (opcheck.scrapers.cann_engine)
    launch: str
    entry: str
    base_url: str  # the library at that version; + path#Lline


@dataclass(frozen=True)
class BinaryRow:
    op_type: str
    cann: str
    library: str
    soc: str
    binaries: int
    dtypes: tuple[str, ...]
    configured: bool
    path: str
    base_url: str


@lru_cache(maxsize=8)  # per engine: a catalog file never changes under an engine
def has_engine_facts(engine: Engine) -> bool:
    return has_rows(engine, ("engine_site", "op_binary"))


def site_rows(engine: Engine, functions: Sequence[str]) -> dict[str, list[SiteRow]]:
    """aclnn function → its launch rows at every CANN version."""
    if not functions:
        return {}
    out: dict[str, list[SiteRow]] = defaultdict(list)
    q = text("SELECT e.aclnn, e.cann, e.library, e.op_type, e.engine, e.condition, e.launch, "
             "e.entry, s.url FROM engine_site e LEFT JOIN source s ON s.id = e.source_id "
             "WHERE e.aclnn IN :fns ORDER BY e.aclnn, e.cann, e.id").bindparams(
        bindparam("fns", expanding=True))
    with engine.connect() as conn:
        for fn, cann, lib, op, eng, cond, launch, entry, url in conn.execute(
                q, {"fns": list(functions)}):
            out[fn].append(SiteRow(fn, cann, lib, op, eng, cond, launch, entry, url or ""))
    return dict(out)


def binary_rows(engine: Engine, op_types: Sequence[str]) -> dict[str, list[BinaryRow]]:
    """op type → its rows (every CANN version and SoC)."""
    if not op_types:
        return {}
    out: dict[str, list[BinaryRow]] = defaultdict(list)
    q = text("SELECT b.op_type, b.cann, b.library, b.soc, b.binaries, b.dtypes, b.configured, "
             "b.path, s.url FROM op_binary b LEFT JOIN source s ON s.id = b.source_id "
             "WHERE b.op_type IN :ops ORDER BY b.op_type, b.cann, b.soc").bindparams(
        bindparam("ops", expanding=True))
    with engine.connect() as conn:
        for op, cann, lib, soc, n, dts, conf, path, url in conn.execute(
                q, {"ops": list(op_types)}):
            out[op].append(BinaryRow(op, cann, lib, soc, int(n),
                                     tuple(x for x in dts.split(",") if x), bool(conf), path,
                                     url or ""))
    return dict(out)


def launches_of_types(engine: Engine, op_types: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """op type → (engine, library/launch file:line) of every level-0 launch of it (any CANN
    version, any aclnn function), distinct."""
    if not op_types:
        return {}
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    q = text("SELECT DISTINCT op_type, engine, library, launch FROM engine_site "
             "WHERE op_type IN :ops ORDER BY op_type, engine, library, launch").bindparams(
        bindparam("ops", expanding=True))
    with engine.connect() as conn:
        for op, eng, lib, launch in conn.execute(q, {"ops": list(op_types)}):
            out[op].append((eng, f"{lib}/{launch}"))
    return dict(out)
