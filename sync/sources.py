"""Where upstream text comes from: a mirror directory, raw HTTP, or a pip-downloaded wheel.

Every source serves the same mirror-layout paths (``github/<owner>/<repo>/<ref>/<path>``,
``pypi/torch-npu/<version>/<member>``, ``releases.tsv``) so parsers never know how a text
was obtained, and an offline mirror is a drop-in replacement for the network.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin


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


def clean_path(path: str) -> str:
    """Reject paths that could escape the mirror root; normalise separators."""
    p = PurePosixPath(path.replace("\\", "/"))
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ScrapeError(f"not a mirror-relative path: {path!r}", source=path)
    return str(p)


def decode(data: bytes, source: str) -> str:
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
        return self.root / clean_path(path)

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
        clean = clean_path(path)
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
        text = decode(data, f"{self.root}/{clean}")
        origin = Origin(path=clean, ref=_ref_of(clean), commit=commit, sha256=digest)
        return Fetched(text, origin)

    def exists(self, path: str) -> bool:
        return self._file(path).is_file()

    def list_dir(self, path: str) -> list[str]:
        d = self._file(path) if path.strip("/") else self.root
        if not d.is_dir():
            raise ScrapeError(f"directory not in mirror {self.root}", source=path)
        return sorted(c.name for c in d.iterdir())


class MirrorsSource:
    """Several mirror directories, resolved per pinned ref: the first mirror that has a ref's
    directory (``github/OWNER/REPO/REF``; ``pypi/PACKAGE``, or a top-level file such as
    ``releases.tsv``) answers every path below it, so the files of one commit never mix across
    mirrors, and two mirrors holding one repository at different commits both serve (the
    shared mirror's tags, a small project mirror's pins of the same repository).

    A repository's list of refs is the first holding mirror's (the refs a sync enumerates,
    a release's tags, stay one mirror's; a later mirror's ref is read only when asked for)."""

    def __init__(self, roots: Sequence[Path]) -> None:
        if not roots:
            raise ValueError("MirrorsSource needs at least one mirror")
        self.mirrors = [MirrorSource(r) for r in roots]
        self.name = "mirror " + " + ".join(str(r) for r in roots)
        self._owner: dict[str, MirrorSource | None] = {}

    @staticmethod
    def unit(path: str) -> str | None:
        """The ref (or package, or top-level file) a path belongs to; below a repository's
        ref, the repository itself; None above that level."""
        parts = clean_path(path).split("/") if path.strip("/") else []
        if parts and parts[0] == "github":
            return "/".join(parts[:4]) if len(parts) >= 4 else (
                "/".join(parts) if len(parts) == 3 else None)
        depth = 2 if parts and parts[0] == "pypi" else 1
        return "/".join(parts[:depth]) if len(parts) >= depth else None

    def _mirror(self, unit: str) -> MirrorSource | None:
        if unit not in self._owner:
            self._owner[unit] = next(
                (m for m in self.mirrors if (m.root / unit).exists()), None)
        return self._owner[unit]

    def fetch(self, path: str) -> Fetched:
        unit = self.unit(path)
        mirror = self._mirror(unit) if unit else None
        if mirror is None:
            raise ScrapeError(f"file not in mirrors {self.name.removeprefix('mirror ')}",
                              source=clean_path(path))
        return mirror.fetch(path)

    def exists(self, path: str) -> bool:
        unit = self.unit(path)
        if unit is None:
            return any(m.exists(path) for m in self.mirrors)
        mirror = self._mirror(unit)
        return mirror is not None and mirror.exists(path)

    def list_dir(self, path: str) -> list[str]:
        unit = self.unit(path)
        if unit is not None:
            mirror = self._mirror(unit)
            if mirror is None:
                raise ScrapeError(f"directory not in mirrors {self.name}", source=path)
            return mirror.list_dir(path)
        # above the repositories: every mirror's entries
        names: set[str] = set()
        for m in self.mirrors:
            with contextlib.suppress(ScrapeError):
                names.update(m.list_dir(path))
        if not names:
            raise ScrapeError(f"directory not in mirrors {self.name}", source=path)
        return sorted(names)


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
        rel = clean_path(got.origin.path or path)
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
