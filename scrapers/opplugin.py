"""Parsers for op-plugin's kernel registry: ``op_plugin_functions.yaml`` and ``deprecated.yaml``.

Pure functions: text in, rows out. Every parser is strict: an unknown section, an unknown
key in an entry, a value of the wrong shape or a version that the file's ``all_version`` does
not list raises :class:`~opcheck.core.errors.ScrapeError` naming ``origin.path`` and the line, so a
format change upstream fails loudly instead of silently dropping ops.

Three formats of ``op_plugin_functions.yaml`` exist (:func:`detect_format`):

``per_version``
    One file per torch minor version in ``op_plugin/config/vXrY/`` (branches 5.0.x, 6.0.rc1,
    6.0.rc2). ``impl_ns: acl_op, op_api`` per entry; ``tocpu:`` / ``unsupported:`` are lists of
    bare ``name.overload`` strings (rows with status ``tocpu`` / ``unsupported``). The torch
    version is the folder name (``v1r11`` → ``1.11``, ``v2r1`` → ``2.1``): taken from the
    ``torch`` argument, else from ``origin.path``; when both are given they must agree.
    ``custom_supported:`` (``v2r2`` of branch 5.0.x, when torch 2.2 was new) repeats ops of the
    ``custom`` section by schema only; it adds rows only for ops not already in ``custom``.
``transitional``
    The combined file of branch 6.0.rc2: parallel comma lists ``impl_ns: acl_op, op_api, ...``
    and ``version: 1,11, 1,11, 2.0, ...`` paired positionally (``1,11`` is upstream's spelling of
    1.11). A length mismatch is an error.
``combined``
    6.0.rc3 onwards: top-level ``all_version: [v2.1, ...]`` and per-entry version specs in
    ``acl_op:`` / ``op_api:`` (and ``sparse:``, ``dvm:``, tocpu/unsupported ``version:``). A spec
    is ``all_version``; a two-element range ``[v2.1, newest]`` / ``[v2.1, v2.6]`` (inclusive,
    over the versions of ``all_version``); or one version or a comma list (``v2.2``,
    ``v2.1, v2.2``). Rows are expanded to one per torch minor version.

Rows: one :class:`KernelRow` per (op, torch minor, status). ``status`` is ``kernel`` when
``acl_op``, ``op_api`` or ``dvm`` registers a dense kernel for that version, ``tocpu`` /
``unsupported`` for those lists, and ``sparse`` for a ``sparse:`` registration (a kernel for
the SparsePrivateUse1 key only: it does not make dense tensors run on the NPU, so it gets its
own row rather than a flag). ``aclnn`` is the first token of ``gen_opapi.exec``
(``aclnnGeluV2``); an entry whose ``gen_opapi`` only says ``structured_inherit: ceil.out``
takes the ``exec`` of that entry.

Namespace rule (op-plugin YAML spells names without namespace): sections ``official``,
``autograd``, ``quant``, ``tocpu``, ``unsupported`` → ``aten``; ``custom`` (and
``custom_supported``) → ``npu``; ``symint`` → ``npu`` if the same name (``name.overload``) is
defined in the file's ``custom`` section, ``aten`` if it is in ``official``, else ``npu`` when the
name starts with ``npu_`` or ``_npu_``, else ``aten``.

Duplicate keys: PyYAML keeps the last value of a key repeated in one mapping, and so do these
parsers, which load through :mod:`opcheck.scrapers.yamlines` (torchgen's own loader would
reject the file; op-plugin's generator reads it with PyYAML). A repeated key with the same value is harmless; with a different value the last one
wins, as it does in the build. No file in the snapshot under ``../shared/upstream`` has one.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from opcheck.core.errors import UsageError
from opcheck.core.opname import OpName
from opcheck.scrapers.opplugin_versions import (
    VersionCtx,
    expand_spec,
    functions_paths,
    minor_of,
    norm_torch,
    parse_all_version,
    torch_from_path,
)
from opcheck.scrapers.rows import DeprecatedRow, KernelRow, Origin
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

__all__ = [
    "FORMATS",
    "base_name",
    "detect_format",
    "functions_paths",
    "is_npu_name",
    "norm_torch",
    "parse_deprecated",
    "parse_functions",
    "split_impl_ns",
    "torch_from_path",
]

FORMATS = ("per_version", "transitional", "combined")


# ---------------------------------------------------------------------------------------------
# op_plugin_functions.yaml

_SECTIONS = (
    "official",
    "custom",
    "symint",
    "autograd",
    "quant",
    "tocpu",
    "unsupported",
    "custom_supported",
)
_LIST_SECTIONS = ("tocpu", "unsupported")
_IMPL_NS = ("acl_op", "op_api")
# Keys that only tune code generation or Python exposure: popped and checked, no row effect.
_PASSIVE_KEYS = frozenset(
    {
        "exposed",
        "expose",  # typo in 6.0.rc3 for exposed (npu_fused_infer_attention_score)
        "device_check",
        "dispatch",
        "internal_format_opapi",
        "structured",
        "structured_delegate",
        "tags",
        "use_const_ref_for_mutable_tensors",
        "variants",
        "kernel",  # transitional format: the C++ files that hold the kernels
    }
)
_KEYS_BY_FORMAT: dict[str, frozenset[str]] = {
    "per_version": frozenset({"func", "impl_ns", "sparse", "gen_opapi"}) | _PASSIVE_KEYS,
    "transitional": frozenset({"func", "impl_ns", "version", "sparse", "gen_opapi"})
    | _PASSIVE_KEYS,
    "combined": frozenset({"func", "acl_op", "op_api", "dvm", "sparse", "version", "gen_opapi"})
    | _PASSIVE_KEYS,
}

_COMBINED_RE = re.compile(r"^all_version\s*:", re.MULTILINE)
_TRANSITIONAL_RE = re.compile(r"^\s+version\s*:\s*1,11", re.MULTILINE)
_TRANSITIONAL_RE2 = re.compile(r"^\s+impl_ns\s*:[^\n]*\n\s+version\s*:", re.MULTILINE)


def detect_format(text: str) -> str:
    """``per_version`` | ``transitional`` | ``combined``, from the text alone (cheap).

    ``combined`` has a top-level ``all_version:``; ``transitional`` has per-entry ``version:``
    next to ``impl_ns:``; anything else is the per-version layout.
    """
    if _COMBINED_RE.search(text):
        return "combined"
    if _TRANSITIONAL_RE.search(text) or _TRANSITIONAL_RE2.search(text):
        return "transitional"
    return "per_version"


def base_name(ctx: YamlCtx, func: Any, line: int) -> str:
    """``name.overload`` of a ``func:`` schema or bare name, validated."""
    if not isinstance(func, str) or not func.strip():
        raise ctx.error(f"func: expected a schema or name, got {func!r}", line)
    try:
        return OpName.from_schema(func, "x").base
    except UsageError as e:
        raise ctx.error(f"func: not an operator schema: {func!r}", line) from e


def is_npu_name(base: str) -> bool:
    """torch_npu's naming convention for its own ops (used when no section says)."""
    return base.startswith(("npu_", "_npu_"))


@dataclass
class _Names:
    custom: set[str]
    official: set[str]

    def namespace(self, section: str, base: str) -> str:
        if section in ("custom", "custom_supported", "custom_autograd"):
            return "npu"
        if section == "symint":
            if base in self.custom:
                return "npu"
            if base in self.official:
                return "aten"
            return "npu" if is_npu_name(base) else "aten"
        return "aten"


def _collect_names(data: LineDict, custom_sections: Iterable[str] = ("custom",)) -> _Names:
    def names(section: str) -> set[str]:
        out: set[str] = set()
        for _line, entry in items(data.get(section)):
            func = entry.get("func") if isinstance(entry, dict) else entry
            if isinstance(func, str):
                out.add(func.split("(", 1)[0].strip())
        return out

    custom: set[str] = set()
    for s in custom_sections:
        custom |= names(s)
    return _Names(custom=custom, official=names("official"))


def _aclnn(ctx: VersionCtx, entry: LineDict, line: int) -> tuple[str | None, str | None]:
    """(aclnn function from gen_opapi.exec, structured_inherit target)."""
    gen = entry.get("gen_opapi")
    if gen is None:
        return None, None
    gline = line_of(entry, "gen_opapi", line)
    if not isinstance(gen, dict):
        raise ctx.error(f"gen_opapi: expected a mapping, got {gen!r}", gline)
    exec_ = gen.get("exec")
    inherit = gen.get("structured_inherit")
    aclnn: str | None = None
    if exec_ is not None:
        if not isinstance(exec_, str) or not exec_.strip():
            raise ctx.error(f"gen_opapi.exec: expected a string, got {exec_!r}", gline)
        aclnn = exec_.split(",", 1)[0].strip()
        if not re.fullmatch(r"[A-Za-z_]\w*", aclnn):
            raise ctx.error(f"gen_opapi.exec: not a function name: {aclnn!r}", gline)
    if inherit is not None and not isinstance(inherit, str):
        raise ctx.error(f"gen_opapi.structured_inherit: expected a name, got {inherit!r}", gline)
    return aclnn, inherit


def _check_passive(ctx: VersionCtx, entry: LineDict, all_versions: Sequence[str] | None) -> None:
    """Shape-check keys that do not change rows, so a changed meaning is noticed."""
    for key in ("exposed", "expose", "internal_format_opapi"):
        if key in entry:
            value = entry[key]
            if isinstance(value, bool):
                continue
            if all_versions is None:
                raise ctx.error(f"{key}: expected True/False, got {value!r}", line_of(entry, key))
            expand_spec(ctx, value, all_versions, line_of(entry, key), key)
    for key in ("structured", "use_const_ref_for_mutable_tensors"):
        if key in entry and not isinstance(entry[key], bool):
            raise ctx.error(f"{key}: expected True/False, got {entry[key]!r}", line_of(entry, key))
    for key in ("device_check", "structured_delegate", "tags", "kernel", "variants"):
        if key in entry and not isinstance(entry[key], str):
            raise ctx.error(f"{key}: expected a string, got {entry[key]!r}", line_of(entry, key))
    if "dispatch" in entry and not isinstance(entry["dispatch"], dict):
        raise ctx.error(
            f"dispatch: expected a mapping, got {entry['dispatch']!r}", line_of(entry, "dispatch")
        )


def split_impl_ns(ctx: YamlCtx, value: Any, line: int, allowed: Collection[str]) -> list[str]:
    if not isinstance(value, str):
        raise ctx.error(f"impl_ns: expected e.g. 'acl_op, op_api', got {value!r}", line)
    tokens = [t.strip() for t in value.split(",")]
    for t in tokens:
        if t not in allowed:
            raise ctx.error(f"impl_ns: unknown kernel family {t!r}", line)
    return tokens


@dataclass
class _Reg:
    """What one entry registers for one torch version."""

    acl_op: bool = False
    op_api: bool = False
    dvm: bool = False
    sparse: bool = False
    sparse_op_api: bool = False


def _emit(
    out: list[KernelRow],
    op: str,
    section: str,
    schema: str,
    line: int,
    aclnn: str | None,
    regs: dict[str, _Reg],
) -> None:
    for torch, reg in regs.items():
        if reg.acl_op or reg.op_api or reg.dvm:
            out.append(
                KernelRow(
                    op=op,
                    torch=torch,
                    op_api=reg.op_api,
                    acl_op=reg.acl_op,
                    aclnn=aclnn if reg.op_api else None,
                    section=section,
                    schema=schema,
                    line=line,
                )
            )
        if reg.sparse:
            out.append(
                KernelRow(
                    op=op,
                    torch=torch,
                    op_api=reg.sparse_op_api,
                    status="sparse",
                    section=section,
                    schema=schema,
                    line=line,
                )
            )


def parse_functions(text: str, *, origin: Origin, torch: str | None = None) -> list[KernelRow]:
    """Rows of one ``op_plugin_functions.yaml`` (any of the three formats).

    ``torch`` (``2.1``): for a per-version file, the folder's version (else derived from
    ``origin.path``); for the two combined formats, keep only that version's rows (None: all).
    """
    ctx = VersionCtx(origin)
    want = norm_torch(torch)
    data = load(text, origin)
    if data is None:
        raise ctx.error("empty file", 1)
    data = expect_mapping(ctx, data, "op_plugin_functions.yaml")
    fmt = detect_format(text)
    for key in data:
        if key == "all_version" and fmt == "combined":
            continue
        if key not in _SECTIONS:
            raise ctx.error(f"unknown top-level section {key!r}", line_of(data, key))
        if key == "custom_supported" and fmt != "per_version":
            raise ctx.error(
                "custom_supported only exists in per-version files", line_of(data, key)
            )
    file_version: str | None = None
    all_versions: list[str] | None = None
    if fmt == "per_version":
        folder = torch_from_path(origin.path)
        if want is not None and folder is not None and want != folder:
            raise ctx.error(f"torch={want} but the file is in the folder for {folder}", None)
        file_version = want or folder
        if file_version is None:
            raise ctx.error(
                "per-version op_plugin_functions.yaml: torch version unknown "
                "(pass torch= or use the vXrY/ folder in origin.path)",
                None,
            )
    elif fmt == "combined":
        all_versions = parse_all_version(ctx, data)
    rows = _parse_sections(ctx, data, fmt, all_versions, file_version)
    if want is not None:
        rows = [r for r in rows if r.torch == want]
    return rows


@dataclass
class _Entry:
    section: str
    base: str
    schema: str
    line: int
    regs: dict[str, _Reg]
    aclnn: str | None = None
    inherit: str | None = None


def _parse_sections(
    ctx: VersionCtx,
    data: LineDict,
    fmt: str,
    all_versions: Sequence[str] | None,
    file_version: str | None,
) -> list[KernelRow]:
    names = _collect_names(data)
    allowed = _KEYS_BY_FORMAT[fmt]
    entries: list[_Entry] = []
    for section in data:
        if section == "all_version":
            continue
        sline = line_of(data, section)
        entries_in = expect_list(ctx, data[section], sline, section)
        for line, entry in items(entries_in):
            if section in _LIST_SECTIONS:
                entries.append(
                    _list_entry(ctx, section, entry, line, fmt, all_versions, file_version)
                )
                continue
            if not isinstance(entry, LineDict):
                raise ctx.error(f"{section}: expected an entry with func:, got {entry!r}", line)
            if "func" not in entry:
                raise ctx.error(f"{section}: entry without func:", entry.line)
            base = base_name(ctx, entry["func"], entry.line)
            if section == "custom_supported":
                check_keys(ctx, entry, frozenset({"func"}), section)
                if base in names.custom:
                    continue
                regs: dict[str, _Reg] = {}
            else:
                check_keys(ctx, entry, allowed, section)
                _check_passive(ctx, entry, all_versions)
                if fmt == "per_version":
                    assert file_version is not None
                    regs = _regs_per_version(ctx, entry, file_version)
                elif fmt == "transitional":
                    regs = _regs_transitional(ctx, entry)
                else:
                    assert all_versions is not None
                    regs = _regs_combined(ctx, entry, all_versions)
            aclnn, inherit = _aclnn(ctx, entry, entry.line)
            func = entry["func"].strip()
            entries.append(
                _Entry(section, base, func if "(" in func else "", entry.line, regs, aclnn, inherit)
            )
    # structured_inherit names the entry whose exec this one shares (ceil → ceil.out).
    exec_by_base: dict[str, str] = {}
    for e in entries:
        if e.aclnn is not None:
            exec_by_base.setdefault(e.base, e.aclnn)
    out: list[KernelRow] = []
    for e in entries:
        op = f"{names.namespace(e.section, e.base)}::{e.base}"
        if e.section in _LIST_SECTIONS:
            out.extend(
                KernelRow(op=op, torch=v, status=e.section, section=e.section, line=e.line)
                for v in e.regs
            )
            continue
        if e.section == "custom_supported":
            out.append(
                KernelRow(
                    op=op, torch=file_version, section=e.section, schema=e.schema, line=e.line
                )
            )
            continue
        aclnn = e.aclnn
        if aclnn is None and e.inherit is not None:
            aclnn = exec_by_base.get(e.inherit.strip())
        _emit(out, op, e.section, e.schema, e.line, aclnn, e.regs)
    return out


def _list_entry(
    ctx: VersionCtx,
    section: str,
    entry: Any,
    line: int,
    fmt: str,
    all_versions: Sequence[str] | None,
    file_version: str | None,
) -> _Entry:
    """A tocpu/unsupported item: a bare name (per-version) or {func, version} (combined)."""
    if fmt == "per_version":
        if not isinstance(entry, str):
            raise ctx.error(f"{section}: expected an op name, got {entry!r}", line)
        assert file_version is not None
        return _Entry(section, base_name(ctx, entry, line), "", line, {file_version: _Reg()})
    if fmt != "combined" or not isinstance(entry, LineDict):
        raise ctx.error(
            f"{section}: expected an entry with func: and version:, got {entry!r}", line
        )
    check_keys(ctx, entry, frozenset({"func", "version"}), section)
    if "func" not in entry or "version" not in entry:
        raise ctx.error(f"{section}: entry needs func: and version:", entry.line)
    assert all_versions is not None
    versions = expand_spec(
        ctx, entry["version"], all_versions, line_of(entry, "version"), "version"
    )
    base = base_name(ctx, entry["func"], entry.line)
    return _Entry(section, base, "", entry.line, {v: _Reg() for v in versions})


def _regs_per_version(ctx: VersionCtx, entry: LineDict, version: str) -> dict[str, _Reg]:
    reg = _Reg()
    if "impl_ns" in entry:
        for t in split_impl_ns(ctx, entry["impl_ns"], line_of(entry, "impl_ns"), _IMPL_NS):
            setattr(reg, t, True)
    if "sparse" in entry:
        sval = entry["sparse"]
        if sval not in _IMPL_NS:
            raise ctx.error(
                f"sparse: expected acl_op or op_api, got {sval!r}", line_of(entry, "sparse")
            )
        reg.sparse = True
        reg.sparse_op_api = sval == "op_api"
    if not (reg.acl_op or reg.op_api or reg.sparse):
        raise ctx.error("entry without impl_ns: or sparse:", entry.line)
    return {version: reg}


def _transitional_versions(ctx: VersionCtx, value: Any, line: int) -> list[str]:
    if not isinstance(value, str):
        raise ctx.error(f"version: expected a comma list, got {value!r}", line)
    # "1,11" is 1.11: protect it before splitting on commas.
    tokens = [t.strip() for t in re.sub(r"\b1,11\b", "1.11", value).split(",")]
    out: list[str] = []
    for t in tokens:
        v = minor_of(t)
        if v is None:
            raise ctx.error(f"version: bad version {t!r} in {value!r}", line)
        out.append(v)
    return out


def _regs_transitional(ctx: VersionCtx, entry: LineDict) -> dict[str, _Reg]:
    line = entry.line
    if "impl_ns" not in entry and "sparse" not in entry:
        raise ctx.error("entry without impl_ns: or sparse:", line)
    regs: dict[str, _Reg] = {}
    if "impl_ns" in entry:
        kinds = split_impl_ns(ctx, entry["impl_ns"], line_of(entry, "impl_ns"), _IMPL_NS)
        if "version" not in entry:
            raise ctx.error("impl_ns: without version: in the combined 6.0.rc2 format", line)
        versions = _transitional_versions(ctx, entry["version"], line_of(entry, "version"))
        if len(kinds) != len(versions):
            raise ctx.error(
                f"impl_ns has {len(kinds)} items but version has {len(versions)}",
                line_of(entry, "version"),
            )
        for kind, v in zip(kinds, versions, strict=True):
            setattr(regs.setdefault(v, _Reg()), kind, True)
    if "sparse" in entry:
        raise ctx.error("sparse: in the 6.0.rc2 combined format is not understood", line)
    return regs


def _regs_combined(ctx: VersionCtx, entry: LineDict, all_versions: Sequence[str]) -> dict[str, _Reg]:
    line = entry.line
    if "version" in entry:
        raise ctx.error(
            "version: is only valid in tocpu/unsupported here", line_of(entry, "version")
        )
    sel: dict[str, frozenset[str]] = {}
    for key in ("acl_op", "op_api", "dvm", "sparse"):
        if key in entry:
            sel[key] = frozenset(
                expand_spec(ctx, entry[key], all_versions, line_of(entry, key), key)
            )
    if not sel:
        raise ctx.error("entry registers nothing (no acl_op/op_api/dvm/sparse)", line)
    empty: frozenset[str] = frozenset()
    acl, api, dvm, sparse = (sel.get(k, empty) for k in ("acl_op", "op_api", "dvm", "sparse"))
    # combined-format sparse kernels are op_api ones
    return {
        v: _Reg(v in acl, v in api, v in dvm, v in sparse, v in sparse)
        for v in all_versions
        if v in acl or v in api or v in dvm or v in sparse
    }


# ---------------------------------------------------------------------------------------------
# deprecated.yaml


def parse_deprecated(text: str, *, origin: Origin) -> list[DeprecatedRow]:
    """``deprecated: [{name, replace?}]`` → rows for ``npu::`` ops (torch_npu custom ops)."""
    ctx = VersionCtx(origin)
    data = expect_mapping(ctx, load(text, origin), "deprecated.yaml")
    for key in data:
        if key != "deprecated":
            raise ctx.error(f"unknown top-level key {key!r}", line_of(data, key))
    entries = expect_list(ctx, data.get("deprecated"), line_of(data, "deprecated"), "deprecated")
    rows: list[DeprecatedRow] = []
    for line, entry in items(entries):
        if not isinstance(entry, LineDict) or "name" not in entry:
            raise ctx.error(f"expected an entry with name:, got {entry!r}", line)
        check_keys(ctx, entry, frozenset({"name", "replace"}), "deprecated")
        base = base_name(ctx, entry["name"], entry.line)
        replace = entry.get("replace", "")
        if not isinstance(replace, str):
            raise ctx.error(f"replace: expected text, got {replace!r}", line_of(entry, "replace"))
        rows.append(DeprecatedRow(op=f"npu::{base}", replacement=replace.strip(), line=entry.line))
    return rows
