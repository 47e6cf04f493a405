"""The target of a report: a torch_npu release and the CANN version it runs on.

The CANN version is the user's to name (``--cann``): it is installed apart from torch_npu and
often does not match the version the release tables pair the release with. The report then
keeps the CANN asked for and says, in a warning, what the release pairs with and whether the
asked-for version is older or newer. It also says when the pairing itself is inferred (a
hotfix train no table names) and when the release's kernel facts are approximate (read at an
op-plugin branch head because the release pins no commit the catalog could read).
"""

from __future__ import annotations

import functools
import re

from opcheck.core.vocab import KernelSource
from opcheck.db.catalog import ReleaseInfo

_CANN_PART = re.compile(r"^(?:(?P<num>\d+)|RC(?P<rc>\d+)|(?P<pre>[A-Z]+)(?P<pre_n>\d*))$")


def normalise(text: str) -> str:
    """``CANN 8.3.rc1`` → ``8.3.RC1`` (the spelling of the release tables)."""
    s = re.sub(r"(?i)^\s*cann\s*", "", text).strip()
    return re.sub(r"(?i)rc", "RC", s)


@functools.lru_cache(maxsize=1024)  # called per documented version, per op, per release
def cann_key(version: str) -> tuple[tuple[int, int], ...]:
    """Order of CANN versions: ``8.0.RC3 < 8.0.0 < 8.0.1 < 8.1.RC1``; a hotfix
    (``6.3.RC3.1``) after its release, a pre-release build (``8.2.RC1.alpha002``) before it.

    Raises ValueError for text that is not a CANN version."""
    parts = normalise(version).upper().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or len(parts) > 6:
        raise ValueError(f"not a CANN version: {version!r}")
    key: list[tuple[int, int]] = []
    for p in parts:
        m = _CANN_PART.match(p)
        if not m:
            raise ValueError(f"not a CANN version: {version!r}")
        if m["num"] is not None:
            key.append((3, int(m["num"])))
        elif m["rc"] is not None:
            key.append((2, int(m["rc"])))
        else:  # alpha001, beta1, T5: builds before the release they name
            key.append((0, int(m["pre_n"] or 0)))
    # A missing part sorts between a pre-release build (0) and an RC or hotfix (2, 3).
    key += [(1, 0)] * (6 - len(key))
    return tuple(key)


def same_cann(a: str, b: str) -> bool:
    return bool(a and b) and normalise(a).upper() == normalise(b).upper()


def compare_cann(a: str, b: str) -> str:
    """``older`` / ``newer`` / ``the same`` (a relative to b); "" when either is unparsable."""
    try:
        ka, kb = cann_key(a), cann_key(b)
    except ValueError:
        return ""
    return "older" if ka < kb else "newer" if ka > kb else "the same"


def pairing_note(release: ReleaseInfo) -> str:
    """How the release's CANN is known: "" from a table, else why it is an inference."""
    if release.cann and release.cann_inferred:
        return (f"inferred: no table names it; train {release.train} is a hotfix of a train "
                f"that pairs with CANN {release.cann}")
    return ""


def describe(release: ReleaseInfo, cann: str | None = None) -> tuple[dict[str, str], list[str]]:
    """The report's ``target`` and the warnings it needs.

    ``cann`` is the CANN version the user named; it stays the target's CANN whatever the
    release pairs with (``cann_paired``). ``cann_basis`` says where ``cann`` comes from:
    ``table``, ``inferred`` (hotfix train), ``requested`` (named, differs from the pairing)
    or "" (unknown)."""
    paired = release.cann
    wanted = normalise(cann) if cann else ""
    warnings: list[str] = []
    if wanted and not same_cann(wanted, paired):
        basis = "requested"
        if paired:
            how = compare_cann(wanted, paired)
            rel = f"{how} than" if how in ("older", "newer") else "not"
            inferred = " (inferred from its train)" if release.cann_inferred else ""
            warnings.append(
                f"CANN {wanted} was asked for, but torch_npu {release.torch_npu} pairs with CANN "
                f"{paired}{inferred} (train {release.train or '?'}): {wanted} is {rel} {paired}. "
                f"The kernel facts are those of torch_npu {release.torch_npu}; "
                + ("an older CANN may lack aclnn functions the release calls (those ops then "
                   "fail at run time)" if how == "older" else
                   "a newer CANN is not what this release was built and tested with")
                + f". For an exact answer pick the torch_npu release of CANN {wanted} "
                "(`opcheck releases`) or install CANN " + paired)
        else:
            warnings.append(
                f"CANN {wanted} was asked for; the release tables name no CANN for torch_npu "
                f"{release.torch_npu} (train {release.train or '?'}), so the pairing is "
                "unchecked")
    else:
        wanted = paired
        basis = ("inferred" if release.cann_inferred else "table") if paired else ""
    if KernelSource(release.kernel_source).approximate:
        warnings.append(
            f"kernel facts of torch_npu {release.torch_npu} are approximate: the catalog has no "
            "op-plugin commit pinned by this release, so they were read at the head of the "
            f"op-plugin branch of train {release.train or '?'}, which moved after the release")
    target = {"torch_npu": release.torch_npu, "torch": release.torch, "cann": wanted,
              "cann_paired": paired, "cann_basis": basis, "train": release.train,
              "pythons": release.pythons, "kernel_source": release.kernel_source}
    return target, warnings
