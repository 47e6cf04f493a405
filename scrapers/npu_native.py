"""Parser for torch_npu's own registry ``torch_npu/csrc/aten/npu_native_functions.yaml``.

These are the ops torch_npu implements itself, outside op-plugin (``empty_strided``,
``copy_``, ``_to_copy``, format casts...). One file belongs to one release, so rows carry
``torch=None`` unless the caller passes the version. Every row has ``native=True``; ``op_api``
is set when the entry says ``op_api: True``.

Layout: ``backend`` / ``cpp_namespace`` strings, then sections ``supported``, ``custom``,
``symint``, ``autograd``, ``custom_autograd`` (releases ≤ 5.0.x), and ``quant``, ``tocpu``,
``unsupported`` (op-plugin's section names, accepted because the wheel's generated copy uses
them). Entries are bare ``name.overload`` strings or mappings with ``func:`` (a bare name or a
full schema) plus flags (``op_api``, ``internal_format_opapi``, ``device_check``, ``dispatch``,
``exposed``, ``variants``). Unknown sections or keys raise ScrapeError with file and line.

Namespace rule: ``custom`` and ``custom_autograd`` define torch_npu's own ops → ``npu``; in the
other sections a name defined in one of those two sections is ``npu`` (``supported:`` lists
``empty_with_format`` again), else ``npu`` when it starts with ``npu_``/``_npu_``, else
``aten``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opcheck.scrapers.opplugin import base_name, is_npu_name, norm_torch, split_impl_ns
from opcheck.scrapers.rows import KernelRow, Origin
from opcheck.scrapers.yamlines import (
    LineDict,
    YamlCtx,
    check_keys,
    expect_list,
    expect_mapping,
    items,
    line_of,
    load,
)

__all__ = ["NATIVE_SECTIONS", "parse_native", "parse_registry"]

NATIVE_SECTIONS = (
    "supported",
    "custom",
    "symint",
    "autograd",
    "custom_autograd",
    "quant",
    "tocpu",
    "unsupported",
)
_HEADER_KEYS = ("backend", "cpp_namespace")
_CUSTOM_SECTIONS = ("custom", "custom_autograd")
_NATIVE_KEYS = frozenset(
    {
        "func",
        "op_api",
        "internal_format_opapi",
        "device_check",
        "dispatch",
        "exposed",
        "variants",
        # rc-era files (5.0.rc1-5.0.rc3.x) mark ops written in BiSheng C++; a flag only.
        "bscpp_op",
    }
)
# The generated list in a wheel merges op-plugin entries into the same layout.
_CODEGEN_KEYS = _NATIVE_KEYS | frozenset(
    {
        "impl_ns",
        "sparse",
        "structured",
        "structured_delegate",
        "tags",
        "use_const_ref_for_mutable_tensors",
    }
)
_CODEGEN_IMPL = ("acl_op", "op_api", "dvm")


def _namespace(section: str, base: str, custom: Collection[str]) -> str:
    if section in _CUSTOM_SECTIONS or base in custom:
        return "npu"
    return "npu" if is_npu_name(base) else "aten"


def _check_flags(ctx: YamlCtx, entry: LineDict) -> None:
    for key in (
        "op_api",
        "internal_format_opapi",
        "exposed",
        "bscpp_op",
        "structured",
        "use_const_ref_for_mutable_tensors",
    ):
        if key in entry and not isinstance(entry[key], bool):
            raise ctx.error(f"{key}: expected True/False, got {entry[key]!r}", line_of(entry, key))
    for key in ("device_check", "variants", "structured_delegate", "tags"):
        if key in entry and not isinstance(entry[key], str):
            raise ctx.error(f"{key}: expected a string, got {entry[key]!r}", line_of(entry, key))
    if "dispatch" in entry and not isinstance(entry["dispatch"], dict):
        raise ctx.error("dispatch: expected a mapping", line_of(entry, "dispatch"))


def parse_registry(
    text: str, *, origin: Origin, torch: str | None = None, codegen: bool = False
) -> list[KernelRow]:
    """Shared parser for ``npu_native_functions.yaml`` and the wheel's generated list.

    ``codegen=True`` also accepts op-plugin's keys (``impl_ns: acl_op, op_api, dvm``,
    ``sparse: op_api``...): an entry with ``impl_ns`` is an op-plugin kernel (``native=False``),
    one with only ``sparse`` a sparse-only registration (status ``sparse``), and one with
    neither a torch_npu kernel (``native=True``).
    """
    ctx = YamlCtx(origin)
    version = norm_torch(torch)
    data = expect_mapping(ctx, load(text, origin), origin.path.rsplit("/", 1)[-1])
    for key in data:
        kline = line_of(data, key)
        if key in _HEADER_KEYS:
            if not isinstance(data[key], str):
                raise ctx.error(f"{key}: expected a string, got {data[key]!r}", kline)
        elif key not in NATIVE_SECTIONS:
            raise ctx.error(f"unknown top-level section {key!r}", kline)
    custom: set[str] = set()
    for section in _CUSTOM_SECTIONS:
        for _line, entry in items(data.get(section)):
            func = entry.get("func") if isinstance(entry, dict) else entry
            if isinstance(func, str):
                custom.add(func.split("(", 1)[0].strip())
    allowed = _CODEGEN_KEYS if codegen else _NATIVE_KEYS
    rows: list[KernelRow] = []
    for section in data:
        if section in _HEADER_KEYS:
            continue
        entries: Any = expect_list(ctx, data[section], line_of(data, section), section)
        for line, entry in items(entries):
            if isinstance(entry, str):
                base = base_name(ctx, entry, line)
                flags: LineDict = LineDict()
                schema = ""
                eline = line
            elif isinstance(entry, LineDict):
                if "func" not in entry:
                    raise ctx.error(f"{section}: entry without func:", entry.line)
                check_keys(ctx, entry, allowed, section)
                _check_flags(ctx, entry)
                base = base_name(ctx, entry["func"], entry.line)
                flags = entry
                func = entry["func"].strip()
                schema = func if "(" in func else ""
                eline = entry.line
            else:
                raise ctx.error(f"{section}: expected a name or an entry, got {entry!r}", line)
            op = f"{_namespace(section, base, custom)}::{base}"
            status = section if section in ("tocpu", "unsupported") else "kernel"
            impl = (
                split_impl_ns(ctx, flags["impl_ns"], line_of(flags, "impl_ns"), _CODEGEN_IMPL)
                if "impl_ns" in flags
                else []
            )
            if "sparse" in flags:
                if flags["sparse"] not in ("acl_op", "op_api"):
                    raise ctx.error(
                        f"sparse: expected acl_op or op_api, got {flags['sparse']!r}",
                        line_of(flags, "sparse"),
                    )
                rows.append(
                    KernelRow(
                        op=op,
                        torch=version,
                        op_api=flags["sparse"] == "op_api",
                        status="sparse",
                        section=section,
                        schema=schema,
                        line=eline,
                    )
                )
                if not impl:
                    continue
            rows.append(
                KernelRow(
                    op=op,
                    torch=version,
                    op_api="op_api" in impl or flags.get("op_api") is True,
                    acl_op="acl_op" in impl,
                    native=not impl,
                    status=status,
                    section=section,
                    schema=schema,
                    line=eline,
                )
            )
    return rows


def parse_native(text: str, *, origin: Origin, torch: str | None = None) -> list[KernelRow]:
    """Rows of ``npu_native_functions.yaml`` (all ``native=True``)."""
    return parse_registry(text, origin=origin, torch=torch, codegen=False)
