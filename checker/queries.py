"""Named questions over the catalog: target selection, op history, release diffs."""

from __future__ import annotations

from dataclasses import dataclass

from opcheck.checker.resolve import Resolution, Resolver
from opcheck.checker.target import normalise as normalise_cann
from opcheck.core.errors import CatalogError, UsageError
from opcheck.core.versions import expand_release, minor_key, torch_minor
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog, ReleaseInfo


def select_target(
    cat: Catalog,
    *,
    torch_npu: str | None = None,
    cann: str | None = None,
    torch: str | None = None,
    installed_torch: str | None = None,
) -> ReleaseInfo:
    """The release to check against. Default: the newest release for the installed torch's
    major.minor, else the newest release with a kernel list. ``cann`` narrows to releases
    paired with it (else with the newest older CANN); it never replaces ``torch_npu``: pass
    it on to ``check(cann=...)``, which keeps it as the target's CANN and warns on a
    mismatch."""
    usable = [r for r in cat.releases if r.has_kernels]
    if not usable:
        raise CatalogError("the catalog has no release with a kernel list")
    if torch_npu:
        want = expand_release(torch_npu, [r.torch_npu for r in usable], exact=[r.torch_npu for r in cat.releases])[0]  # 2.6, v2.6.0
        for r in cat.releases:
            if r.torch_npu == want:
                if not r.has_kernels:
                    raise CatalogError(
                        f"torch_npu {want} has no kernel list in the catalog "
                        "(matrix-only release); pick another with `opcheck releases`"
                    )
                return r
        close = [r.torch_npu for r in usable if r.torch_npu.startswith(want[:3])]
        near = ", ".join(close[:16]) + (f" and {len(close) - 16} more" if len(close) > 16 else "")
        raise UsageError(f"unknown torch_npu release {torch_npu!r}" + (f" (known: {near})" if near else ""))
    pool = usable
    minor_wanted = torch or installed_torch
    if cann:
        # The CANN asked for stays the report's (check(cann=...)); here it only picks the
        # release: one paired with it, else the newest pairing with an older CANN, which the
        # report then names in a warning. Never a release of a newer CANN: it may call aclnn
        # functions the installed CANN lacks.
        from opcheck.checker.target import cann_key

        want_cann = normalise_cann(cann)
        try:
            want_key = cann_key(want_cann)
        except ValueError:
            raise UsageError(f"not a CANN version: {cann!r} (e.g. 8.0.RC3, 8.5.0)") from None
        keyed = []
        for r in usable:
            try:
                keyed.append((cann_key(r.cann), r))
            except ValueError:
                continue  # no CANN known for the release
        if torch:  # asked for explicitly: stay on that torch line
            try:
                line = torch_minor(torch)
            except ValueError:
                raise UsageError(f"not a torch version: {torch!r}") from None
            keyed = [(k, r) for k, r in keyed if r.torch_minor == line] or keyed
        pool = [r for k, r in keyed if k == want_key]
        if not pool:
            older = [k for k, _ in keyed if k <= want_key]
            if not older:
                known = sorted({r.cann for _, r in keyed}, key=cann_key)
                raise UsageError(f"no torch_npu release for CANN {want_cann} or older "
                                 f"(known: {', '.join(known)})")
            pool = [r for k, r in keyed if k == max(older)]
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


def removed_outcomes(cat: Catalog, release: str, ops: list[str]) -> dict[str, str]:
    """What ``release`` does instead with ops whose NPU kernel it no longer has: the
    resolver's status (composite, cpu_fallback, or unsupported: the call raises an error)."""
    resolver = Resolver(cat, release)
    return {op: str(resolver.resolve(op).status) for op in ops}


def target_reason(
    cat: Catalog,
    target: ReleaseInfo,
    *,
    torch_npu: str | None = None,
    cann: str | None = None,
    torch: str | None = None,
    installed_torch: str | None = None,
    how: str = "; choose another with --torch-npu, --torch or --cann",
) -> str:
    """Why ``select_target`` chose ``target`` with these arguments, in one sentence every
    view shows (CLI, web, zoo): the default is the same rule everywhere. ``how``: how to
    choose another, in the words of the place it is shown."""
    what = f"target torch_npu {target.torch_npu}"
    if torch_npu:
        return f"{what}: asked for with --torch-npu {torch_npu}"
    if cann:
        return f"{what}: the newest release paired with CANN {cann} or the newest older CANN"
    unknown = "" if target.cann else " (its CANN pairing is not in the compatibility tables)"
    if torch:
        return f"{what}: the newest release for torch {torch}{unknown}{how}"
    if installed_torch:
        try:
            line = torch_minor(installed_torch)
        except ValueError:
            line = ""
        if line and target.torch_minor == line:
            return (f"{what}: the newest release for the installed torch {line}"
                    f"{unknown}{how}")
    return f"{what}: the newest release with a kernel list{unknown}{how}"
