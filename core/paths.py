"""Where opcheck's bundled data and per-user cache live."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from platformdirs import user_cache_dir


def data_dir() -> Path:
    """The bundled ``data/`` folder (snapshot, workarounds, troubleshooting, examples)."""
    return Path(str(files("opcheck.data")))


def snapshot_dir() -> Path:
    return data_dir() / "snapshot"


def cache_dir() -> Path:
    """Per-user cache; ``OPCHECK_CACHE_DIR`` overrides (tests, read-only homes)."""
    override = os.environ.get("OPCHECK_CACHE_DIR")
    return Path(override) if override else Path(user_cache_dir("opcheck"))
