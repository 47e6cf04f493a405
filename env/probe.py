"""What is installed on this machine: Python, OS/arch, torch, torch_npu, CANN, driver, NPUs.

:func:`collect` takes the inventory (Python, OS/arch, torch and torch_npu from package metadata,
CANN from its install-root version files and the ``ASCEND_*`` variables, driver and firmware
from ``npu-smi`` and their ``version.info`` files). It never imports torch or torch_npu and
never raises for a missing or unreadable piece: absent things are ``None``, files it could not
read land in ``Inventory.problems``. Every outside dependency is a parameter so tests run on
fake directory trees and fake command runners.

Nothing here knows the release matrix: :mod:`opcheck.env.assess` judges the inventory.
``Inventory.to_json`` is the ``inventory`` member of ``opcheck env --format json``::

    {
      "python": {"version": "3.11.4", "implementation": "CPython"},
      "os": {"name": "Ubuntu 22.04.4 LTS", "arch": "x86_64"},
      "torch": Found | null, "torch_npu": Found | null,
      "cann": CannInstall | null,          # the active install (env vars first)
      "cann_installs": [CannInstall, ...], # every install found
      "driver": Found | null, "firmware": Found | null,
      "npu_smi": {"path", "driver_version", "chips": [str], "error"} | null,
      "devices": ["davinci0", ...],
      "environment": {"ASCEND_HOME_PATH": "...", ...},
      "problems": [str],                   # files that exist but could not be read
      "torch_build": "cuda" | "cpu" | "",  # from torch's version (+cu121, +cpu), nvidia-* deps
      "cuda_present": bool,                # nvidia-smi on PATH or /dev/nvidiactl
      "project_torch": str,                # opcheck's own .venv: the torch constraints.txt pins
      "project_constraints": str           # ... and that file ("" elsewhere)
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
MetadataRequires = Callable[[str], list[str] | None]
# `make install` pins the torch of opcheck's own environment here (the repository root)
CONSTRAINTS = "constraints.txt"


# the variables besides ASCEND_* that the profiling advisor checks for speed (`opcheck env`
# judges them with the advisor's rules)
SPEED_VARIABLES = frozenset({"TASK_QUEUE_ENABLE", "PYTORCH_NPU_ALLOC_CONF", "ACLNN_CACHE_LIMIT",
                             "HOST_CACHE_CAPACITY", "HCCL_ALGO"})


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
    # the installed torch's build: "cuda" (a +cuXXX version or nvidia-* requirements),
    # "cpu" (+cpu), "" (neither: a build for another device, or unknown)
    torch_build: str = ""
    cuda_present: bool = False  # nvidia-smi on PATH or /dev/nvidiactl
    # when this is opcheck's own environment (`make install`'s .venv): the torch pin of
    # its constraints file, and that file
    project_torch: str = ""
    project_constraints: str = ""

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
            "torch_build": self.torch_build,
            "cuda_present": self.cuda_present,
            "project_torch": self.project_torch,
            "project_constraints": self.project_constraints,
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


def torch_build(version: str, requires: Sequence[str]) -> str:
    """``cuda``, ``cpu`` or ``""`` from the torch distribution's version and requirements."""
    local = version.partition("+")[2].lower()
    if local.startswith("cu") or any(r.lower().startswith("nvidia-") for r in requires):
        return "cuda"
    return "cpu" if local == "cpu" else ""


def constraint_pin(text: str, name: str) -> str:
    """``torch==2.13.0`` in a pip constraints file → ``2.13.0`` (the first exact pin)."""
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(rf"^{re.escape(name)}\s*===?\s*([\w.+!-]+)", line, re.IGNORECASE)
        if m:
            return m.group(1)
    return ""


def project_constraints(prefix: str | None = None) -> Path | None:
    """opcheck's constraints file when this Python is ``make install``'s ``.venv`` of the
    checkout opcheck runs from (never for an opcheck installed into another environment)."""
    import sys

    root = Path(__file__).resolve().parent.parent
    venv = root / ".venv"
    try:
        here = Path(prefix or sys.prefix).resolve()
        if here == venv.resolve() and (root / CONSTRAINTS).is_file():
            return root / CONSTRAINTS
    except OSError:
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
    metadata_requires: MetadataRequires | None = None,
    constraints: Path | bool = True,
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
    # a faked package inventory (tests) is not this environment: neither this torch's
    # requirements nor opcheck's own pin apply to it unless given
    real = metadata_version is importlib.metadata.version
    if metadata_requires is None:
        metadata_requires = importlib.metadata.requires if real else (lambda _name: [])
    if inv.torch is not None:
        try:
            requires = metadata_requires("torch") or []
        except Exception:  # broken metadata: the version alone decides
            requires = []
        inv.torch_build = torch_build(inv.torch.version, requires)
    inv.cuda_present = bool(which("nvidia-smi")) or _exists(roots.dev / "nvidiactl")
    # constraints: True = opcheck's own file when this Python is its .venv; a Path = that file
    path = ((project_constraints() if real else None) if constraints is True
            else constraints if isinstance(constraints, Path) else None)
    if isinstance(path, Path):
        text = _read(path, problems)
        if text is not None:
            inv.project_torch = constraint_pin(text, "torch")
            inv.project_constraints = str(path)
    inv.environment = {k: v for k, v in sorted(environ.items())
                       if k.startswith("ASCEND_") or k in SPEED_VARIABLES}
    _collect_cann(inv, roots, environ)
    _collect_npu(inv, roots, which, run)
    return inv


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def set_env_script(root: Path) -> str:
    """The ``set_env.sh`` that loads the CANN install at ``root`` (where it would be if absent)."""
    for p in (root / "set_env.sh", root.parent / "set_env.sh"):
        try:
            if p.is_file():
                return str(p)
        except OSError:
            continue
    return str(root / "set_env.sh")
