"""The upstream sources a sync reads, one class each, in the order :data:`UPSTREAMS` runs them.

Each class says what it fetches (``reads``, mirror-layout paths), which parser turns the text
into rows (``parser``) and what it adds to :class:`~opcheck.db.data.CatalogData` (``adds``);
every file it reads is registered as a source row, so each fact keeps its provenance.

Adding an upstream: a parser module in ``scrapers/`` (pure text → rows), a class in a module
of its own under ``sync/`` with a ``collect(ctx)`` that fetches through ``ctx.fetch`` and
appends records to ``ctx.data``, and one line in :data:`UPSTREAMS`.  Order matters only where an upstream reads what an earlier
one left in the context (the release matrix first) and for source ids, which follow the order
files are first fetched in.

The classes live by step: the release matrix and wheels in ``sync/releases.py``, the kernel
lists in ``sync/kernels.py``, API docs, return codes and the op universe in ``sync/apis.py``,
the CANN-side facts in their own modules; this module is the registry.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from opcheck.sync.aclops import AclOpSources
from opcheck.sync.advisor import AdvisorRules
from opcheck.sync.apis import AclnnCodes, ApiDocs, ApiMap, PytorchUniverse
from opcheck.sync.capture_rules import CaptureRules
from opcheck.sync.context import SyncContext
from opcheck.sync.contract import AclnnDocs, OpApiSources
from opcheck.sync.engine import CannBinaries, CannEngine
from opcheck.sync.hccl import HcclFacts
from opcheck.sync.inductor import InductorLowerings
from opcheck.sync.kernel_path import KernelPathRules
from opcheck.sync.kernels import Deprecations, NpuNative, ReleaseKernels
from opcheck.sync.messages import MessageSites
from opcheck.sync.releases import PublishedWheels, ReleaseMatrix, compat_tables, load_matrix
from opcheck.sync.torchair import TorchairConverters

__all__ = ["UPSTREAMS", "Upstream", "compat_tables", "load_matrix"]


@runtime_checkable
class Upstream(Protocol):
    """One upstream source of catalog facts."""

    name: str  # a short label; most use it as the ``scraper`` of the source rows they register
    reads: str  # what it fetches, as mirror-layout paths
    parser: str  # the scrapers module that turns the text into rows
    adds: str  # what it adds to CatalogData (or to the context, for later upstreams)

    def collect(self, ctx: SyncContext) -> None: ...


UPSTREAMS: tuple[Upstream, ...] = (
    ReleaseMatrix(),
    PublishedWheels(),
    NpuNative(),
    ReleaseKernels(),
    Deprecations(),
    ApiDocs(),
    ApiMap(),
    PytorchUniverse(),
    AclnnCodes(),
    AclnnDocs(),
    OpApiSources(),
    TorchairConverters(),
    KernelPathRules(),
    CannEngine(),
    CannBinaries(),
    CaptureRules(),
    InductorLowerings(),
    MessageSites(),
    AclOpSources(),
    HcclFacts(),
    AdvisorRules(),
)
