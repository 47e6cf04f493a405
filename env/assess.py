"""The inventory of :mod:`opcheck.env.probe` checked against a catalog's release matrix.

:func:`assess` checks the inventory against the matrix (torch_npu ↔ torch ↔ CANN ↔ Python)
and recommends the combination to install: the release that keeps the most of what is
installed, weighing CANN (a system install) over torch over torch_npu. :func:`summary` is the
inventory as component → version for reports. Nothing here looks at the machine.

JSON shape of :meth:`Assessment.to_json` (``schema_version`` 1)::

    {
      "schema_version": 1,
      "consistent": bool,                    # no finding has status "mismatch"
      "inventory": {...},                    # Inventory.to_json (see opcheck.env.probe)
      "release": {"torch_npu", "torch", "train", "cann", "pythons": [str]} | null,
      "findings": [{"check": str, "status": "ok|mismatch|warning|absent", "message": str}],
      "recommendation": {
        "needed": bool, "reason": str,
        "combinations": [{"torch_npu", "torch", "cann", "train", "pythons": [str],
                          "keeps": [str], "changes": [str]}]
      }
    }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from opcheck.core.versions import cann_key, compare_cann, release_key, same_cann, torch_minor
from opcheck.core.vocab import EnvStatus
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.env.probe import Found, Inventory, set_env_script

SCHEMA_VERSION = 1
STATUSES = tuple(s.value for s in EnvStatus)


@dataclass(frozen=True)
class Finding:
    check: str  # python | torch | torch_npu | cann | driver | firmware | npu | files
    status: EnvStatus
    message: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "message": self.message}


@dataclass(frozen=True)
class Combination:
    release: ReleaseInfo
    keeps: tuple[str, ...]
    changes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        r = self.release
        return {"torch_npu": r.torch_npu, "torch": r.torch, "cann": r.cann, "train": r.train,
                "pythons": _pythons(r), "keeps": list(self.keeps), "changes": list(self.changes)}


@dataclass(frozen=True)
class Recommendation:
    needed: bool
    reason: str
    combinations: tuple[Combination, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"needed": self.needed, "reason": self.reason,
                "combinations": [c.to_json() for c in self.combinations]}


@dataclass(frozen=True)
class Assessment:
    inventory: Inventory
    release: ReleaseInfo | None  # the matrix row of the installed torch_npu
    findings: tuple[Finding, ...]
    recommendation: Recommendation

    @property
    def consistent(self) -> bool:
        return not any(f.status is EnvStatus.MISMATCH for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        r = self.release
        return {
            "schema_version": SCHEMA_VERSION,
            "consistent": self.consistent,
            "inventory": self.inventory.to_json(),
            "release": None if r is None else {
                "torch_npu": r.torch_npu, "torch": r.torch, "train": r.train, "cann": r.cann,
                "cann_inferred": r.cann_inferred, "pythons": _pythons(r)},
            "findings": [f.to_json() for f in self.findings],
            "recommendation": self.recommendation.to_json(),
        }


def _pythons(r: ReleaseInfo) -> list[str]:
    return [p.strip() for p in r.pythons.split(",") if p.strip()]


def _public(version: str) -> str:
    """``2.6.0+cpu`` → ``2.6.0``: local tags name the build flavour, not the API."""
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+", 1)[0].strip()


def same_torch(installed: str, wanted: str) -> bool:
    return _public(installed) == _public(wanted)


def _cann_pairing(cat: Catalog, release: ReleaseInfo, installed: str, where: str) -> Finding:
    """The installed CANN against the one the installed torch_npu pairs with: which is older,
    whether the pairing is only inferred, and the releases that do pair with what is installed."""

    inferred = (f", inferred from train {release.train}: no table names it"
                if release.cann_inferred else "")
    if same_cann(installed, release.cann):
        return Finding("cann", EnvStatus.OK, f"{where} pairs with torch_npu {release.torch_npu}{inferred}")
    pairs = f"torch_npu {release.torch_npu} pairs with CANN {release.cann} (train {release.train}"
    try:
        have, want = cann_key(installed), cann_key(release.cann)
    except ValueError:
        have = want = ()
    if have and have[:3] == want[:3]:
        # 8.2.RC1.alpha002 or 8.2.RC1.1 for 8.2.RC1: a build of the right version
        kind = "pre-release build" if have[3:] < want[3:] else "patch"
        return Finding("cann", EnvStatus.WARNING, f"{pairs}{inferred}), installed is {where}: a "
                                          f"{kind} of CANN {release.cann}")
    how = compare_cann(installed, release.cann)
    same_line = [r.torch_npu for r in cat.releases
                 if same_cann(r.cann, installed) and r.torch_minor == release.torch_minor]
    hint = (f"; torch_npu for CANN {installed} on this torch line: {', '.join(same_line[-3:])}"
            if same_line else "")
    older = f" ({how} than {release.cann})" if how in ("older", "newer") else ""
    return Finding("cann", EnvStatus.MISMATCH, f"{pairs}{inferred}), installed is {where}{older}{hint}")


def _same_minor(a: str, b: str) -> bool:
    try:
        return torch_minor(a) == torch_minor(b)
    except ValueError:
        return False


def find_release(cat: Catalog, torch_npu: str) -> ReleaseInfo | None:
    want = _public(torch_npu)
    for r in cat.releases:
        if r.torch_npu == torch_npu or release_key(r.torch_npu) == release_key(want):
            return r
    return None


def _supports_python(r: ReleaseInfo, minor: str) -> bool | None:
    pys = _pythons(r)
    return None if not pys else minor in pys


def _score(r: ReleaseInfo, inv: Inventory) -> tuple[int, list[str]]:
    # CANN is a system install and the hardest to change, torch is what the user's code was
    # written for, torch_npu is the adapter: keep them in that order.
    score, keeps = 0, list[str]()
    if inv.cann and same_cann(r.cann, inv.cann.version):
        score, keeps = score + 8, [*keeps, "cann"]
    if inv.torch and same_torch(inv.torch.version, r.torch):
        score, keeps = score + 4, [*keeps, "torch"]
    elif inv.torch and _same_minor(inv.torch.version, r.torch):
        score += 1
    if inv.torch_npu and release_key(r.torch_npu) == release_key(_public(inv.torch_npu.version)):
        score, keeps = score + 2, [*keeps, "torch_npu"]
    return score, keeps


def _changes(r: ReleaseInfo, inv: Inventory) -> tuple[str, ...]:
    out = []
    pip = []
    if not (inv.torch and same_torch(inv.torch.version, r.torch)):
        pip.append(f"torch=={r.torch}")
    if not (inv.torch_npu and release_key(r.torch_npu) == release_key(_public(inv.torch_npu.version))):
        pip.append(f"torch-npu=={r.torch_npu}")
    if pip:
        out.append("pip install " + " ".join(pip))
    if _supports_python(r, inv.python_minor) is False:
        out.append(f"use Python {', '.join(_pythons(r))} (this is {inv.python_minor})")
    if not (inv.cann and same_cann(r.cann, inv.cann.version)):
        out.append(f"install CANN {r.cann} (toolkit and kernels)" if r.cann else
                   f"install the CANN of torch_npu {r.torch_npu}"
                   + (f" (train {r.train})" if r.train else "")
                   + ": the release matrix does not name it yet")
    return tuple(out)


def _actionable(releases: Sequence[ReleaseInfo]) -> list[ReleaseInfo]:
    """Final releases with a known CANN version when there are any: a pre-release or a row
    without its CANN is no install instruction (the newest wheels often have no table row yet).
    """
    good = [r for r in releases if r.cann and not release_key(r.torch_npu).is_prerelease]
    return good or list(releases)


def _newest_per_torch(releases: Sequence[ReleaseInfo], limit: int = 4) -> list[ReleaseInfo]:
    best: dict[str, ReleaseInfo] = {}
    for r in releases:
        if r.torch not in best or r.sort_key > best[r.torch].sort_key:
            best[r.torch] = r
    return sorted(best.values(), key=lambda r: r.sort_key, reverse=True)[:limit]


def recommend(inv: Inventory, cat: Catalog, release: ReleaseInfo | None,
              findings: Sequence[Finding]) -> Recommendation:
    if not cat.releases:
        return Recommendation(False, "the catalog has no release matrix")
    complete = inv.torch is not None and inv.torch_npu is not None and inv.cann is not None
    if release is not None and complete and not any(f.status is EnvStatus.MISMATCH for f in findings):
        return Recommendation(False, "the installed combination is in the release matrix",
                              (Combination(release, ("torch_npu", "torch", "cann"), ()),))
    py = inv.python_minor
    scores = {r.torch_npu: _score(r, inv)[0] for r in cat.releases}

    def best(rs: Sequence[ReleaseInfo]) -> int:
        return max((scores[r.torch_npu] for r in rs), default=-1)

    # Releases known to support this Python first; rows listing no Pythons (often the newest
    # wheels, not yet in a table) when they keep more of the install, or nothing else is left.
    supported = [r for r in cat.releases if _supports_python(r, py)]
    maybe = supported + [r for r in cat.releases if _supports_python(r, py) is None]
    pool = supported if supported and best(supported) >= best(maybe) else maybe
    py_note = ""
    if not supported:
        pool = pool or list(cat.releases)
        py_note = f" (no release is known to support Python {py})"
    top = best(pool)
    best_any = max(scores.values())
    if top == 0:
        # Nothing installed that the matrix knows: the newest release is the sensible default.
        picks = [max(_actionable(pool), key=lambda r: r.sort_key)]
        reason = ((f"no release pairing with what is installed supports Python {py}"
                   if best_any > 0 else "nothing installed matches the release matrix")
                  + "; newest release" + py_note)
    else:
        picks = _newest_per_torch(_actionable([r for r in pool if scores[r.torch_npu] == top]))
        kept = _score(picks[0], inv)[1]
        reason = ("keeps " + ", ".join(kept) if kept else "closest to what is installed") + py_note
    extra: list[ReleaseInfo] = []
    # Keeping more of the install may need another Python: offer that too.
    if best_any > top:
        extra += _newest_per_torch(_actionable(
            [r for r in cat.releases if scores[r.torch_npu] == best_any]), limit=1)
    # The other way out of a mismatch: keep the installed torch_npu and change the rest.
    if release is not None:
        extra.append(release)
    for r in extra:
        if r not in picks:
            picks.append(r)
    combos = [Combination(r, tuple(_score(r, inv)[1]), _changes(r, inv)) for r in picks]
    return Recommendation(True, reason, tuple(combos))


def _torch_npu_findings(inv: Inventory, release: ReleaseInfo | None) -> list[Finding]:
    """torch_npu and what it pairs with."""
    f: list[Finding] = []
    add = f.append
    if inv.torch_npu is None:
        add(Finding("torch_npu", EnvStatus.ABSENT, "torch_npu is not installed"))
    elif release is None:
        add(Finding("torch_npu", EnvStatus.WARNING,
                    f"torch_npu {inv.torch_npu.version} is not in the release matrix "
                    "(a source build, or a catalog older than the release): cannot check pairings"))
    else:
        add(Finding("torch_npu", EnvStatus.OK,
                    f"torch_npu {inv.torch_npu.version} is in the release matrix (train "
                    f"{release.train or '?'}: torch {release.torch}, CANN {release.cann or '?'})"))
    return f


def _torch_findings(inv: Inventory, cat: Catalog, release: ReleaseInfo | None) -> list[Finding]:
    """torch: the pairing with torch_npu, the build, the project's own torch."""
    f: list[Finding] = []
    add = f.append
    if inv.torch is None:
        status = EnvStatus.MISMATCH if inv.torch_npu is not None else EnvStatus.ABSENT
        add(Finding("torch", status, "torch is not installed"
                    + (f" (torch_npu {release.torch_npu} needs torch {release.torch})"
                       if release is not None else "")))
    elif release is not None:
        if same_torch(inv.torch.version, release.torch):
            add(Finding("torch", EnvStatus.OK, f"torch {inv.torch.version} is the torch torch_npu "
                                       f"{release.torch_npu} is built for"))
        else:
            add(Finding("torch", EnvStatus.MISMATCH,
                        f"torch_npu {release.torch_npu} is built for torch {release.torch}, "
                        f"installed torch is {inv.torch.version}"))
    else:
        exact = [r for r in cat.releases if same_torch(inv.torch.version, r.torch)]
        if exact:
            add(Finding("torch", EnvStatus.OK, f"torch {inv.torch.version} has torch_npu releases "
                                       f"(newest {exact[-1].torch_npu})"))
        else:
            near = [r for r in cat.releases if _same_minor(inv.torch.version, r.torch)]
            hint = f" (same minor: torch {near[-1].torch} → torch_npu {near[-1].torch_npu})" if near else ""
            add(Finding("torch", EnvStatus.WARNING,
                        f"no torch_npu release in the matrix is built for torch "
                        f"{inv.torch.version}{hint}"))

    if inv.torch is not None and inv.torch_build == "cuda" and not inv.cuda_present:
        add(Finding("torch", EnvStatus.WARNING,
                    f"torch {inv.torch.version} is a CUDA build and this machine has no CUDA "
                    "(no nvidia-smi, no /dev/nvidiactl): a `pip install` of another package "
                    "probably replaced the CPU build; reinstall it with the project's "
                    "constraints (README: Adding a script's dependencies)"))
    if (inv.torch is not None and inv.project_torch
            and not same_torch(inv.torch.version, inv.project_torch)):
        add(Finding("torch", EnvStatus.WARNING,
                    f"opcheck's environment was set up with torch {inv.project_torch} "
                    f"({inv.project_constraints}) and now has torch {inv.torch.version}: the "
                    "default target moved with it; `pip install PKG -c "
                    f"{inv.project_constraints}` keeps torch, `make install` restores it"))
    return f


def _cann_findings(inv: Inventory, cat: Catalog, release: ReleaseInfo | None) -> list[Finding]:
    """CANN: stale variables, the pairing, set_env.sh, other installs."""
    f: list[Finding] = []
    add = f.append
    cann = inv.cann
    for var, value in inv.stale_env:
        add(Finding("cann", EnvStatus.WARNING, f"{var}={value} does not exist (stale set_env.sh?)"))
    env_roots = {c.root for c in inv.cann_installs if c.origin != "default"}
    if len(env_roots) > 1:
        add(Finding("cann", EnvStatus.WARNING, "ASCEND_* variables point at different CANN installs: "
                    + ", ".join(sorted(env_roots)) + " (set_env.sh of two versions sourced?)"))
    if cann is None:
        looked = ", ".join(inv.searched[:4]) + (" ..." if len(inv.searched) > 4 else "")
        need = (f"torch_npu {release.torch_npu} needs CANN {release.cann}; "
                if release is not None and release.cann else "")
        add(Finding("cann", EnvStatus.ABSENT, f"{need}no CANN install found (looked in {looked})"))
    else:
        where = f"CANN {cann.version} ({cann.kind}, {cann.root})"
        known = {r.cann.upper() for r in cat.releases if r.cann}
        if release is not None and release.cann:
            add(_cann_pairing(cat, release, cann.version, where))
        elif release is not None:
            add(Finding("cann", EnvStatus.WARNING, f"{where}: the matrix names no CANN version for "
                                           f"torch_npu {release.torch_npu}"))
        elif not any(same_cann(cann.version, k) for k in known):
            add(Finding("cann", EnvStatus.WARNING, f"{where} is not in the release matrix"))
        else:
            add(Finding("cann", EnvStatus.OK, f"{where} is in the release matrix"))
        if cann.origin == "default" and not any(
                v in inv.environment for v in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")):
            add(Finding("cann", EnvStatus.WARNING,
                        f"CANN is installed but set_env.sh is not sourced in this shell "
                        f"(ASCEND_HOME_PATH unset): source {set_env_script(Path(cann.root))}"))
        others = sorted({c.version for c in inv.cann_installs
                         if not same_cann(c.version, cann.version)})
        if others:
            add(Finding("cann", EnvStatus.OK, f"other CANN versions installed: {', '.join(others)} "
                                      f"(the active one is {cann.version})"))
    return f


def _python_findings(inv: Inventory, release: ReleaseInfo | None) -> list[Finding]:
    """Python against what the release supports."""
    f: list[Finding] = []
    add = f.append
    py = inv.python_minor
    if release is not None:
        sup = _supports_python(release, py)
        if sup is None:
            add(Finding("python", EnvStatus.WARNING, f"the matrix lists no Python versions for "
                                             f"torch_npu {release.torch_npu}"))
        elif sup:
            add(Finding("python", EnvStatus.OK, f"Python {py} is supported by torch_npu {release.torch_npu}"))
        else:
            add(Finding("python", EnvStatus.MISMATCH,
                        f"torch_npu {release.torch_npu} supports Python "
                        f"{', '.join(_pythons(release))}; this is Python {py}"))
    return f


def _device_findings(inv: Inventory) -> list[Finding]:
    """Driver, firmware, devices: not in the release matrix, so reported, not paired."""
    f: list[Finding] = []
    add = f.append
    smi = inv.npu_smi
    if smi is not None and smi.error:
        add(Finding("npu", EnvStatus.WARNING, f"npu-smi info failed ({smi.error})"))
    if inv.driver is None:
        add(Finding("driver", EnvStatus.ABSENT,
                    "no NPU driver (no npu-smi, no driver/version.info): no NPU on this machine"))
    else:
        add(Finding("driver", EnvStatus.OK, f"driver {inv.driver.version} (from {inv.driver.source})"))
        fd = inv.driver_file
        if fd is not None and fd.version.lower() != inv.driver.version.lower():
            add(Finding("driver", EnvStatus.WARNING,
                        f"loaded driver is {inv.driver.version} but {fd.source} says "
                        f"{fd.version} (reboot pending after a driver upgrade?)"))
    if inv.firmware is None:
        add(Finding("firmware", EnvStatus.ABSENT, "no NPU firmware version file"))
    else:
        add(Finding("firmware", EnvStatus.OK, f"firmware {inv.firmware.version} (from {inv.firmware.source})"))
    if smi is not None and smi.chips:
        counts: dict[str, int] = {}
        for c in smi.chips:
            counts[c] = counts.get(c, 0) + 1
        add(Finding("npu", EnvStatus.OK, f"{len(smi.chips)} NPU(s): "
                    + ", ".join(f"{n} × {c}" for c, n in counts.items())))
    elif inv.devices:
        add(Finding("npu", EnvStatus.OK, f"{len(inv.devices)} device node(s) /dev/davinci*"))
    elif smi is None or not smi.error:
        add(Finding("npu", EnvStatus.ABSENT, "no NPU found (no npu-smi chips, no /dev/davinci*)"))
    return f


def assess(inv: Inventory, cat: Catalog) -> Assessment:
    release = find_release(cat, inv.torch_npu.version) if inv.torch_npu else None
    findings = tuple([*_torch_npu_findings(inv, release), *_torch_findings(inv, cat, release),
                      *_cann_findings(inv, cat, release), *_python_findings(inv, release),
                      *_device_findings(inv),
                      *(Finding("files", EnvStatus.WARNING, p) for p in inv.problems)])
    return Assessment(inv, release, findings, recommend(inv, cat, release, findings))


def summary(inv: Inventory) -> dict[str, str]:
    """component → version, for reports (absent things say so)."""

    def ver(found: Found | None) -> str:
        return found.version if found else "not found"

    chips = ", ".join(inv.npu_smi.chips) if inv.npu_smi and inv.npu_smi.chips else ""
    return {
        "Python": f"{inv.python} ({inv.implementation})",
        "OS / arch": f"{inv.os_name} / {inv.arch}",
        "torch": ver(inv.torch),
        "torch_npu": inv.torch_npu.version if inv.torch_npu else "not installed",
        "CANN": inv.cann.version if inv.cann else "not found",
        "driver": ver(inv.driver or inv.driver_file),
        "firmware": ver(inv.firmware),
        "NPUs": chips or (f"{len(inv.devices)} device(s)" if inv.devices else "none"),
    }
