"""Reads of the message index (``message_template``): the anchors explain keys its matcher on,
and the rows of the templates a log line matched, with their source URL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import Engine, bindparam, text

from opcheck.db.reads import has_rows


@dataclass(frozen=True)
class MessageRow:
    id: int
    template: str
    kind: str  # cann | op_plugin | codegen | torch_npu
    library: str
    macro: str
    level: str
    function: str
    entry: str  # aclnn functions of the file, comma-separated
    condition: str
    lists: str
    code: str
    literal: int
    path: str
    line: int
    versions: str
    newest: str
    base_url: str  # the library at ``newest``

    @property
    def url(self) -> str:
        return f"{self.base_url}{self.path}#L{self.line}" if self.base_url else ""

    @property
    def entries(self) -> list[str]:
        return [e for e in self.entry.split(",") if e]


@lru_cache(maxsize=8)  # per engine: a catalog file never changes under an engine
def has_messages(engine: Engine) -> bool:
    return has_rows(engine, ("message_template",))


def templates(engine: Engine) -> list[tuple[str, str, int]]:
    """Each distinct template once: (template, anchor word, literal characters); many files
    print the same text (a check macro's message), which is matched once."""
    with engine.connect() as conn:
        return [(t, a, int(n)) for t, a, n in conn.execute(text(
            "SELECT template, MIN(anchor), MAX(literal) FROM message_template "
            "WHERE anchor != '' GROUP BY template"))]


def rows(engine: Engine, ids: Sequence[int]) -> list[MessageRow]:
    """The rows of ``ids`` with their library URL, in the order of ``ids``."""
    if not ids:
        return []
    q = text("SELECT m.id, m.template, m.kind, m.library, m.macro, m.level, m.function, m.entry, "
             "m.condition, m.lists, m.code, m.literal, m.path, m.line, m.versions, m.newest, "
             "s.url FROM message_template m LEFT JOIN source s ON s.id = m.source_id "
             "WHERE m.id IN :ids").bindparams(bindparam("ids", expanding=True))
    with engine.connect() as conn:
        got = {int(r[0]): MessageRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8],
                                     r[9], r[10], int(r[11]), r[12], int(r[13]), r[14], r[15],
                                     r[16] or "")
               for r in conn.execute(q, {"ids": list(ids)})}
    return [got[i] for i in ids if i in got]


def same_template(engine: Engine, template: str) -> list[MessageRow]:
    """Every row with this exact template (other files, functions and versions that print it)."""
    with engine.connect() as conn:
        ids = [int(r[0]) for r in conn.execute(
            text("SELECT id FROM message_template WHERE template = :t ORDER BY id"),
            {"t": template})]
    return rows(engine, ids)


@dataclass(frozen=True)
class LaunchRow:
    """An aclnn function launching ``op_type`` on an engine at one CANN version."""

    aclnn: str
    cann: str
    engine: str
    launch: str
    base_url: str


def launches_of(engine: Engine, op_type: str) -> list[LaunchRow]:
    """The engine sites that launch ``op_type`` (every aclnn function and CANN version)."""
    if not has_rows(engine, ("engine_site",)):
        return []
    q = text("SELECT e.aclnn, e.cann, e.engine, e.launch, s.url FROM engine_site e "
             "LEFT JOIN source s ON s.id = e.source_id WHERE e.op_type = :op "
             "ORDER BY e.aclnn, e.cann")
    with engine.connect() as conn:
        return [LaunchRow(a, c, e, la, u or "") for a, c, e, la, u in conn.execute(q, {"op": op_type})]


def ops_reaching(engine: Engine, function: str) -> list[str]:
    """The ATen ops whose kernels call the aclnn ``function`` (op-plugin's links in
    ``op_aclnn``, else the kernel rows' ``aclnn``), sorted."""
    out: set[str] = set()
    with engine.connect() as conn:
        if has_rows(engine, ("op_aclnn",)):
            out |= {str(r[0]) for r in conn.execute(text(
                "SELECT DISTINCT op FROM op_aclnn WHERE aclnn = :f"), {"f": function})}
        out |= {str(r[0]) for r in conn.execute(text(
            "SELECT DISTINCT op FROM npukernel WHERE aclnn = :f"), {"f": function})}
    return sorted(out)


def paths_of(engine: Engine, function: str) -> list[str]:
    """The files whose messages list ``function`` among their aclnn entries (its own files)."""
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(text(
            "SELECT DISTINCT path FROM message_template WHERE ',' || entry || ',' LIKE :pat "
            "ORDER BY path"), {"pat": f"%,{function},%"})]
