"""The two grouping shapes of the catalog's facts that are no table (see :mod:`opcheck.db.data`),
in a module of their own: a check reads kernel facts without importing the table classes
(SQLModel, the ORM: a quarter of a second per command)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ApiFacts", "KernelFacts"]


@dataclass(frozen=True)
class KernelFacts:
    """What a release registers for one op (columns of ``npukernel``); releases with equal
    facts group in the snapshot's kernels.tsv, whose columns follow this order."""

    status: str = "kernel"  # kernel | tocpu | unsupported
    op_api: bool = False
    acl_op: bool = False
    native: bool = False
    aclnn: str = ""


@dataclass(frozen=True)
class ApiFacts:
    """What one doc says of one API on one product (columns of ``api_support``); identical
    facts group in the snapshot's api_support.tsv, whose columns follow this order."""

    api: str
    feature: str = ""
    hardware: str = ""
    supported: bool | None = None
    only_dtypes: str = ""
    unsupported_dtypes: str = ""
    arg_limits: str = ""
    generation: str = ""
