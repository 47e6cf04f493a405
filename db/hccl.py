"""Reads for distributed on HCCL: torch_npu's process-group facts per tag (``hccl_fact``).
A catalog built before them reads as "no facts" (collectives then stay unknown)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, text

from opcheck.db.reads import has_rows


@dataclass(frozen=True)
class HcclFact:
    kind: str
    subject: str
    value: str
    message: str
    path: str  # relative to the tag's root
    line: int
    url: str  # the line in the published file
    tag: str


def fact_files(engine: Engine) -> dict[str, set[str]]:
    """The tags whose sources gave HCCL facts → the files (relative paths) read there."""
    if not has_rows(engine, ("hccl_fact",)):
        return {}
    out: dict[str, set[str]] = {}
    with engine.connect() as conn:
        for path, tags in conn.execute(text("SELECT DISTINCT path, tags FROM hccl_fact")):
            for t in str(tags).split(","):
                if t:
                    out.setdefault(t, set()).add(str(path))
    return out


def facts_at(engine: Engine, tag: str, paths: frozenset[str] | None = None) -> list[HcclFact]:
    """Every HCCL fact the sources of ``tag`` state (only those of ``paths`` when given), in
    file then line order."""
    if not tag or not has_rows(engine, ("hccl_fact",)):
        return []
    out = []
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT kind, subject, value, message, path, tags, lines FROM hccl_fact "
            "WHERE instr(',' || tags || ',', ',' || :tag || ',') > 0"), {"tag": tag})
        for kind, subject, value, message, path, tags, lines in rows:
            if paths is not None and path not in paths:
                continue
            # a fact stated alike twice in one file lists the tag once per line
            for t, n in zip(str(tags).split(","), str(lines).split(","), strict=True):
                if t != tag:
                    continue
                url = f"https://github.com/Ascend/pytorch/blob/{tag}/{path}#L{n}"
                out.append(HcclFact(kind, subject, value, message, path, int(n), url, tag))
    return sorted(out, key=lambda f: (f.path, f.line, f.kind))
