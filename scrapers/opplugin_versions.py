"""The torch versions of op-plugin's YAML: of a config folder (``v2r1/``), of an entry's
version spec (``all_version``, ``version: 1,11``), and which ``op_plugin_functions.yaml`` of a
ref to read. A step of :mod:`opcheck.scrapers.opplugin`. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from opcheck.core.errors import UsageError
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.yamlines import LineDict, YamlCtx, line_of


class VersionCtx(YamlCtx):
    """Error helper bound to one parsed file, with the spec cache of that file."""

    def __init__(self, origin: Origin) -> None:
        super().__init__(origin)
        # The same few specs repeat thousands of times in one file; expanding once is ~2x faster.
        self.spec_cache: dict[tuple[Any, tuple[str, ...]], tuple[str, ...]] = {}


# ---------------------------------------------------------------------------------------------
# Versions


_FOLDER = re.compile(r"(?:^|/)v(\d+)r(\d+)/")
_VERSION_TOKEN = re.compile(r"^v?(\d+)\.(\d+)$")


def minor_of(token: str) -> str | None:
    m = _VERSION_TOKEN.match(token.strip())
    return f"{int(m[1])}.{int(m[2])}" if m else None


def _minor_key(minor: str) -> tuple[int, int]:
    a, _, b = minor.partition(".")
    return int(a), int(b)


def torch_from_path(path: str) -> str | None:
    """``.../config/v2r1/op_plugin_functions.yaml`` → ``2.1``; None outside a vXrY folder."""
    m = _FOLDER.search(path)
    return f"{int(m[1])}.{int(m[2])}" if m else None


def norm_torch(torch: str | None) -> str | None:
    """``2.1`` / ``v2.1`` / ``v2r1`` / ``1,11`` → ``major.minor``; a bad value is a usage error."""
    if torch is None:
        return None
    m = re.match(r"^v?(\d+)[.,r](\d+)", torch.strip())
    if not m:
        raise UsageError(f"not a torch version: {torch!r} (expected e.g. 2.1)")
    return f"{int(m[1])}.{int(m[2])}"


def expand_spec(
    ctx: VersionCtx, spec: Any, all_versions: Sequence[str], line: int, key: str
) -> list[str]:
    """Versions (``2.1``...) that a combined-format spec selects, in ``all_version`` order."""
    cache_key = (tuple(spec) if isinstance(spec, list) else spec, tuple(all_versions))
    try:
        hit = ctx.spec_cache.get(cache_key)
    except TypeError:  # an unhashable spec: let the checks below report it
        hit = None
        cache_key = None  # type: ignore[assignment]
    if hit is not None:
        return list(hit)
    versions = _expand_spec_uncached(ctx, spec, all_versions, line, key)
    if cache_key is not None:
        ctx.spec_cache[cache_key] = tuple(versions)
    return versions


def _expand_spec_uncached(
    ctx: VersionCtx, spec: Any, all_versions: Sequence[str], line: int, key: str
) -> list[str]:
    if isinstance(spec, str) and spec.strip() == "all_version":
        return list(all_versions)
    if isinstance(spec, list):
        if len(spec) != 2 or not all(isinstance(s, str) for s in spec):
            raise ctx.error(f"{key}: a range must be [vA.B, vC.D|newest], got {spec!r}", line)
        lo = minor_of(spec[0])
        hi_text = spec[1].strip()
        hi = all_versions[-1] if hi_text == "newest" else minor_of(hi_text)
        if lo is None or hi is None:
            raise ctx.error(f"{key}: bad version range {spec!r}", line)
        for bound in (lo, hi):
            if bound not in all_versions:
                raise ctx.error(f"{key}: {bound} in {spec!r} is not in all_version", line)
        if _minor_key(lo) > _minor_key(hi):
            raise ctx.error(f"{key}: empty range {spec!r}", line)
        return [v for v in all_versions if _minor_key(lo) <= _minor_key(v) <= _minor_key(hi)]
    if isinstance(spec, str):
        out: list[str] = []
        for token in spec.split(","):
            v = minor_of(token)
            if v is None:
                raise ctx.error(f"{key}: bad version {token.strip()!r} in {spec!r}", line)
            if v not in all_versions:
                raise ctx.error(f"{key}: {v} is not in all_version", line)
            if v not in out:
                out.append(v)
        return sorted(out, key=_minor_key)
    raise ctx.error(f"{key}: expected a version spec, got {spec!r}", line)


def parse_all_version(ctx: VersionCtx, data: LineDict) -> list[str]:
    raw = data.get("all_version")
    line = line_of(data, "all_version")
    if not isinstance(raw, list) or not raw:
        raise ctx.error(f"all_version: expected a non-empty list, got {raw!r}", line)
    out: list[str] = []
    for token in raw:
        v = minor_of(str(token))
        if v is None:
            raise ctx.error(f"all_version: bad version {token!r}", line)
        out.append(v)
    return out


# ---------------------------------------------------------------------------------------------
# Which files of a ref to read

_CONFIG = "op_plugin/config/"


def _rel_config(path: str) -> str | None:
    i = path.find(_CONFIG)
    return path[i + len(_CONFIG) :] if i >= 0 else None


def _pick(paths: Iterable[str], filename: str, torch: str | None) -> list[str]:
    combined: list[str] = []
    per_version: list[tuple[tuple[int, int], str]] = []
    for p in paths:
        rel = _rel_config(p)
        if rel is None:
            continue
        if rel == filename:
            combined.append(p)
        else:
            m = re.fullmatch(r"v(\d+)r(\d+)/" + re.escape(filename), rel)
            if m:
                per_version.append(((int(m[1]), int(m[2])), p))
    if combined and not per_version:
        return sorted(combined)[:1]
    want = None
    if torch is not None:
        m = re.match(r"^v?(\d+)[.,r](\d+)", torch.strip())
        if not m:
            raise UsageError(f"not a torch version: {torch!r}")
        want = (int(m[1]), int(m[2]))
    return [p for k, p in sorted(per_version) if want is None or k == want]


def functions_paths(paths: Iterable[str], *, torch: str | None = None) -> list[str]:
    """Which ``op_plugin_functions.yaml`` of one op-plugin ref to read.

    ``paths``: the files of the ref (mirror paths ``github/Ascend/op-plugin/<ref>/...`` or
    paths relative to the ref; only ones under ``op_plugin/config/`` count). The
    ``vXrY/op_plugin_functions.yaml`` files win when present, in version order (only the one
    for ``torch`` when given); else the combined ``op_plugin/config/op_plugin_functions.yaml``.
    Both exist only on branch 6.0.rc2, where the transitional combined file is an unfinished
    migration: it lists each op once under its torch-1.11 schema, so every op whose schema
    changed for torch 2.x (``SymInt``) is missing for 2.x (152 ops for 2.0, 213 for 2.1) and it
    has no ``symint`` section; it is a strict subset of the folders (see the tests).
    Returned as given, so callers can open them.
    """
    return _pick(paths, "op_plugin_functions.yaml", torch)
