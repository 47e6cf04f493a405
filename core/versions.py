"""Version helpers: torch_npu release versions, torch ``major.minor``, CANN versions."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

from packaging.version import InvalidVersion, Version

_BETA = re.compile(r"\s*[（(]\s*beta\s*[)）]\s*$", re.IGNORECASE)


def clean_release(text: str) -> str:
    """``1.11.0.rc2（beta）`` → ``1.11.0.rc2``: the version as pip would know it."""
    return _BETA.sub("", text.strip())


@functools.lru_cache(maxsize=4096)  # sorted() over releases calls it per item, per check
def release_key(version: str) -> Version:
    """Sort key for torch_npu versions (``2.1.0.rc1`` < ``2.1.0`` < ``2.1.0.post17``)."""
    try:
        return Version(clean_release(version))
    except InvalidVersion:
        return Version("0")


def torch_minor(version: str) -> str:
    """``2.1.0.post17`` / ``2.1.0+cpu`` / ``v2.1`` → ``2.1``."""
    m = re.match(r"^v?(\d+)[.,](\d+)", version.strip())
    if not m:
        raise ValueError(f"not a torch version: {version!r}")
    return f"{int(m[1])}.{int(m[2])}"


def minor_key(minor: str) -> tuple[int, int]:
    major, _, rest = torch_minor(minor).partition(".")
    return int(major), int(rest)


def has_cpu_fallback(torch_version: str) -> bool:
    """torch_npu for torch ≥ 2.1 (train 5.0.0 on) registers the boxed CPU fallback."""
    return minor_key(torch_version) >= (2, 1)


def expand_release(text: str, known: list[str], *,
                   exact: Collection[str] = ()) -> tuple[str, str]:
    """A release as a user types it → ``(release, note)`` among ``known`` (oldest first).

    A leading ``v`` is dropped (``v2.6.0.post5``, as git tags spell it); a prefix that is no
    release names the newest release starting with it (``2.6`` → ``2.6.0.post5``), with a
    note saying so. ``exact``: more releases taken as typed but never chosen for a prefix
    (those without a kernel list, for the caller to refuse by name). Text that matches
    nothing comes back cleaned, for the caller's error."""
    want = clean_release(text)
    if want[:1] in ("v", "V") and want[1:2].isdigit():
        want = want[1:]
    if want in known or want in exact:
        return want, ""
    line = [k for k in known if k.startswith(want + ".") or k.startswith(want + "rc")]
    if not line:
        return want, ""
    newest = max(line, key=release_key)
    return newest, f"torch_npu {text.strip()} → {newest} (the newest {want} release)"
