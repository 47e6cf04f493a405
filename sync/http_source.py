"""Raw files over HTTP from the git forges, cached on disk, and the releases.tsv built from
the tags when there is no mirror."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.releases import parse_tag_name
from opcheck.scrapers.rows import Origin
from opcheck.sync.pip_source import PipWheelSource
from opcheck.sync.sources import Fetched, clean_path, decode, split_github

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
        gh = split_github(clean_path(path))
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
        clean = clean_path(path)
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
            decode(data, url),
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
        clean = clean_path(path)
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
