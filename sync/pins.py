"""Facts read at op-plugin's pinned commits, grouped across releases: the releases of each pin
the source holds, and :class:`ReleaseGroups`, which keeps one record per fact listing every
release that states it and citing the file and line at the newest one's pin (``op_aclnn`` and
``op_acl_type`` are built this way)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar

from packaging.version import Version

from opcheck.core.versions import release_key, torch_minor
from opcheck.db.data import ReleaseRec
from opcheck.sync.context import SyncContext

OP_PLUGIN = "github/Ascend/op-plugin"

K = TypeVar("K", bound=Hashable)


class _PinRow(Protocol):
    @property
    def torch(self) -> Sequence[str]: ...


R = TypeVar("R", bound=_PinRow)


def releases_by_pin(ctx: SyncContext, folder: str) -> dict[str, list[ReleaseRec]]:
    """The releases of each op-plugin commit the source holds ``op_plugin/<folder>`` at (a
    release names its pin by a prefix of the full commit)."""
    mirrored = {ref for ref in ctx.ls(OP_PLUGIN)
                if ctx.ls(f"{OP_PLUGIN}/{ref}/op_plugin/{folder}")}
    by_pin: dict[str, list[ReleaseRec]] = defaultdict(list)
    for rel in ctx.data.releases:
        pin = rel.op_plugin_commit
        full = next((m for m in mirrored if pin and m.startswith(pin)), None)
        if full is not None:
            by_pin[full].append(rel)
    return by_pin


class ReleaseGroups(Generic[K]):
    """Facts keyed by what they say, each with the releases that state it (in the order they
    were added) and the citation (file, line, source id) of the newest of them."""

    def __init__(self, releases: Iterable[ReleaseRec]) -> None:
        self.order: dict[str, Version] = {r.torch_npu: release_key(r.torch_npu) for r in releases}
        self._releases: dict[K, list[str]] = defaultdict(list)
        self._at: dict[K, tuple[str, int, int, Version]] = {}

    def add_pin(self, rels: Iterable[ReleaseRec], rows: Iterable[R], key: Callable[[R], K],
                cite: Callable[[R], tuple[str, int, int]]) -> None:
        """Every row of a pin for each of its releases whose torch line the row is for."""
        rows = list(rows)
        for rel in rels:
            minor = torch_minor(rel.torch)
            rkey = self.order[rel.torch_npu]
            for r in rows:
                if minor not in r.torch:
                    continue
                k = key(r)
                if rel.torch_npu in self._releases[k]:
                    continue
                self._releases[k].append(rel.torch_npu)
                if k not in self._at or rkey > self._at[k][3]:
                    self._at[k] = (*cite(r), rkey)

    def items(self) -> Iterator[tuple[K, str, str, int, int]]:
        """(key, releases oldest first as CSV, path, line, source id) per fact."""
        for k, rels in self._releases.items():
            path, line, sid, _ = self._at[k]
            yield k, ",".join(sorted(rels, key=self.order.__getitem__)), path, line, sid
