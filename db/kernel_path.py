"""Reads of the kernel-path facts (``kernel_path_rule``, ``kernel_soc_check``).

A catalog built before these tables existed (or from a snapshot without them) has no rows:
every read then returns nothing and the checker says the path is unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import fields

from sqlalchemy import Engine, text

from opcheck.db.data import KernelPathRuleRec, KernelSocCheckRec
from opcheck.db.reads import has_rows

_TABLES = ("kernel_path_rule", "kernel_soc_check")


def has_kernel_path(engine: Engine) -> bool:
    return has_rows(engine, _TABLES)


def rules(engine: Engine) -> dict[str, KernelPathRuleRec]:
    """Every release's rules, by torch_npu version (about a hundred rows)."""
    if not has_kernel_path(engine):
        return {}
    cols = [f.name for f in fields(KernelPathRuleRec)]
    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT {', '.join(cols)} FROM kernel_path_rule")).all()
    return {r[0]: KernelPathRuleRec(**dict(zip(cols, r, strict=True))) for r in rows}


def soc_checks(engine: Engine, ops: Iterable[str]) -> dict[str, list[KernelSocCheckRec]]:
    """The SoC fallbacks of these ops' op_api kernels, over every release."""
    wanted = sorted(set(ops))
    out: dict[str, list[KernelSocCheckRec]] = defaultdict(list)
    if not wanted or not has_kernel_path(engine):
        return out
    cols = [f.name for f in fields(KernelSocCheckRec)]
    select = ", ".join(f'"{c}"' for c in cols)
    with engine.connect() as conn:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            marks = ", ".join(f":o{j}" for j in range(len(chunk)))
            for r in conn.execute(text(
                    f"SELECT {select} FROM kernel_soc_check WHERE op IN ({marks})"),
                    {f"o{j}": op for j, op in enumerate(chunk)}):
                out[r[0]].append(KernelSocCheckRec(**dict(zip(cols, r, strict=True))))
    return out


def soc_checks_all(engine: Engine) -> dict[str, list[KernelSocCheckRec]]:
    """Every op's SoC fallbacks (a few hundred rows: read whole, once per check)."""
    out: dict[str, list[KernelSocCheckRec]] = defaultdict(list)
    if not has_kernel_path(engine):
        return out
    cols = [f.name for f in fields(KernelSocCheckRec)]
    select = ", ".join(f'"{c}"' for c in cols)
    with engine.connect() as conn:
        for r in conn.execute(text(f"SELECT {select} FROM kernel_soc_check")):
            out[r[0]].append(KernelSocCheckRec(**dict(zip(cols, r, strict=True))))
    return out


def source_urls(engine: Engine, ids: Iterable[int | None]) -> dict[int, str]:
    """Source id → its URL (a folder or file upstream)."""
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return {}
    marks = ", ".join(f":s{j}" for j in range(len(wanted)))
    with engine.connect() as conn:
        return {r[0]: r[1] or r[2] for r in conn.execute(text(
            f"SELECT id, url, path FROM source WHERE id IN ({marks})"),
            {f"s{j}": s for j, s in enumerate(wanted)})}
