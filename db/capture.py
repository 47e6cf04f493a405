"""Reads for ACL graph capture: torch_npu's capture rules per tag (``capture_rule``) and the
PyTorch tags of ops (``operator.tags``: ``dynamic_output_shape``, ``data_dependent_output``,
``nondeterministic_seeded``). A catalog built before the capture rules reads as "no rules"."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Engine, text

from opcheck.db.reads import has_rows

_CHUNK = 500


@dataclass(frozen=True)
class CaptureRule:
    kind: str
    subject: str
    message: str
    path: str  # relative to the tag's root
    line: int
    url: str  # the line in the published file


def rule_tags(engine: Engine) -> dict[str, bool]:
    """The tags whose sources gave capture rules → whether NPUGraph is absent there."""
    if not has_rows(engine, ("capture_rule",)):
        return {}
    out: dict[str, bool] = {}
    with engine.connect() as conn:
        for kind, tags in conn.execute(text("SELECT kind, tags FROM capture_rule")):
            for t in str(tags).split(","):
                if t:
                    out[t] = out.get(t, False) or kind == "absent"
    return out


def rules_at(engine: Engine, tag: str) -> list[CaptureRule]:
    """Every capture rule the sources of ``tag`` state, by kind then line."""
    if not tag or not has_rows(engine, ("capture_rule",)):
        return []
    out = []
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT kind, subject, message, path, tags, lines FROM capture_rule "
            "WHERE instr(',' || tags || ',', ',' || :tag || ',') > 0"), {"tag": tag})
        for kind, subject, message, path, tags, lines in rows:
            at = str(tags).split(",").index(tag)
            line = int(str(lines).split(",")[at])
            url = f"https://github.com/Ascend/pytorch/blob/{tag}/{path}#L{line}"
            out.append(CaptureRule(kind, subject, message, path, line, url))
    return sorted(out, key=lambda r: (r.kind, r.path, r.line))


def op_tags(engine: Engine, ops: Iterable[str]) -> dict[str, set[str]]:
    """PyTorch's tags of each op the catalog knows (ops without tags are absent)."""
    wanted = sorted(set(ops))
    out: dict[str, set[str]] = {}
    with engine.connect() as conn:
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start:start + _CHUNK]
            marks = ",".join(f":o{i}" for i in range(len(chunk)))
            rows = conn.execute(text(
                f"SELECT op, tags FROM operator WHERE op IN ({marks}) AND tags != ''"),
                {f"o{i}": op for i, op in enumerate(chunk)})
            for op, tags in rows:
                out[op] = {t for t in str(tags).split(",") if t}
    return out
