"""Where upstream text comes from: a mirror directory, raw HTTP, or a pip-downloaded wheel.

Every source serves the same mirror-layout paths (``github/<owner>/<repo>/<ref>/<path>``,
``pypi/torch-npu/<version>/<member>``, ``releases.tsv``) so parsers never know how a text
was obtained, and an offline mirror is a drop-in replacement for the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import httpx

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.releases import parse_tag_name
from opcheck.scrapers.rows import Origin, WheelFacts


@dataclass(frozen=True)
class Fetched:
    text: str
    origin: Origin


class Source(Protocol):
    name: str

    def fetch(self, path: str) -> Fetched: ...

    def exists(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]: ...


def walk_files(source: Source, path: str, suffixes: tuple[str, ...] = (".md", ".html"), *,
               max_depth: int = 8, descend_dotted: bool = True,
               skip: tuple[str, ...] = (), depth: int = 0) -> list[str]:
    """Every file below ``path`` ending in ``suffixes`` (sources that cannot list give
    nothing). ``descend_dotted=False``: a name with a dot and another suffix is a file, not a
    folder (saves a listing per file on a mirror of source trees); ``skip``: folder names not
    descended into."""
    try:
        names = source.list_dir(path)
    except ScrapeError:
        return []
    out: list[str] = []
    for name in names:
        child = f"{path}/{name}"
        if name.endswith(suffixes):
            out.append(child)
        elif (depth < max_depth and name not in skip
              and (descend_dotted or "." not in name)):
            out += walk_files(source, child, suffixes, max_depth=max_depth,
                              descend_dotted=descend_dotted, skip=skip, depth=depth + 1)
    return out


def _clean_path(path: str) -> str:
    """Reject paths that could escape the mirror root; normalise separators."""
    p = PurePosixPath(path.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ScrapeError(f"not a mirror-relative path: {path!r}", source=path)
    return str(p)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ScrapeError(f"not UTF-8 text (byte {e.start})", source=source) from None


def split_github(path: str) -> tuple[str, str, str, str] | None:
    """``github/<owner>/<repo>/<ref>/<rest>`` → (owner, repo, ref, rest); None otherwise."""
    parts = path.split("/", 4)
    if len(parts) < 4 or parts[0] != "github":
        return None
    return parts[1], parts[2], parts[3], parts[4] if len(parts) == 5 else ""


def _ref_of(path: str) -> str:
    gh = split_github(path)
    if gh:
        return gh[2]
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "pypi":
        return parts[2]
    return ""


# --- mirror ------------------------------------------------------------------------------


MANIFEST = "MANIFEST.tsv"


class MirrorSource:
    """A directory in the upstream snapshot layout (``../shared/upstream``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.name = f"mirror {self.root}"
        self._commits: dict[str, tuple[str, str]] | None = None

    def _file(self, path: str) -> Path:
        return self.root / _clean_path(path)

    def _manifest(self) -> dict[str, tuple[str, str]]:
        """path → (commit, sha256) from MANIFEST.tsv, when the mirror has one."""
        if self._commits is None:
            self._commits = {}
            manifest = self.root / MANIFEST
            if manifest.is_file():
                for line in manifest.read_text(encoding="utf-8").splitlines()[1:]:
                    cells = line.split("\t")
                    if len(cells) >= 5:
                        self._commits[cells[0]] = (cells[3], cells[4])
        return self._commits

    def _commit(self, path: str) -> str:
        # MANIFEST.tsv resolves branch refs to the commit the snapshot was taken at.
        return self._manifest().get(path, ("", ""))[0]

    def fetch(self, path: str) -> Fetched:
        clean = _clean_path(path)
        f = self.root / clean
        if not f.is_file():
            raise ScrapeError(f"file not in mirror {self.root}", source=clean)
        data = f.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        commit, expected = self._manifest().get(clean, ("", ""))
        if expected and expected != digest:
            # A copy cut short by a failed transfer still parses more often than not.
            raise ScrapeError(
                f"content does not match the sha256 in {MANIFEST} (truncated or modified copy)",
                source=clean,
            )
        text = _decode(data, f"{self.root}/{clean}")
        origin = Origin(path=clean, ref=_ref_of(clean), commit=commit, sha256=digest)
        return Fetched(text, origin)

    def exists(self, path: str) -> bool:
        return self._file(path).is_file()

    def list_dir(self, path: str) -> list[str]:
        d = self._file(path) if path.strip("/") else self.root
        if not d.is_dir():
            raise ScrapeError(f"directory not in mirror {self.root}", source=path)
        return sorted(c.name for c in d.iterdir())


# --- pip wheel -----------------------------------------------------------------------------

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
        m = _PYPI.match(_clean_path(path))
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
        clean = _clean_path(path)
        if not member:
            raise ScrapeError("path names a wheel, not a member", source=clean)
        whl = self.wheel(version)
        data = self._read_member(whl, member, clean)
        return Fetched(
            _decode(data, clean),
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
    meta = _decode(z.read(metas[0]), source)
    keep: list[str] = []
    for line in meta.split("\n\n", 1)[0].splitlines():
        if line.startswith("Version:") or re.match(r"Requires-Dist:\s*torch\b(?![-_])", line):
            keep.append(line.rstrip())
    return "\n".join(keep) + "\n"


# --- HTTP ----------------------------------------------------------------------------------

_HOSTS = {
    "github": "https://raw.githubusercontent.com/{owner}/{repo}/{ref}/{rest}",
    "gitcode": "https://gitcode.com/{owner}/{repo}/raw/{ref}/{rest}",
}


class HttpSource:
    """Raw files over HTTP (GitHub raw by default, GitCode selectable), cached on disk.

    Retries 5xx answers and timeouts with exponential backoff, never a 404; revalidates
    cached files with ETag so repeated syncs cost one 304 per file.
    """

    def __init__(
        self,
        *,
        host: str = "github",
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        cache_dir: Path | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_concurrency: int = 4,
        wheels: PipWheelSource | None = None,
        sleep: Callable[[float], None] = time.sleep,
        api_base: str = "https://api.github.com",
    ) -> None:
        if host not in _HOSTS:
            raise ScrapeError(f"unknown host {host!r} (known: {', '.join(_HOSTS)})", source=host)
        self.host = host
        self.name = f"http {host}"
        self._client = client or httpx.Client(
            transport=transport, timeout=timeout, follow_redirects=True,
            headers={"User-Agent": "opcheck"},
        )  # fmt: skip
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.retries = retries
        self.backoff = backoff
        self._sem = threading.Semaphore(max_concurrency)
        self.wheels = wheels
        self._sleep = sleep
        self.api_base = api_base.rstrip("/")

    def url_for(self, path: str) -> str:
        gh = split_github(_clean_path(path))
        if not gh or not gh[3]:
            raise ScrapeError("not a github/<owner>/<repo>/<ref>/<path> path", source=path)
        owner, repo, ref, rest = gh
        return _HOSTS[self.host].format(owner=owner, repo=repo, ref=ref, rest=rest)

    # -- the request loop with cache and retries
    def _cache_files(self, url: str) -> tuple[Path, Path] | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(url.encode()).hexdigest()
        d = self.cache_dir / key[:2]
        return d / f"{key}.body", d / f"{key}.json"

    def get_bytes(self, url: str, *, accept: str | None = None) -> bytes:
        """GET ``url`` with cache, retries and truncation checks; errors name the URL."""
        files = self._cache_files(url)
        headers: dict[str, str] = {}
        if accept:
            headers["Accept"] = accept
        cached: bytes | None = None
        if files and files[0].is_file() and files[1].is_file():
            with contextlib.suppress(OSError, ValueError):
                meta = json.loads(files[1].read_text(encoding="utf-8"))
                cached = files[0].read_bytes()
                if meta.get("etag"):
                    headers["If-None-Match"] = str(meta["etag"])
        attempt = 0
        while True:
            try:
                with self._sem:
                    resp = self._client.get(url, headers=headers)
                    body = resp.content
            except httpx.TimeoutException:
                if attempt < self.retries:
                    self._sleep(self.backoff * 2**attempt)
                    attempt += 1
                    continue
                raise ScrapeError(f"timed out after {attempt + 1} attempts", source=url) from None
            except httpx.RemoteProtocolError as e:
                # httpx raises this when the connection closes before Content-Length bytes.
                raise ScrapeError(f"truncated or broken response: {e}", source=url) from None
            except httpx.TransportError as e:
                if attempt < self.retries:
                    self._sleep(self.backoff * 2**attempt)
                    attempt += 1
                    continue
                raise ScrapeError(f"connection failed: {e}", source=url) from None
            if resp.status_code == 304 and cached is not None:
                return cached
            if resp.status_code >= 500 and attempt < self.retries:
                self._sleep(self.backoff * 2**attempt)
                attempt += 1
                continue
            if resp.status_code == 404:
                raise ScrapeError("not found (HTTP 404)", source=url)
            if resp.status_code != 200:
                raise ScrapeError(f"HTTP {resp.status_code}", source=url)
            expected = resp.headers.get("Content-Length")
            encoded = resp.headers.get("Content-Encoding", "identity") != "identity"
            if expected and not encoded and expected.isdigit() and int(expected) != len(body):
                raise ScrapeError(
                    f"truncated download: {len(body)} of {expected} bytes", source=url
                )
            if files:
                files[0].parent.mkdir(parents=True, exist_ok=True)
                tmp = files[0].with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
                tmp.write_bytes(body)
                tmp.replace(files[0])
                files[1].write_text(
                    json.dumps({"url": url, "etag": resp.headers.get("ETag", "")}),
                    encoding="utf-8",
                )
            return body

    def get_json(self, url: str) -> Any:
        data = self.get_bytes(url, accept="application/vnd.github+json")
        try:
            return json.loads(data)
        except ValueError:
            raise ScrapeError("not JSON", source=url) from None

    # -- Source interface
    def fetch(self, path: str) -> Fetched:
        clean = _clean_path(path)
        if clean.startswith("pypi/"):
            if self.wheels is None:
                raise ScrapeError("pypi/ paths need a PipWheelSource (wheels=)", source=clean)
            return self.wheels.fetch(clean)
        if clean == "releases.tsv":
            return self._releases_tsv()
        url = self.url_for(clean)
        data = self.get_bytes(url)
        gh = split_github(clean)
        ref = gh[2] if gh else ""
        return Fetched(
            _decode(data, url),
            Origin(path=clean, url=url, ref=ref, sha256=hashlib.sha256(data).hexdigest()),
        )

    def exists(self, path: str) -> bool:
        try:
            self.fetch(path)
        except ScrapeError as e:
            if "HTTP 404" in str(e) or "no member" in str(e):
                return False
            raise
        return True

    def list_dir(self, path: str) -> list[str]:
        clean = _clean_path(path)
        gh = split_github(clean)
        if self.host != "github" or not gh:
            raise ScrapeError(f"listing not supported by {self.name}", source=clean)
        owner, repo, ref, rest = gh
        url = f"{self.api_base}/repos/{owner}/{repo}/contents/{rest}?ref={ref}"
        data = self.get_json(url)
        if not isinstance(data, list):
            raise ScrapeError("not a directory", source=url)
        return sorted(str(e["name"]) for e in data if isinstance(e, dict) and "name" in e)

    # -- releases.tsv from the GitHub API
    def _releases_tsv(self) -> Fetched:
        if self.host != "github":
            raise ScrapeError(
                f"releases.tsv cannot be built from {self.host}; use a mirror",
                source="releases.tsv",
            )
        text = build_releases_tsv(self)
        data = text.encode()
        return Fetched(
            text,
            Origin(path="releases.tsv", url=f"{self.api_base}/repos/Ascend/pytorch/tags",
                   sha256=hashlib.sha256(data).hexdigest()),
        )  # fmt: skip



def _version_from_setup(text: str) -> str:
    m = re.search(r"""^VERSION\s*=\s*['"]([^'"]+)['"]""", text, re.MULTILINE)
    return m[1] if m else ""


def _gitmodules_branch(text: str, submodule: str = "third_party/op-plugin") -> str:
    block = ""
    for chunk in re.split(r"^\[submodule ", text, flags=re.MULTILINE):
        if re.search(rf"^\s*path\s*=\s*{re.escape(submodule)}\s*$", chunk, re.MULTILINE):
            block = chunk
    m = re.search(r"^\s*branch\s*=\s*(\S+)", block, re.MULTILINE)
    return m[1] if m else ""


def build_releases_tsv(src: HttpSource, *, owner: str = "Ascend", repo: str = "pytorch") -> str:
    """releases.tsv from the GitHub API: tags, each tag's version, op-plugin pin and date."""
    api = f"{src.api_base}/repos/{owner}/{repo}"
    tags: list[tuple[str, str]] = []
    page = 1
    while True:
        batch = src.get_json(f"{api}/tags?per_page=100&page={page}")
        if not isinstance(batch, list) or not batch:
            break
        for t in batch:
            tags.append((str(t["name"]), str(t["commit"]["sha"])))
        if len(batch) < 100:
            break
        page += 1
    rows: list[tuple[str, ...]] = []
    for name, sha in tags:
        named = parse_tag_name(name)  # rc trains and V7.2.0.1 too; no pre-release builds
        if named is None:
            continue
        raw = f"github/{owner}/{repo}/{name}"
        version = ""
        for member, reader in (("version.txt", str.strip), ("setup.py", _version_from_setup)):
            try:
                version = reader(src.fetch(f"{raw}/{member}").text)
            except ScrapeError as e:
                if "HTTP 404" not in str(e):
                    raise
            if version:
                break
        commit = ""
        try:
            sub = src.get_json(f"{api}/contents/third_party/op-plugin?ref={name}")
            if isinstance(sub, dict) and sub.get("type") == "submodule":
                commit = str(sub.get("sha", ""))
        except ScrapeError as e:
            if "HTTP 404" not in str(e):
                raise
        branch = ""
        try:
            branch = _gitmodules_branch(src.fetch(f"{raw}/.gitmodules").text)
        except ScrapeError as e:
            if "HTTP 404" not in str(e):
                raise
        info = src.get_json(f"{api}/commits/{sha}")
        date = str(info["commit"]["committer"]["date"])[:10]
        rows.append((name, *named, version, commit, branch, date))
    rows.sort(key=lambda r: (r[6], r[0]))
    header = (
        "tag\ttrain\ttorch_version\ttorch_npu_version\top_plugin_commit\top_plugin_branch\tdate"
    )
    return "\n".join([header, *("\t".join(r) for r in rows)]) + "\n"


# --- wrappers --------------------------------------------------------------------------------


class SavingSource:
    """Passes fetches through and writes each text under ``dest`` in the mirror layout."""

    def __init__(self, inner: Source, dest: Path) -> None:
        self.inner = inner
        self.dest = Path(dest)
        self.name = inner.name
        self._lock = threading.Lock()

    def fetch(self, path: str) -> Fetched:
        got = self.inner.fetch(path)
        rel = _clean_path(got.origin.path or path)
        target = self.dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        # Bytes, not text mode: keeps the sha256 in the origin valid for the saved copy.
        data = got.text.encode("utf-8")
        target.write_bytes(data)
        self._record(rel, got.origin, hashlib.sha256(data).hexdigest())
        return got

    def _record(self, rel: str, origin: Origin, digest: str) -> None:
        """Keep MANIFEST.tsv in step so the saved mirror verifies like the original."""
        manifest = self.dest / MANIFEST
        gh = split_github(rel)
        repo = f"{gh[0]}/{gh[1]}" if gh else ""
        with self._lock:
            if not manifest.is_file():
                manifest.write_text("path\trepo\tref\tcommit\tsha256\n", encoding="utf-8")
            with manifest.open("a", encoding="utf-8") as fh:
                fh.write(f"{rel}\t{repo}\t{origin.ref}\t{origin.commit}\t{digest}\n")

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def list_dir(self, path: str) -> list[str]:
        return self.inner.list_dir(path)


class ChainSource:
    """The first source that has a path wins (e.g. a local mirror, then the network)."""

    def __init__(self, *sources: Source) -> None:
        if not sources:
            raise ValueError("ChainSource needs at least one source")
        self.sources = sources
        self.name = " → ".join(s.name for s in sources)

    def fetch(self, path: str) -> Fetched:
        errors: list[str] = []
        for s in self.sources:
            try:
                return s.fetch(path)
            except ScrapeError as e:
                errors.append(f"{s.name}: {e}")
        raise ScrapeError("; ".join(errors), source=path)

    def exists(self, path: str) -> bool:
        return any(s.exists(path) for s in self.sources)

    def list_dir(self, path: str) -> list[str]:
        names: set[str] = set()
        errors: list[str] = []
        for s in self.sources:
            try:
                names.update(s.list_dir(path))
            except ScrapeError as e:
                errors.append(str(e))
        if not names and errors:
            raise ScrapeError("; ".join(errors), source=path)
        return sorted(names)
