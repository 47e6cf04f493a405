"""Reads of ``op_acl_type``: the CANN op types each ATen overload's acl_op kernel runs, per
release (filled by :mod:`opcheck.sync.aclops`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import Engine, bindparam, text

from opcheck.db.reads import has_rows


@dataclass(frozen=True)
class AclTypeRow:
    op: str
    op_type: str
    engine: str  # aicpu when the command excludes the AI Core, else ""
    condition: str
    via: str
    match: str
    releases: tuple[str, ...]
    path: str  # under op_plugin/ at the newest release's pin
    line: int
    url: str  # the pin's op_plugin/ folder; + path#Lline

    @property
    def link(self) -> str:
        return f"{self.url}{self.path}#L{self.line}" if self.url else ""

    @property
    def direct(self) -> bool:
        """The kernel runs it itself or through its own helpers or acl_op kernels it calls,
        not through an ATen call the dispatcher routes."""
        return "aten:" not in self.via


@lru_cache(maxsize=8)  # per engine: a catalog file never changes under an engine
def has_acl_types(engine: Engine) -> bool:
    return has_rows(engine, ("op_acl_type",))


_COLUMNS = ("SELECT a.op, a.op_type, a.engine, a.condition, a.via, a.match, a.releases, "
            "a.path, a.line, s.url FROM op_acl_type a LEFT JOIN source s ON s.id = a.source_id ")


def _row(r: Sequence[object]) -> AclTypeRow:
    return AclTypeRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]),
                      tuple(x for x in str(r[6]).split(",") if x), str(r[7]), int(str(r[8])),
                      str(r[9] or ""))


def _in_release(rows: list[AclTypeRow], release: str | None) -> list[AclTypeRow]:
    return [r for r in rows if release is None or release in r.releases]


def types_of_ops(engine: Engine, ops: Sequence[str], release: str | None = None
                 ) -> dict[str, list[AclTypeRow]]:
    """op → the op types its acl_op kernel runs (in ``release``, or in any)."""
    if not ops or not has_acl_types(engine):
        return {}
    q = text(_COLUMNS + "WHERE a.op IN :ops ORDER BY a.op, a.id").bindparams(
        bindparam("ops", expanding=True))
    out: dict[str, list[AclTypeRow]] = defaultdict(list)
    with engine.connect() as conn:
        for r in conn.execute(q, {"ops": list(ops)}):
            out[str(r[0])].append(_row(r))
    return {op: kept for op, rows in out.items() if (kept := _in_release(rows, release))}


def ops_running(engine: Engine, op_type: str, release: str | None = None) -> list[AclTypeRow]:
    """The rows of every op whose acl_op kernel runs ``op_type`` (in ``release``, or in any),
    matched without case (logs spell the op type as CANN does)."""
    if not has_acl_types(engine):
        return []
    q = text(_COLUMNS + "WHERE lower(a.op_type) = lower(:t) ORDER BY a.op, a.id")
    with engine.connect() as conn:
        rows = [_row(r) for r in conn.execute(q, {"t": op_type})]
    return _in_release(rows, release)
