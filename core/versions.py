"""Version helpers: torch_npu release versions, torch ``major.minor``, CANN versions."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_BETA = re.compile(r"\s*[（(]\s*beta\s*[)）]\s*$", re.IGNORECASE)


def clean_release(text: str) -> str:
    """``1.11.0.rc2（beta）`` → ``1.11.0.rc2``: the version as pip would know it."""
    return _BETA.sub("", text.strip())


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
