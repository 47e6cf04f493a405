"""Version helpers: torch_npu release versions, torch ``major.minor``, CANN versions (the one
CANN order: :func:`cann_key`)."""

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


# --- CANN ------------------------------------------------------------------------------------

_CANN_PART = re.compile(r"^(?:(?P<num>\d+)|RC(?P<rc>\d+)|(?P<pre>[A-Z]+)(?P<pre_n>\d*))$")


def normalise_cann(text: str) -> str:
    """``CANN 8.3.rc1`` → ``8.3.RC1`` (the spelling of the release tables)."""
    s = re.sub(r"(?i)^\s*cann\s*", "", text).strip()
    return re.sub(r"(?i)rc", "RC", s)


@functools.lru_cache(maxsize=1024)  # called per documented version, per op, per release
def cann_key(version: str) -> tuple[tuple[int, int], ...]:
    """Order of CANN versions: ``8.0.RC3 < 8.0.0 < 8.0.1 < 8.1.RC1``; a hotfix
    (``6.3.RC3.1``) after its release, a pre-release build (``8.2.RC1.alpha002``) before it.

    Raises ValueError for text that is not a CANN version."""
    parts = normalise_cann(version).upper().split(".")
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
    """The same CANN version however spelled (``8.0.rc3`` is ``CANN 8.0.RC3``)."""
    return bool(a and b) and normalise_cann(a).upper() == normalise_cann(b).upper()


def compare_cann(a: str, b: str) -> str:
    """``older`` / ``newer`` / ``the same`` (a relative to b); "" when either is unparsable."""
    try:
        ka, kb = cann_key(a), cann_key(b)
    except ValueError:
        return ""
    return "older" if ka < kb else "newer" if ka > kb else "the same"


# A CANN library documented at a commit rather than a release tag (``opcheck.sync.contract``).
CANN_HEAD = "head"


def doc_cann_key(version: str) -> tuple[tuple[int, int], ...]:
    """:func:`cann_key` for documented versions: ``head`` after every release, () for text
    that is no CANN version (sorts first)."""
    if version == CANN_HEAD:
        return ((4, 0),)
    try:
        return cann_key(version)
    except ValueError:
        return ()
