"""The shared vocabulary: errors, op names, versions, paths, the op-list document."""

from __future__ import annotations
