"""Named questions over the catalog: target selection, op history, release diffs."""

from __future__ import annotations

import re
from dataclasses import dataclass

from opcheck.checker.resolve import Resolution, Resolver
from opcheck.core.errors import CatalogError, UsageError
from opcheck.core.versions import clean_release, minor_key, torch_minor
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog, ReleaseInfo


def normalise_cann(text: str) -> str:
    """``CANN 8.3.RC1`` / ``8.3.rc1`` → ``8.3.RC1``."""
    s = re.sub(r"(?i)^\s*cann\s*", "", text).strip()
    return re.sub(r"(?i)rc", "RC", s)


def select_target(
    cat: Catalog,
    *,
    torch_npu: str | None = None,
    cann: str | None = None,
    torch: str | None = None,
    installed_torch: str | None = None,
) -> ReleaseInfo:
    """The release to check against. Default: the newest release for the installed torch's
    major.minor, else the newest release with a kernel list."""
    usable = [r for r in cat.releases if r.has_kernels]
    if not usable:
        raise CatalogError("the catalog has no release with a kernel list")
    if torch_npu:
        want = clean_release(torch_npu)
        for r in cat.releases:
            if r.torch_npu == want:
                if not r.has_kernels:
                    raise CatalogError(
                        f"torch_npu {want} has no kernel list in the catalog "
                        "(matrix-only release); pick another with `opcheck releases`"
                    )
                return r
        near = ", ".join(r.torch_npu for r in usable if r.torch_npu.startswith(want[:3]))[:200]
        raise UsageError(f"unknown torch_npu release {torch_npu!r}" + (f" (known: {near})" if near else ""))
    pool = usable
    if cann:
        want_cann = normalise_cann(cann)
        pool = [r for r in usable if r.cann.upper() == want_cann.upper()]
        if not pool:
            known = sorted({r.cann for r in usable if r.cann})
            raise UsageError(f"no torch_npu release for CANN {want_cann} (known: {', '.join(known)})")
    minor_wanted = torch or installed_torch
    if minor_wanted:
        try:
            minor = torch_minor(minor_wanted)
        except ValueError:
            raise UsageError(f"not a torch version: {minor_wanted!r}") from None
        same = [r for r in pool if r.torch_minor == minor]
        if same:
            return same[-1]
        if torch:  # asked for explicitly: no silent substitution
            known = sorted({r.torch_minor for r in usable}, key=minor_key)
            raise UsageError(f"no torch_npu release for torch {minor} (known: {', '.join(known)})")
    return pool[-1]


@dataclass(frozen=True)
class HistoryRow:
    release: ReleaseInfo
    resolution: Resolution | None  # None: no kernel list for that release


def op_history(cat: Catalog, op: str) -> list[HistoryRow]:
    if op not in cat.operators and not cat.kernel_releases([op]):
        raise UsageError(f"{op} is not in the catalog (check the spelling: aten::name.overload)")
    rows = []
    for rel in cat.releases:
        res = Resolver(cat, rel.torch_npu).resolve(op) if rel.has_kernels else None
        rows.append(HistoryRow(rel, res))
    return rows


def missing_in_release(cat: Catalog, release: str, *, namespace: str = "aten") -> list[str]:
    """Ops of the catalog's op universe that would not run on the NPU in ``release``."""
    resolver = Resolver(cat, release)
    return sorted(
        op for op, info in cat.operators.items()
        if info.namespace == namespace
        and resolver.resolve(op).status in (Status.CPU_FALLBACK, Status.UNSUPPORTED)
    )


@dataclass(frozen=True)
class ReleaseDiff:
    added: list[str]  # ops with an NPU kernel in new but not old
    removed: list[str]
    family_changed: list[tuple[str, str, str]]  # op, old kernel, new kernel


def release_diff(cat: Catalog, old: str, new: str) -> ReleaseDiff:
    from opcheck.checker.resolve import kernel_label

    a = {op: f for op, f in cat.kernels(old).items() if f.status == "kernel"}
    b = {op: f for op, f in cat.kernels(new).items() if f.status == "kernel"}
    changed = sorted(
        (op, kernel_label(a[op]), kernel_label(b[op]))
        for op in a.keys() & b.keys()
        if kernel_label(a[op]) != kernel_label(b[op])
    )
    return ReleaseDiff(sorted(b.keys() - a.keys()), sorted(a.keys() - b.keys()), changed)
