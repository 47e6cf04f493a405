"""Reads of the kernel-path facts (``kernel_path_rule``, ``kernel_soc_check``).

A catalog built before these tables existed (or from a snapshot without them) has no rows:
every read then returns nothing and the checker says the path is unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy import Engine, text

from opcheck.db.reads import has_rows

_TABLES = ("kernel_path_rule", "kernel_soc_check")


# The rows as a check reads them: named tuples of the tables' columns (the records of
# ``opcheck.db.data`` would import the table classes, a quarter of a second per check);
# tests/db/test_schema.py holds their fields to the tables' columns, in order.
class PathRuleRow(NamedTuple):
    """A ``kernel_path_rule`` row (``opcheck.db.tables.KernelPathRule``)."""

    torch_npu: str
    tag: str
    jit_kind: str
    jit_condition: str
    jit_default: str
    jit_line: int
    acl_default: str
    precision_condition: str
    precision_true: str
    precision_false: str
    precision_line: int
    aclnn_only: str
    aclnn_only_line: int
    socs: str
    codegen_path: str
    codegen_base_format: bool
    codegen_force_aclnn: bool
    codegen_aclnn_only_raises: bool
    codegen_internal_format_opapi: bool
    codegen_line: int
    source_id: int | None
    codegen_source_id: int | None


class SocCheckRow(NamedTuple):
    """A ``kernel_soc_check`` row (``opcheck.db.tables.KernelSocCheck``, without its id)."""

    op: str
    kernel: str
    when: str
    fallback: str
    releases: str
    path: str
    line: int
    source_id: int | None


def has_kernel_path(engine: Engine) -> bool:
    return has_rows(engine, _TABLES)


def rules(engine: Engine) -> dict[str, PathRuleRow]:
    """Every release's rules, by torch_npu version (about a hundred rows)."""
    if not has_kernel_path(engine):
        return {}
    with engine.connect() as conn:
        rows = conn.execute(text(
            f"SELECT {', '.join(PathRuleRow._fields)} FROM kernel_path_rule")).all()
    return {r[0]: PathRuleRow(*r) for r in rows}


def soc_checks(engine: Engine, ops: Iterable[str]) -> dict[str, list[SocCheckRow]]:
    """The SoC fallbacks of these ops' op_api kernels, over every release."""
    wanted = sorted(set(ops))
    out: dict[str, list[SocCheckRow]] = defaultdict(list)
    if not wanted or not has_kernel_path(engine):
        return out
    select = ", ".join(f'"{c}"' for c in SocCheckRow._fields)
    with engine.connect() as conn:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            marks = ", ".join(f":o{j}" for j in range(len(chunk)))
            for r in conn.execute(text(
                    f"SELECT {select} FROM kernel_soc_check WHERE op IN ({marks})"),
                    {f"o{j}": op for j, op in enumerate(chunk)}):
                out[r[0]].append(SocCheckRow(*r))
    return out


def soc_checks_all(engine: Engine) -> dict[str, list[SocCheckRow]]:
    """Every op's SoC fallbacks (a few hundred rows: read whole, once per check)."""
    out: dict[str, list[SocCheckRow]] = defaultdict(list)
    if not has_kernel_path(engine):
        return out
    select = ", ".join(f'"{c}"' for c in SocCheckRow._fields)
    with engine.connect() as conn:
        for r in conn.execute(text(f"SELECT {select} FROM kernel_soc_check")):
            out[r[0]].append(SocCheckRow(*r))
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
