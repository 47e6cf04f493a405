"""The target of a report: a torch_npu release and the CANN version it runs on.

The CANN version is the user's to name (``--cann``): it is installed apart from torch_npu and
often does not match the version the release tables pair the release with. The report then
keeps the CANN asked for and says, in a warning, what the release pairs with and whether the
asked-for version is older or newer. It also says when the pairing itself is inferred (a
hotfix train no table names) and when the release's kernel facts are approximate (read at an
op-plugin branch head because the release pins no commit the catalog could read).
"""

from __future__ import annotations

from opcheck.core.versions import cann_key, compare_cann, normalise_cann, same_cann
from opcheck.core.vocab import KernelSource
from opcheck.db.catalog import ReleaseInfo

# The CANN helpers live in opcheck.core.versions (env/ and db/ need them too); the checker's
# modules keep importing them from here.
normalise = normalise_cann
__all__ = ["cann_key", "compare_cann", "describe", "normalise", "pairing_note", "same_cann"]


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
