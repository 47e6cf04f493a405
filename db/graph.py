"""Reads of the graph-mode tables (``graph_pin``, ``graph_converter``): which torchair commit a
release pins and how that commit converts a set of ops. SQL on an injected engine; a catalog
built before graph mode has no such tables and reads as "unknown" everywhere."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from opcheck.db.reads import has_rows

_CHUNK = 500  # bound parameters per IN list


@dataclass(frozen=True)
class GraphPin:
    torch_npu: str
    tag: str
    torchair: str  # the pinned commit ("" = no pin known)
    state: str  # read | not_mirrored | failed | no_pin
    source_id: int | None  # the commit's converter folder (read pins only)
    url: str = ""  # where that folder is published

    @property
    def known(self) -> bool:
        return self.state == "read" and self.source_id is not None


@dataclass(frozen=True)
class ConverterInfo:
    op: str
    status: str  # converted | raises | conditional
    message: str
    condition: str
    dtypes: str
    min_torch: str
    path: str
    line: int
    url: str  # the line in the published file
    rebound: tuple[str, ...] = ()  # arguments reassigned before the raise: not the call's


def has_graph_tables(engine: Engine) -> bool:
    with engine.connect() as conn:
        found = int(conn.execute(text(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('graph_pin', 'graph_converter')")).scalar_one())
    return found == 2


def graph_pins(engine: Engine) -> dict[str, GraphPin]:
    """Every release's pin, by torch_npu version (empty for a catalog without graph data)."""
    if not has_graph_tables(engine):
        return {}
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT p.torch_npu, p.tag, p.torchair, p.state, p.converters_source_id, "
            "coalesce(s.url, '') FROM graph_pin p "
            "LEFT JOIN source s ON s.id = p.converters_source_id"))
        return {r[0]: GraphPin(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows}


def _info(row: tuple[Any, ...], url: str) -> ConverterInfo:
    op, status, message, condition, dtypes, min_torch, path, line, rebound = row
    return ConverterInfo(op, status, message, condition, dtypes, min_torch, path, int(line), url,
                         tuple(x for x in str(rebound or "").split(",") if x))


def _blob(folder_url: str, path: str, line: int) -> str:
    if not folder_url:
        return ""
    return f"{folder_url.replace('/tree/', '/blob/', 1)}/{path}#L{line}"


def converters(engine: Engine, pin: GraphPin, ops: Iterable[str]) -> dict[str, ConverterInfo]:
    """The converters ``pin``'s commit registers for ``ops`` (ops without one are absent)."""
    wanted = sorted(set(ops))
    out: dict[str, ConverterInfo] = {}
    if not pin.known or not wanted:
        return out
    with engine.connect() as conn:
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start:start + _CHUNK]
            marks = ",".join(f":o{i}" for i in range(len(chunk)))
            rows = conn.execute(text(
                "SELECT op, status, message, condition, dtypes, min_torch, path, line, rebound "
                f"FROM graph_converter WHERE source_id = :sid AND op IN ({marks})"),
                {"sid": pin.source_id, **{f"o{i}": op for i, op in enumerate(chunk)}})
            for r in rows:
                out[r[0]] = _info(tuple(r), _blob(pin.url, r[6], r[7]))
    return out


def op_converters(engine: Engine, op: str) -> dict[int, ConverterInfo]:
    """One op's converter at every commit that registers it, by the commit's source id."""
    if not has_graph_tables(engine):
        return {}
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT c.source_id, c.op, c.status, c.message, c.condition, c.dtypes, "
            "c.min_torch, c.path, c.line, c.rebound, coalesce(s.url, '') FROM graph_converter c "
            "LEFT JOIN source s ON s.id = c.source_id WHERE c.op = :op"), {"op": op})
        return {r[0]: _info(tuple(r[1:10]), _blob(r[10], r[7], r[8])) for r in rows}


@dataclass(frozen=True)
class InductorEntry:
    kind: str  # backend | generate | generate_prefix | fallback
    name: str
    path: str
    line: int
    url: str


def inductor_tags(engine: Engine) -> set[str]:
    """The tags whose torch_npu inductor lists are in the catalog."""
    if not has_rows(engine, ("inductor_rule",)):
        return set()
    with engine.connect() as conn:
        return {t for (tags,) in conn.execute(text("SELECT tags FROM inductor_rule"))
                for t in str(tags).split(",") if t}


def inductor_at(engine: Engine, tag: str) -> list[InductorEntry]:
    """torch_npu's inductor backend entries at ``tag``."""
    if not tag or not has_rows(engine, ("inductor_rule",)):
        return []
    out = []
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT kind, name, path, tags, lines FROM inductor_rule "
            "WHERE instr(',' || tags || ',', ',' || :tag || ',') > 0"), {"tag": tag})
        for kind, name, path, tags, lines in rows:
            line = int(str(lines).split(",")[str(tags).split(",").index(tag)])
            out.append(InductorEntry(kind, name, path, line,
                                     f"https://github.com/Ascend/pytorch/blob/{tag}/{path}#L{line}"))
    return out
