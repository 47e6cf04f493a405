"""Wheel members read from the published torch_npu wheel (``pip download``), for
``pypi/torch-npu/<version>/<member>`` paths."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin, WheelFacts
from opcheck.sync.sources import Fetched, clean_path, decode

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=600, check=False)


_PYPI = re.compile(r"^pypi/(?P<pkg>[^/]+)/(?P<version>[^/]+)(?:/(?P<member>.*))?$")
WHEEL_FACTS = "WHEEL-FACTS.txt"


class PipWheelSource:
    """``pypi/torch-npu/<version>/<member>`` read from the published wheel.

    The wheel comes from ``python -m pip download`` so the user's index and mirror
    configuration applies (offline sites point pip at an internal mirror); no index URL is
    ever named here.  Only the requested zip members are read, nothing is installed.
    """

    def __init__(
        self,
        cache_dir: Path,
        *,
        runner: Runner | None = None,
        platforms: Sequence[str] = ("manylinux2014_aarch64", "manylinux2014_x86_64"),
        python_versions: Sequence[str] | None = None,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.name = "pip download"
        self._runner = runner or _run
        self.platforms = tuple(platforms)
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        # torch-npu builds a few CPython versions per release; older ones lack the newest.
        self.python_versions = tuple(python_versions or dict.fromkeys((here, "3.10", "3.9", "3.8")))
        self._lock = threading.Lock()

    def _split(self, path: str) -> tuple[str, str, str]:
        m = _PYPI.match(clean_path(path))
        if not m or m["pkg"] != "torch-npu":
            raise ScrapeError("not a pypi/torch-npu/<version>/<member> path", source=path)
        return m["pkg"], m["version"], m["member"] or ""

    def wheel(self, version: str) -> Path:
        """The cached wheel for ``version``, downloading it on first use."""
        if not re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version):
            raise ScrapeError(f"not a version: {version!r}", source=f"pypi/torch-npu/{version}")
        dest = self.cache_dir / "torch-npu" / version
        with self._lock:
            found = sorted(dest.glob("torch_npu-*.whl"))
            if found:
                return found[0]
            dest.mkdir(parents=True, exist_ok=True)
            last = ""
            for platform in self.platforms:
                for py in self.python_versions:
                    cmd = [
                        sys.executable, "-m", "pip", "download", "--no-deps",
                        "--only-binary=:all:", "--platform", platform, "--python-version", py,
                        "--disable-pip-version-check", "-d", str(dest), f"torch-npu=={version}",
                    ]  # fmt: skip
                    proc = self._runner(cmd)
                    found = sorted(dest.glob("torch_npu-*.whl"))
                    if proc.returncode == 0 and found:
                        return found[0]
                    lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
                    last = lines[-1].strip() if lines else f"exit code {proc.returncode}"
            raise ScrapeError(
                f"pip download torch-npu=={version} failed: {last}",
                source=f"pypi/torch-npu/{version}",
            )

    def _read_member(self, whl: Path, member: str, source: str) -> bytes:
        try:
            with zipfile.ZipFile(whl) as z:
                if member == WHEEL_FACTS:
                    return _wheel_facts_text(z, source).encode()
                try:
                    return z.read(member)
                except KeyError:
                    raise ScrapeError(f"no member {member} in {whl.name}", source=source) from None
        except zipfile.BadZipFile as e:
            raise ScrapeError(f"bad wheel {whl.name}: {e}", source=source) from None

    def fetch(self, path: str) -> Fetched:
        _, version, member = self._split(path)
        clean = clean_path(path)
        if not member:
            raise ScrapeError("path names a wheel, not a member", source=clean)
        whl = self.wheel(version)
        data = self._read_member(whl, member, clean)
        return Fetched(
            decode(data, clean),
            Origin(path=clean, url=f"pip:torch-npu=={version}#{member}", ref=version,
                   sha256=hashlib.sha256(data).hexdigest()),
        )  # fmt: skip

    def exists(self, path: str) -> bool:
        _, version, member = self._split(path)
        try:
            with zipfile.ZipFile(self.wheel(version)) as z:
                return member == WHEEL_FACTS or member in z.namelist()
        except ScrapeError:
            return False

    def list_dir(self, path: str) -> list[str]:
        _, version, member = self._split(path)
        prefix = member.strip("/") + "/" if member.strip("/") else ""
        with zipfile.ZipFile(self.wheel(version)) as z:
            names = {
                n[len(prefix) :].split("/", 1)[0] for n in z.namelist() if n.startswith(prefix)
            }
        if not prefix:
            names.add(WHEEL_FACTS)
        return sorted(n for n in names if n)

    def wheel_facts(self, version: str) -> WheelFacts:
        """Version, pinned torch and git commit of a published wheel."""
        src = f"pypi/torch-npu/{version}"
        text = self.fetch(f"{src}/{WHEEL_FACTS}").text
        from opcheck.scrapers.wheel import parse_version_py, parse_wheel_facts, wheel_facts

        origin = Origin(path=f"{src}/{WHEEL_FACTS}")
        facts = parse_wheel_facts(text, origin=origin)
        try:
            got = self.fetch(f"{src}/torch_npu/version.py")
        except ScrapeError:
            return facts  # old wheels carry no version.py; METADATA is enough
        return wheel_facts(facts, version_py=parse_version_py(got.text, origin=got.origin),
                           origin=origin)


def _wheel_facts_text(z: zipfile.ZipFile, source: str) -> str:
    """The ``Version:`` and torch ``Requires-Dist:`` lines of METADATA (as the mirror stores)."""
    metas = [n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if not metas:
        raise ScrapeError("wheel has no *.dist-info/METADATA", source=source)
    meta = decode(z.read(metas[0]), source)
    keep: list[str] = []
    for line in meta.split("\n\n", 1)[0].splitlines():
        if line.startswith("Version:") or re.match(r"Requires-Dist:\s*torch\b(?![-_])", line):
            keep.append(line.rstrip())
    return "\n".join(keep) + "\n"
