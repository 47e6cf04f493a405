"""Row types every scraper produces and the catalog build consumes.

Rows are frozen dataclasses so parsers stay pure and results compare by value in tests.
Each row carries the line it came from; the file it came from is the ``Origin`` the
parser was called with (one source row per parsed file in the catalog).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Origin:
    """Where a parsed text came from.

    ``path`` is the upstream-relative path in the mirror layout
    (``github/<owner>/<repo>/<ref>/<path>`` or ``pypi/torch-npu/<version>/<member>``);
    ``url`` is what a live fetch used (empty for mirror/offline reads).
    """

    path: str
    url: str = ""
    ref: str = ""
    commit: str = ""
    sha256: str = ""

    def where(self, line: int | None = None) -> str:
        return f"{self.path}:{line}" if line is not None else self.path


@dataclass(frozen=True)
class OperatorRow:
    """One entry of PyTorch's native_functions.yaml (the ATen op universe)."""

    op: str  # canonical aten::name.overload
    schema: str  # the full func: string
    tags: tuple[str, ...]
    dispatch: tuple[str, ...]  # dispatch keys named in the YAML (may be empty)
    kernel_kind: str  # CompositeImplicitAutograd | CompositeExplicitAutograd |
    # CompositeExplicitAutogradNonFunctional | backend
    structured_delegate: str | None  # canonical op, e.g. aten::add.out
    line: int


@dataclass(frozen=True)
class KernelRow:
    """One NPU kernel registration.

    ``torch`` is the torch ``major.minor`` the registration applies to (op-plugin YAML is
    per torch version); ``None`` when the file is for exactly one release (a wheel's list).
    ``status``: ``kernel`` (a real NPU kernel), ``tocpu`` (registered to run on the CPU,
    early per-version files) or ``unsupported`` (registered to raise).
    """

    op: str  # canonical, aten:: or npu::
    torch: str | None
    op_api: bool = False
    acl_op: bool = False
    native: bool = False  # registered by torch_npu itself (npu_native_functions.yaml)
    aclnn: str | None = None  # aclnn function named by gen_opapi.exec, when given
    status: str = "kernel"
    section: str = ""  # official / custom / symint / autograd / quant / supported / ...
    schema: str = ""
    line: int = 0


@dataclass(frozen=True)
class DeprecatedRow:
    op: str  # canonical
    replacement: str  # free text from upstream ("torch.nn.functional.silu"); may be empty
    line: int = 0


@dataclass(frozen=True)
class ReleaseTagRow:
    """A torch_npu release tag (releases.tsv / the tag list + version files)."""

    tag: str  # v7.2.0-pytorch2.1.0
    train: str  # 7.2.0
    torch_version: str  # 2.1.0
    torch_npu_version: str  # 2.1.0.post17 ("" when the tag has none)
    op_plugin_commit: str
    op_plugin_branch: str
    date: str
    line: int = 0


@dataclass(frozen=True)
class CompatRow:
    """One row of a torch_npu ↔ PyTorch ↔ CANN compatibility table."""

    torch_npu_version: str
    torch_version: str
    cann_version: str  # "8.3.RC1" (without the "CANN " prefix)
    branch: str  # v2.1.0-7.2.0 (empty when the table has none)
    line: int = 0


@dataclass(frozen=True)
class PythonCompatRow:
    torch_version: str  # 2.1.0
    pythons: tuple[str, ...]  # ("3.8", "3.9", ...)
    min_note: str = ""  # ">=3.7.5" style qualifiers, verbatim
    line: int = 0


@dataclass(frozen=True)
class WheelFacts:
    """What a published torch-npu wheel says about itself."""

    torch_npu_version: str
    torch_requirement: str  # as in METADATA: "==2.6.0+cpu"
    torch_version: str  # normalised: 2.6.0
    git_commit: str = ""
    kernels: tuple[KernelRow, ...] = field(default_factory=tuple)
