"""``opcheck env``: what is installed on this machine, checked against the release matrix.

:func:`collect` takes the inventory (Python, OS/arch, torch and torch_npu from package metadata,
CANN from its install-root version files and the ``ASCEND_*`` variables, driver and firmware
from ``npu-smi`` and their ``version.info`` files). It never imports torch or torch_npu and
never raises for a missing or unreadable piece: absent things are ``None``, files it could not
read land in ``Inventory.problems``. Every outside dependency is a parameter so tests run on
fake directory trees and fake command runners.

:func:`assess` checks the inventory against a catalog's release matrix (torch_npu ↔ torch ↔
CANN ↔ Python) and recommends the combination to install: the release that keeps the most of
what is installed, weighing CANN (a system install) over torch over torch_npu.

JSON shape of :meth:`Assessment.to_json` (``schema_version`` 1)::

    {
      "schema_version": 1,
      "consistent": bool,                    # no finding has status "mismatch"
      "inventory": {
        "python": {"version": "3.11.4", "implementation": "CPython"},
        "os": {"name": "Ubuntu 22.04.4 LTS", "arch": "x86_64"},
        "torch": Found | null, "torch_npu": Found | null,
        "cann": CannInstall | null,          # the active install (env vars first)
        "cann_installs": [CannInstall, ...], # every install found
        "driver": Found | null, "firmware": Found | null,
        "npu_smi": {"path", "driver_version", "chips": [str], "error"} | null,
        "devices": ["davinci0", ...],
        "environment": {"ASCEND_HOME_PATH": "...", ...},
        "problems": [str]                    # files that exist but could not be read
      },
      "release": {"torch_npu", "torch", "train", "cann", "pythons": [str]} | null,
      "findings": [{"check": str, "status": "ok|mismatch|warning|absent", "message": str}],
      "recommendation": {
        "needed": bool, "reason": str,
        "combinations": [{"torch_npu", "torch", "cann", "train", "pythons": [str],
                          "keeps": [str], "changes": [str]}]
      }
    }
    Found = {"version": str, "source": str}
    CannInstall = {"version", "kind": "toolkit|nnae", "root", "source", "origin"}
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from opcheck.core.versions import release_key, torch_minor
from opcheck.db.catalog import Catalog, ReleaseInfo

SCHEMA_VERSION = 1
STATUSES = ("ok", "mismatch", "warning", "absent")

# set_env.sh exports these; the first one set and pointing at a directory wins.
CANN_ENV_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH")
NPU_SMI_TIMEOUT = 20.0


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str = ""


Runner = Callable[[Sequence[str]], CommandResult]
Which = Callable[[str], str | None]
MetadataVersion = Callable[[str], str]


def run_command(argv: Sequence[str]) -> CommandResult:
    """The default runner: never raises, a failure to start or a hang is a non-zero result."""
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, errors="replace",
                           timeout=NPU_SMI_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return CommandResult(-1, "", f"timed out after {NPU_SMI_TIMEOUT:.0f}s")
    except OSError as exc:
        return CommandResult(-1, "", str(exc))
    return CommandResult(p.returncode, p.stdout, p.stderr)


def _default_ascend_bases() -> tuple[Path, ...]:
    # Root installs go to /usr/local/Ascend, non-root ones to ~/Ascend.
    try:
        return (Path("/usr/local/Ascend"), Path.home() / "Ascend")
    except RuntimeError:  # no HOME and no passwd entry (some containers)
        return (Path("/usr/local/Ascend"),)


@dataclass(frozen=True)
class EnvRoots:
    """Where to look. Defaults are the real locations; tests point them into tmp_path."""

    ascend: tuple[Path, ...] = field(default_factory=_default_ascend_bases)
    os_release: Path = Path("/etc/os-release")
    dev: Path = Path("/dev")


@dataclass(frozen=True)
class Found:
    version: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"version": self.version, "source": self.source}


@dataclass(frozen=True)
class CannInstall:
    version: str
    kind: str  # toolkit | nnae
    root: str
    source: str  # the file the version was read from
    origin: str  # the env var that named the root, or "default"

    def to_json(self) -> dict[str, str]:
        return {"version": self.version, "kind": self.kind, "root": self.root,
                "source": self.source, "origin": self.origin}


@dataclass(frozen=True)
class NpuSmi:
    path: str
    driver_version: str = ""
    chips: tuple[str, ...] = ()
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "driver_version": self.driver_version,
                "chips": list(self.chips), "error": self.error}


@dataclass
class Inventory:
    python: str
    implementation: str
    os_name: str
    arch: str
    torch: Found | None = None
    torch_npu: Found | None = None
    cann: CannInstall | None = None
    cann_installs: list[CannInstall] = field(default_factory=list)
    driver: Found | None = None
    driver_file: Found | None = None  # version.info, kept apart to spot a pending reboot
    firmware: Found | None = None
    npu_smi: NpuSmi | None = None
    devices: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # env vars naming a CANN root that does not exist: (var, value)
    stale_env: list[tuple[str, str]] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)

    @property
    def python_minor(self) -> str:
        return ".".join(self.python.split(".")[:2])

    def to_json(self) -> dict[str, Any]:
        def opt(x: Found | CannInstall | NpuSmi | None) -> Any:
            return x.to_json() if x is not None else None

        return {
            "python": {"version": self.python, "implementation": self.implementation},
            "os": {"name": self.os_name, "arch": self.arch},
            "torch": opt(self.torch),
            "torch_npu": opt(self.torch_npu),
            "cann": opt(self.cann),
            "cann_installs": [c.to_json() for c in self.cann_installs],
            "driver": opt(self.driver),
            "firmware": opt(self.firmware),
            "npu_smi": opt(self.npu_smi),
            "devices": list(self.devices),
            "environment": dict(self.environment),
            "problems": list(self.problems),
        }


# --- reading files ----------------------------------------------------------------------------

def _read(path: Path, problems: list[str]) -> str | None:
    """A text file's content; None when absent, and a problem noted when present but unreadable."""
    try:
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        problems.append(f"cannot read {path}: {exc.strerror or exc.__class__.__name__}")
        return None


def parse_key_values(text: str) -> dict[str, str]:
    """``key=value`` lines (install.info, version.info, os-release); keys lower-cased."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            out.setdefault(key.strip().lower(), value.strip().strip('"').strip("'"))
    return out


_CFG_PAIR = re.compile(r"\[\s*([^:\]\s]+)\s*:\s*([^\]\s]+)\s*\]")


def parse_version_cfg(text: str) -> str:
    """``version.cfg``: ``toolkit_running_version=[7.1.0.3.220:8.0.RC1]`` → ``8.0.RC1``
    (the part after the colon is the release name; before it is an internal build number).
    Falls back to a plain ``version=`` line."""
    kv = parse_key_values(text)
    for key in ("toolkit_running_version", "runtime_running_version",
                "compiler_running_version", "opp_running_version"):
        m = _CFG_PAIR.search(kv.get(key, ""))
        if m:
            return m[2]
    for value in kv.values():
        m = _CFG_PAIR.search(value)
        if m:
            return m[2]
    return kv.get("version", "")


def _version_of(text: str) -> str:
    kv = parse_key_values(text)
    return kv.get("version") or kv.get("package_version") or ""


def _cann_version(root: Path, arch: str, problems: list[str]) -> tuple[str, str, str] | None:
    """(version, kind, source file) of the CANN install at ``root``, newest layout first."""
    arch_dirs = [root / f"{arch}-linux"]
    with contextlib.suppress(OSError):
        arch_dirs += sorted(p for p in root.glob("*-linux") if p not in arch_dirs)
    candidates: list[tuple[Path, str, Callable[[str], str]]] = []
    for d in arch_dirs:
        candidates.append((d / "ascend_toolkit_install.info", "toolkit", _version_of))
    candidates.append((root / "ascend_nnae_install.info", "nnae", _version_of))
    for d in arch_dirs:
        candidates.append((d / "ascend_nnae_install.info", "nnae", _version_of))
    candidates.append((root / "version.cfg", "toolkit", parse_version_cfg))
    candidates.append((root / "version.info", "toolkit", _version_of))
    for path, kind, parse in candidates:
        text = _read(path, problems)
        if text is None:
            continue
        version = parse(text)
        if version:
            return version, kind, str(path)
        problems.append(f"{path} names no version")
    return None


def _cann_roots(bases: Sequence[Path]) -> list[Path]:
    roots: list[Path] = []
    for base in bases:
        roots += [base / "ascend-toolkit" / "latest", base / "cann"]
        # Side-by-side versions (latest is a symlink to one of them) and CANN 8.5's cann-<v>.
        for pattern in ("ascend-toolkit/*", "cann-*"):
            try:
                roots += sorted(p for p in base.glob(pattern)
                                if _is_dir(p) and p.name not in ("latest", "set_env.sh"))
            except OSError:
                continue
        roots.append(base / "nnae" / "latest")
    return roots


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:  # a root we may not stat is as good as absent
        return False


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _collect_cann(inv: Inventory, roots: EnvRoots, environ: Mapping[str, str]) -> None:
    env_roots: list[tuple[str, Path]] = []
    for var in CANN_ENV_VARS:
        value = environ.get(var, "").strip()
        if not value:
            continue
        root = Path(value)
        if var == "ASCEND_OPP_PATH":
            # Only the toolkit's own <root>/opp says where CANN is; a custom OPP dir does not.
            if root.name != "opp":
                continue
            root = root.parent
        if not _is_dir(root):
            inv.stale_env.append((var, value))
            continue
        env_roots.append((var, root))
    seen: list[Path] = []
    for origin, root in [*env_roots, *(("default", r) for r in _cann_roots(roots.ascend))]:
        if any(_same(root, s) for s in seen):
            continue
        inv.searched.append(str(root))
        if not _is_dir(root):
            continue
        seen.append(root)
        found = _cann_version(root, inv.arch, inv.problems)
        if found is None:
            if origin != "default":
                inv.problems.append(f"{origin}={root}: no CANN version file found there")
            continue
        version, kind, source = found
        inv.cann_installs.append(CannInstall(version, kind, str(root), source, origin))
    if inv.cann_installs:
        # Env vars say which CANN set_env.sh loaded; without them, the toolkit's `latest`
        # (first in search order) is the one a `source set_env.sh` would load.
        inv.cann = inv.cann_installs[0]


_NPU_SMI_HEADER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)", re.IGNORECASE)
_HEALTH = {"ok", "warning", "alarm", "critical", "unknown"}


def parse_npu_smi(text: str) -> tuple[str, tuple[str, ...]]:
    """Driver version and chip names (one per NPU) from ``npu-smi info``."""
    m = _NPU_SMI_HEADER.search(text)
    driver = m[2] if m else ""
    chips: list[str] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        # A device row is "| <npu id>  <chip name> | <health> | ..."; the second row of each
        # device and the process table start with numbers and have no health cell.
        row = re.fullmatch(r"(\d+)\s+(\S+)", cells[0])
        health = cells[1].split()[0].lower() if cells[1].split() else ""
        if row and not row[2].isdigit() and health in _HEALTH:
            chips.append(row[2])
    return driver, tuple(chips)


def _version_file(path: Path, problems: list[str]) -> Found | None:
    """``Version=...`` from a driver or firmware version.info; unreadable files are noted."""
    text = _read(path, problems)
    if text is None:
        return None
    v = _version_of(text)
    if not v:
        problems.append(f"{path} names no version")
        return None
    return Found(v, str(path))


def _collect_npu(inv: Inventory, roots: EnvRoots, which: Which, run: Runner) -> None:
    for base in roots.ascend:
        if inv.driver_file is None:
            inv.driver_file = _version_file(base / "driver" / "version.info", inv.problems)
        if inv.firmware is None:
            inv.firmware = _version_file(base / "firmware" / "version.info", inv.problems)
    exe = which("npu-smi")
    if exe:
        try:
            res = run([exe, "info"])
        except Exception as exc:  # an injected runner may raise anything; report, never crash
            res = CommandResult(-1, "", f"{exc.__class__.__name__}: {exc}")
        driver, chips = parse_npu_smi(res.stdout)
        err = ""
        if res.returncode != 0:
            first = (res.stderr.strip() or res.stdout.strip()).splitlines()
            err = f"exit {res.returncode}" + (f": {first[0][:200]}" if first else "")
        inv.npu_smi = NpuSmi(exe, driver, chips, err)
        if driver:
            inv.driver = Found(driver, f"{exe} info")
    if inv.driver is None:
        inv.driver = inv.driver_file
    try:
        inv.devices = sorted((p.name for p in roots.dev.glob("davinci*")
                              if re.fullmatch(r"davinci\d+", p.name)),
                             key=lambda n: int(n[7:]))
    except OSError:
        inv.devices = []


def _os_name(path: Path, problems: list[str]) -> str:
    text = _read(path, problems)
    if text:
        kv = parse_key_values(text)
        name = kv.get("pretty_name") or " ".join(x for x in (kv.get("name"), kv.get("version_id")) if x)
        if name:
            return name
    return f"{platform.system()} {platform.release()}".strip()


def _package(name: str, metadata_version: MetadataVersion, problems: list[str]) -> Found | None:
    # torch_npu's distribution is "torch-npu" on PyPI; older metadata lookups did not normalise.
    for dist in dict.fromkeys((name, name.replace("_", "-"))):
        try:
            return Found(metadata_version(dist), f"importlib.metadata ({dist})")
        except importlib.metadata.PackageNotFoundError:
            continue
        except Exception as exc:  # broken dist-info must not stop the inventory
            problems.append(f"cannot read the {dist} package metadata: {exc.__class__.__name__}")
            return None
    return None


def collect(
    *,
    roots: EnvRoots | None = None,
    environ: Mapping[str, str] = os.environ,
    which: Which = shutil.which,
    run: Runner = run_command,
    metadata_version: MetadataVersion = importlib.metadata.version,
    python: str | None = None,
    implementation: str | None = None,
    machine: str | None = None,
) -> Inventory:
    """The machine's inventory. Never imports torch/torch_npu; never raises for what is absent."""
    roots = roots or EnvRoots()
    problems: list[str] = []
    inv = Inventory(
        python=python or platform.python_version(),
        implementation=implementation or platform.python_implementation(),
        os_name=_os_name(roots.os_release, problems),
        arch=machine or platform.machine(),
        problems=problems,
    )
    inv.torch = _package("torch", metadata_version, problems)
    inv.torch_npu = _package("torch_npu", metadata_version, problems)
    inv.environment = {k: v for k, v in sorted(environ.items()) if k.startswith("ASCEND_")}
    _collect_cann(inv, roots, environ)
    _collect_npu(inv, roots, which, run)
    return inv


# --- assessment ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    check: str  # python | torch | torch_npu | cann | driver | firmware | npu | files
    status: str  # one of STATUSES
    message: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status, "message": self.message}


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
        return not any(f.status == "mismatch" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        r = self.release
        return {
            "schema_version": SCHEMA_VERSION,
            "consistent": self.consistent,
            "inventory": self.inventory.to_json(),
            "release": None if r is None else {
                "torch_npu": r.torch_npu, "torch": r.torch, "train": r.train, "cann": r.cann,
                "pythons": _pythons(r)},
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


def same_cann(a: str, b: str) -> bool:
    from opcheck.checker.queries import normalise_cann

    return bool(a and b) and normalise_cann(a).upper() == normalise_cann(b).upper()


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
    if release is not None and complete and not any(f.status == "mismatch" for f in findings):
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


def assess(inv: Inventory, cat: Catalog) -> Assessment:
    f: list[Finding] = []
    add = f.append
    release = find_release(cat, inv.torch_npu.version) if inv.torch_npu else None
    py = inv.python_minor
    cann = inv.cann

    # torch_npu and what it pairs with
    if inv.torch_npu is None:
        add(Finding("torch_npu", "absent", "torch_npu is not installed"))
    elif release is None:
        add(Finding("torch_npu", "warning",
                    f"torch_npu {inv.torch_npu.version} is not in the release matrix "
                    "(a source build, or a catalog older than the release): cannot check pairings"))
    else:
        add(Finding("torch_npu", "ok",
                    f"torch_npu {inv.torch_npu.version} is in the release matrix (train "
                    f"{release.train or '?'}: torch {release.torch}, CANN {release.cann or '?'})"))

    if inv.torch is None:
        status = "mismatch" if inv.torch_npu is not None else "absent"
        add(Finding("torch", status, "torch is not installed"
                    + (f" (torch_npu {release.torch_npu} needs torch {release.torch})"
                       if release is not None else "")))
    elif release is not None:
        if same_torch(inv.torch.version, release.torch):
            add(Finding("torch", "ok", f"torch {inv.torch.version} is the torch torch_npu "
                                       f"{release.torch_npu} is built for"))
        else:
            add(Finding("torch", "mismatch",
                        f"torch_npu {release.torch_npu} is built for torch {release.torch}, "
                        f"installed torch is {inv.torch.version}"))
    else:
        exact = [r for r in cat.releases if same_torch(inv.torch.version, r.torch)]
        if exact:
            add(Finding("torch", "ok", f"torch {inv.torch.version} has torch_npu releases "
                                       f"(newest {exact[-1].torch_npu})"))
        else:
            near = [r for r in cat.releases if _same_minor(inv.torch.version, r.torch)]
            hint = f" (same minor: torch {near[-1].torch} → torch_npu {near[-1].torch_npu})" if near else ""
            add(Finding("torch", "warning",
                        f"no torch_npu release in the matrix is built for torch "
                        f"{inv.torch.version}{hint}"))

    # CANN
    for var, value in inv.stale_env:
        add(Finding("cann", "warning", f"{var}={value} does not exist (stale set_env.sh?)"))
    env_roots = {c.root for c in inv.cann_installs if c.origin != "default"}
    if len(env_roots) > 1:
        add(Finding("cann", "warning", "ASCEND_* variables point at different CANN installs: "
                    + ", ".join(sorted(env_roots)) + " (set_env.sh of two versions sourced?)"))
    if cann is None:
        looked = ", ".join(inv.searched[:4]) + (" ..." if len(inv.searched) > 4 else "")
        need = (f"torch_npu {release.torch_npu} needs CANN {release.cann}; "
                if release is not None and release.cann else "")
        add(Finding("cann", "absent", f"{need}no CANN install found (looked in {looked})"))
    else:
        where = f"CANN {cann.version} ({cann.kind}, {cann.root})"
        known = {r.cann.upper() for r in cat.releases if r.cann}
        if release is not None and release.cann:
            if same_cann(cann.version, release.cann):
                add(Finding("cann", "ok", f"{where} pairs with torch_npu {release.torch_npu}"))
            else:
                add(Finding("cann", "mismatch",
                            f"torch_npu {release.torch_npu} pairs with CANN {release.cann} "
                            f"(train {release.train}), installed is {where}"))
        elif release is not None:
            add(Finding("cann", "warning", f"{where}: the matrix names no CANN version for "
                                           f"torch_npu {release.torch_npu}"))
        elif not any(same_cann(cann.version, k) for k in known):
            add(Finding("cann", "warning", f"{where} is not in the release matrix"))
        else:
            add(Finding("cann", "ok", f"{where} is in the release matrix"))
        if cann.origin == "default" and not any(
                v in inv.environment for v in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")):
            add(Finding("cann", "warning",
                        f"CANN is installed but set_env.sh is not sourced in this shell "
                        f"(ASCEND_HOME_PATH unset): source {_set_env(Path(cann.root))}"))
        others = sorted({c.version for c in inv.cann_installs
                         if not same_cann(c.version, cann.version)})
        if others:
            add(Finding("cann", "ok", f"other CANN versions installed: {', '.join(others)} "
                                      f"(the active one is {cann.version})"))

    # Python
    if release is not None:
        sup = _supports_python(release, py)
        if sup is None:
            add(Finding("python", "warning", f"the matrix lists no Python versions for "
                                             f"torch_npu {release.torch_npu}"))
        elif sup:
            add(Finding("python", "ok", f"Python {py} is supported by torch_npu {release.torch_npu}"))
        else:
            add(Finding("python", "mismatch",
                        f"torch_npu {release.torch_npu} supports Python "
                        f"{', '.join(_pythons(release))}; this is Python {py}"))

    # Driver, firmware, devices: not in the release matrix, so reported, not paired.
    smi = inv.npu_smi
    if smi is not None and smi.error:
        add(Finding("npu", "warning", f"npu-smi info failed ({smi.error})"))
    if inv.driver is None:
        add(Finding("driver", "absent",
                    "no NPU driver (no npu-smi, no driver/version.info): no NPU on this machine"))
    else:
        add(Finding("driver", "ok", f"driver {inv.driver.version} (from {inv.driver.source})"))
        fd = inv.driver_file
        if fd is not None and fd.version.lower() != inv.driver.version.lower():
            add(Finding("driver", "warning",
                        f"loaded driver is {inv.driver.version} but {fd.source} says "
                        f"{fd.version} (reboot pending after a driver upgrade?)"))
    if inv.firmware is None:
        add(Finding("firmware", "absent", "no NPU firmware version file"))
    else:
        add(Finding("firmware", "ok", f"firmware {inv.firmware.version} (from {inv.firmware.source})"))
    if smi is not None and smi.chips:
        counts: dict[str, int] = {}
        for c in smi.chips:
            counts[c] = counts.get(c, 0) + 1
        add(Finding("npu", "ok", f"{len(smi.chips)} NPU(s): "
                    + ", ".join(f"{n} × {c}" for c, n in counts.items())))
    elif inv.devices:
        add(Finding("npu", "ok", f"{len(inv.devices)} device node(s) /dev/davinci*"))
    elif smi is None or not smi.error:
        add(Finding("npu", "absent", "no NPU found (no npu-smi chips, no /dev/davinci*)"))

    for p in inv.problems:
        add(Finding("files", "warning", p))

    findings = tuple(f)
    return Assessment(inv, release, findings, recommend(inv, cat, release, findings))


def _set_env(root: Path) -> str:
    for p in (root / "set_env.sh", root.parent / "set_env.sh"):
        try:
            if p.is_file():
                return str(p)
        except OSError:
            continue
    return str(root / "set_env.sh")


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
