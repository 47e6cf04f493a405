"""The domain's words as types: statuses, verdicts, fail levels, kernel sources.

Each member is also its string value (``Status.NPU == "npu"``), so catalog rows, JSON documents
and templates keep the plain strings they always had, while code names the word once here,
with what it means: its severity, its label, its terminal style and the verdict it leads to.
A new status is one new member here and its row in ``_STATUS_FACTS`` (plus, where it changes a
decision, the resolver; and, because the zoo stores one count column per status, a ``ZooRec``
field).
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from opcheck.core.errors import UsageError


class Word(str, Enum):
    """A string enum that prints as its value (``f"{Status.NPU}"`` is ``npu`` on every Python)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, text: str, *, option: str = "") -> Word:
        try:
            return cls(text)
        except ValueError:
            what = option or cls.__name__
            raise UsageError(
                f"{what} must be one of {', '.join(m.value for m in cls)}, not {text!r}"
            ) from None


class Status(Word):
    """What an op does on the NPU of one release (decided only by ``checker.resolve``)."""

    NPU = "npu"
    COMPOSITE = "composite"
    CPU_FALLBACK = "cpu_fallback"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"

    @property
    def severity(self) -> int:
        """Worst is highest: the order problems are reported in and how chains combine."""
        return _STATUS_FACTS[self].severity

    @property
    def style(self) -> str:
        """The terminal (rich) style of the word."""
        return _STATUS_FACTS[self].style

    @property
    def label(self) -> str:
        return _STATUS_FACTS[self].label

    @property
    def cell(self) -> str:
        """The short word of an ``--all-releases`` matrix cell (a label is too wide)."""
        return _STATUS_FACTS[self].cell

    @property
    def background(self) -> str:
        """The background of the status badge on web pages."""
        return _STATUS_FACTS[self].background

    @property
    def rule(self) -> str:
        """The SARIF rule text of a problem status."""
        return _STATUS_FACTS[self].rule or f"Op status: {self.label}"

    @property
    def tally(self) -> str:
        """How the one-line summary counts it: ``3 on NPU``, ``1 CPU fallback``."""
        return _STATUS_FACTS[self].tally

    @property
    def is_problem(self) -> bool:
        return self.severity > Status.COMPOSITE.severity

    @property
    def verdict(self) -> Verdict:
        """The verdict a model gets when this is its worst op."""
        if self is Status.UNSUPPORTED:
            return Verdict.NO
        return Verdict.MAYBE if self.is_problem else Verdict.YES

    @property
    def runs_on_npu(self) -> bool:
        return not self.is_problem


class _StatusFacts(NamedTuple):
    severity: int
    style: str  # terminal (rich)
    label: str
    tally: str
    cell: str  # --all-releases matrix cell
    background: str  # web badge; NEUTRAL_BACKGROUND when none
    rule: str = ""  # SARIF rule text (problem statuses; "" = from the label)


NEUTRAL_BACKGROUND = "#e6e6e6"

# One row per status: a new status is a member above and a row here.
_STATUS_FACTS = {
    Status.NPU: _StatusFacts(0, "green", "NPU kernel", "on NPU", "npu", "#d4f4d4"),
    Status.COMPOSITE: _StatusFacts(1, "cyan", "composite (callees run on the NPU)", "composite",
                                   "comp", "#e0ecff"),
    Status.CPU_FALLBACK: _StatusFacts(
        2, "yellow", "CPU fallback", "CPU fallback", "cpu", "#ffe9b3",
        "Op falls back to the CPU (host-device copies on every call)"),
    Status.UNKNOWN: _StatusFacts(3, "magenta", "unknown to the catalog", "unknown", "?",
                                 NEUTRAL_BACKGROUND, "Op is not in the catalog"),
    Status.UNSUPPORTED: _StatusFacts(4, "bold red", "unsupported", "unsupported", "NO", "#ffc8c8",
                                     "Op has no NPU kernel and cannot run on this release"),
}


class Verdict(Word):
    """The answer for a whole model on one target."""

    YES = "YES"
    MAYBE = "MAYBE"
    NO = "NO"
    # the op list stopped before the end of the program: never a YES
    INCOMPLETE = "INCOMPLETE"

    @property
    def rank(self) -> int:
        """Worst is highest: a model's verdict is the worst of its ops'."""
        return {Verdict.YES: 0, Verdict.MAYBE: 1, Verdict.INCOMPLETE: 2, Verdict.NO: 3}[self]

    @property
    def style(self) -> str:
        """The headline style (the summary line of a report)."""
        return {Verdict.YES: "bold green", Verdict.MAYBE: "bold yellow",
                Verdict.INCOMPLETE: "bold magenta", Verdict.NO: "bold red"}[self]

    @property
    def cell_style(self) -> str:
        """The style inside a table cell, where bold is kept for the worst answer."""
        return {Verdict.YES: "green", Verdict.MAYBE: "yellow", Verdict.INCOMPLETE: "magenta",
                Verdict.NO: "bold red"}[self]


class FailOn(Word):
    """``--fail-on``: which findings make the exit code 1."""

    UNSUPPORTED = "unsupported"
    FALLBACK = "fallback"
    RESTRICTED = "restricted"
    NEVER = "never"
    # the fallback level, plus every speed finding (host syncs, AI CPU calls, CPU round
    # trips, per-tensor foreach slow paths: opcheck.checker.speed)
    SLOW = "slow"

    @property
    def failing_statuses(self) -> frozenset[Status]:
        if self is FailOn.NEVER:
            return frozenset()
        if self is FailOn.UNSUPPORTED:
            return frozenset({Status.UNSUPPORTED})
        return frozenset({Status.UNSUPPORTED, Status.CPU_FALLBACK, Status.UNKNOWN})

    @property
    def counts_restrictions(self) -> bool:
        return self is FailOn.RESTRICTED

    @property
    def counts_speed(self) -> bool:
        return self is FailOn.SLOW


class Registration(Word):
    """What torch_npu registers for an op on one release (``npukernel.status``): an NPU kernel,
    a kernel for sparse tensors only, a registered fallback to the CPU, or an explicit refusal."""

    KERNEL = "kernel"
    SPARSE = "sparse"
    TOCPU = "tocpu"
    UNSUPPORTED = "unsupported"


class EnvStatus(Word):
    """How ``opcheck env`` judges one part of the installed stack."""

    OK = "ok"
    MISMATCH = "mismatch"  # the stack cannot work as installed
    WARNING = "warning"
    ABSENT = "absent"

    @property
    def style(self) -> str:
        return {EnvStatus.OK: "green", EnvStatus.MISMATCH: "bold red",
                EnvStatus.WARNING: "yellow", EnvStatus.ABSENT: "dim"}[self]


class KernelSource(Word):
    """Where a release's kernel facts come from, most exact first."""

    WHEEL = "wheel"
    OP_PLUGIN = "op_plugin"
    OP_PLUGIN_BRANCH = "op_plugin_branch"
    NONE = "none"
    # a tag from before op-plugin (3.0.x, 5.0.rc1/rc2): torch_npu registered every kernel in
    # its own npu_native_functions.yaml, so the tag's file is the exact list
    NPU_NATIVE = "npu_native"

    @property
    def approximate(self) -> bool:
        """Kernel facts read at a branch head, not at the commit the release pins."""
        return self is KernelSource.OP_PLUGIN_BRANCH

    @property
    def label(self) -> str:
        return {
            KernelSource.WHEEL: "the published wheel's compiled op list",
            KernelSource.OP_PLUGIN: "op-plugin at the commit the release tag pins",
            KernelSource.OP_PLUGIN_BRANCH: "op-plugin branch head (approximate)",
            KernelSource.NONE: "no kernel list",
            KernelSource.NPU_NATIVE: "torch_npu's own registry at the release tag (before op-plugin)",
        }[self]


class Engine(Word):
    """Where a call's work runs inside CANN on one product (decided by ``checker.engine``).

    A flag on each call signature, not a :class:`Status`: the status says whether the release
    has an NPU kernel for the op (one decision per op and release, counted per status in the
    zoo and the verdict); the engine is decided per call signature and product, and an AI CPU
    call still runs, correctly, on the NPU device. It is a slow path (a host round trip per
    call, and the usual source of 507018 "aicpu exception"), reported with its call counts
    and source line like the contract's other slow paths: it changes neither the verdict nor
    ``--fail-on``."""

    AICORE = "aicore"
    AICPU = "aicpu"
    MAYBE_AICPU = "maybe_aicpu"  # the open sources route it by something the trace lacks
    UNKNOWN = "unknown"  # only CANN's closed kernels: not guessed

    @property
    def severity(self) -> int:
        """Worst is highest: a call is as slow as its slowest aclnn function."""
        return {Engine.AICORE: 0, Engine.UNKNOWN: 1, Engine.MAYBE_AICPU: 2, Engine.AICPU: 3}[self]

    @property
    def label(self) -> str:
        return {Engine.AICORE: "AI Core", Engine.AICPU: "AI CPU (slow path)",
                Engine.MAYBE_AICPU: "may run on the AI CPU",
                Engine.UNKNOWN: "engine unknown (closed kernels)"}[self]

    @property
    def style(self) -> str:
        return {Engine.AICORE: "green", Engine.AICPU: "yellow", Engine.MAYBE_AICPU: "yellow",
                Engine.UNKNOWN: "magenta"}[self]

    @property
    def slow(self) -> bool:
        return self is Engine.AICPU
