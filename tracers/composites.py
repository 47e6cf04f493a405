"""Which CompositeImplicitAutograd ops the runtime tracer records at both levels.

Computed in the parent process from the catalog (the sandboxed worker never opens it): every
CIA op that torch_npu registers a kernel for in at least one release. For those ops the level
the NPU receives depends on the release, so the trace keeps the op and its decomposition.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from opcheck.core.errors import CatalogError
from opcheck.core.vocab import KernelSource

if TYPE_CHECKING:
    from opcheck.db.catalog import Catalog

COMPOSITE_IMPLICIT = "CompositeImplicitAutograd"

# CIA ops that torch also gives an autograd formula (an Autograd kernel). The dispatcher uses
# the CIA kernel on a backend's autograd key only while the backend has no kernel for the op;
# once it has one (torch_npu's matmul), torch's formula runs in backward and the backend
# receives the op it calls instead of the backward of the decomposition. op -> that op. The
# runtime trace records it as a composite of the decomposition's backward ops; checker/levels
# receives it whole exactly when the forward op is received whole.
BACKWARD_FORMULA: dict[str, str] = {
    "aten::matmul": "aten::matmul_backward",
    "aten::max_pool2d": "aten::max_pool2d_backward",
}


def composites_with_kernels(catalog: Catalog) -> list[str]:
    """The CIA ops of ``catalog`` that torch_npu registers a kernel for in some release
    (whatever the registration does: a CIA op registered as "tocpu" or "unsupported" in 1.11
    releases also reaches the backend whole).

    Releases from before op-plugin (torch 1.5/1.8 and the first 1.11 tags, whose one registry
    file listed ~270 CIA ops such as ``linear`` and ``narrow``) do not count: their torch
    dispatched at levels a trace with a torch of today cannot reproduce, and watching those ops
    would split every model's trace for releases nobody traces with a current torch. Checks
    against those releases already warn that the traced torch differs."""
    registered = catalog.registered_ops(except_source=KernelSource.NPU_NATIVE.value)
    return sorted(
        op
        for op, info in catalog.operators.items()
        if info.kernel_kind == COMPOSITE_IMPLICIT and op in registered
    )


@functools.lru_cache(maxsize=4)
def watched_composites(catalog_path: Path | None = None) -> tuple[str, ...]:
    """:func:`composites_with_kernels` of the given (default: bundled) catalog; empty when no
    catalog can be opened (the trace then records the decomposed level only)."""
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    try:
        return tuple(composites_with_kernels(Catalog.load(open_catalog(catalog_path))))
    except CatalogError:
        return ()
