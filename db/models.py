"""Catalog tables (SQLModel). Only table classes live here.

Every fact row carries ``source_id``: the upstream file (or snapshot file) it came from.
"""

from __future__ import annotations

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 1
# What a built file holds beyond the rows (indexes, search tables). Part of the key of the
# catalog built in the user cache, so a new layout is rebuilt instead of reused.
LAYOUT_VERSION = 2


class Source(SQLModel, table=True):
    """One upstream file that fed the catalog."""

    id: int | None = Field(default=None, primary_key=True)
    scraper: str = Field(index=True)
    path: str  # mirror-layout path, e.g. github/Ascend/op-plugin/7.2.0/op_plugin/config/...
    url: str = ""  # the canonical upstream URL for the path
    ref: str = ""
    commit: str = ""
    sha256: str = ""
    fetched_at: str = ""
    rows: int = 0


class Release(SQLModel, table=True):
    """A torch_npu release and its place in the version chain."""

    torch_npu: str = Field(primary_key=True)  # 2.1.0.post17
    torch: str = Field(index=True)  # 2.1.0
    train: str = ""  # Ascend release train, 7.2.0
    cann: str = ""  # 8.3.RC1
    pythons: str = ""  # "3.8,3.9,3.10,3.11"
    tag: str = ""  # v7.2.0-pytorch2.1.0
    branch: str = ""  # v2.1.0-7.2.0
    op_plugin_commit: str = ""
    op_plugin_branch: str = ""
    date: str = ""
    sort_key: int = Field(default=0, index=True)  # position in version order (0 = oldest)
    has_cpu_fallback: bool = False
    # Where this release's kernel list comes from: wheel (exact), op_plugin (pinned commit),
    # op_plugin_branch (branch head; approximate), none (matrix-only release).
    kernel_source: str = "none"
    source_id: int | None = Field(default=None, foreign_key="source.id")


class Operator(SQLModel, table=True):
    """An operator: ATen (from PyTorch's native_functions.yaml) or torch_npu custom (npu::)."""

    op: str = Field(primary_key=True)  # aten::add.Tensor
    namespace: str = Field(index=True)
    name: str = Field(index=True)
    overload: str = ""
    schema_: str = Field(default="", sa_column_kwargs={"name": "schema"})
    tags: str = ""  # comma-separated
    dispatch: str = ""  # comma-separated dispatch keys named in native_functions.yaml
    kernel_kind: str = ""  # CompositeImplicitAutograd | CompositeExplicitAutograd | ... | backend
    structured_delegate: str = ""
    source_id: int | None = Field(default=None, foreign_key="source.id")


class NpuKernel(SQLModel, table=True):
    """Operator × release: what torch_npu registers for it."""

    # Covering indexes for the browser's facets (status, op_api, acl_op): counted per release
    # and over the whole table, they are read from an index instead of 105k table rows.
    __table_args__ = (
        Index("ix_npukernel_release_facets", "release", "status", "op_api", "acl_op"),
        Index("ix_npukernel_status", "status"),
        Index("ix_npukernel_op_api", "op_api"),
        Index("ix_npukernel_acl_op", "acl_op"),
    )

    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True, foreign_key="operator.op")
    release: str = Field(foreign_key="release.torch_npu")  # indexed first in release_facets
    op_api: bool = False
    acl_op: bool = False
    native: bool = False
    aclnn: str = ""
    status: str = "kernel"  # kernel | tocpu | unsupported
    source_id: int | None = Field(default=None, foreign_key="source.id")


class Deprecation(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True)
    replacement: str = ""
    source_id: int | None = Field(default=None, foreign_key="source.id")


class PythonSupport(SQLModel, table=True):
    """Which Python versions a PyTorch version supports (per the torch_npu tables)."""

    id: int | None = Field(default=None, primary_key=True)
    torch: str = Field(index=True)
    python: str
    source_id: int | None = Field(default=None, foreign_key="source.id")


class Meta(SQLModel, table=True):
    """Key/value facts about the catalog itself (schema version, build time, torch used)."""

    key: str = Field(primary_key=True)
    value: str = ""


class WorkaroundEntry(SQLModel, table=True):
    """A known fix: contributed files in data/workarounds/ and op-plugin's deprecations."""

    __tablename__ = "workaround"

    id: str = Field(primary_key=True)
    title: str
    kind: str = Field(index=True)
    problem: str = ""
    fix: str = ""  # Markdown
    releases: str = ""  # JSON list of {"min", "max"} ranges; empty list = every release
    hardware: str = ""  # comma-separated product families
    fixed_in: str = ""
    cann_min: str = ""
    env: str = ""  # JSON object of environment variables
    rewrite_api: str = ""  # the API an executable rewrite replaces
    sources: str = ""  # newline-separated links
    author: str = ""
    last_verified: str = ""
    path: str = ""  # the entry's file (data/workarounds/<id>.yaml) or upstream origin


class WorkaroundOp(SQLModel, table=True):
    __tablename__ = "workaround_op"

    id: int | None = Field(default=None, primary_key=True)
    workaround_id: str = Field(index=True, foreign_key="workaround.id")
    op: str = Field(index=True)


class ApiSupport(SQLModel, table=True):
    """Per-Python-API support from the torch_npu docs: API × doc version × hardware product."""

    __tablename__ = "api_support"

    id: int | None = Field(default=None, primary_key=True)
    api: str = Field(index=True)  # torch.nn.functional.max_pool3d, torch.Tensor.abs
    doc_version: str = Field(default="", index=True)  # torch version of the doc set; "" = any
    ref: str = ""  # branch/tag of Ascend/pytorch the doc was read at
    generation: str = ""  # html-table | pipe-table | sections | list
    feature: str = ""  # "" = eager support; graph_mode, dtensor, deterministic, ...
    hardware: str = Field(default="", index=True)  # product family; "" = not product-specific
    supported: bool | None = None  # None: the doc leaves it open
    only_dtypes: str = ""  # comma-separated; "" = the doc gives no list
    unsupported_dtypes: str = ""
    arg_limits: str = ""  # "arg:kind:v1|v2" entries separated by ";"
    restriction: str = ""  # the doc's own words (synced catalogs only, not the snapshot)
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key="source.id")


class ApiOp(SQLModel, table=True):
    """Which ATen ops a Python API calls (rules plus data/api_overrides.yaml)."""

    __tablename__ = "api_op"

    id: int | None = Field(default=None, primary_key=True)
    api: str = Field(index=True)
    op: str = Field(index=True)
    via: str = ""  # rule | override


class ZooCoverage(SQLModel, table=True):
    """``opcheck zoo``: a well-known architecture × release → verdict and counts."""

    __tablename__ = "zoo_result"

    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(index=True)
    torch_npu: str = Field(default="", index=True)  # "" on an ERROR row (the trace failed)
    verdict: str = ""  # YES | MAYBE | NO | ERROR
    npu: int = 0
    composite: int = 0
    cpu_fallback: int = 0
    unsupported: int = 0
    unknown: int = 0
    fallback_calls: int = 0
    problem_ops: str = ""  # "op=status" worst first, comma-separated
    error: str = ""
    traced_with: str = ""  # torch version of the trace
