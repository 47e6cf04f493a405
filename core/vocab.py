"""The domain's words as types: statuses, verdicts, fail levels, kernel sources.

Each member is also its string value (``Status.NPU == "npu"``), so catalog rows, JSON documents
and templates keep the plain strings they always had, while code names the word once here,
with what it means: its severity, its label and its terminal style. A new status is one new
member here (plus, where it changes a decision, the resolver).
"""

from __future__ import annotations

from enum import Enum

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
        return _STATUS_SEVERITY[self]

    @property
    def style(self) -> str:
        return _STATUS_STYLE[self]

    @property
    def label(self) -> str:
        return _STATUS_LABEL[self]

    @property
    def is_problem(self) -> bool:
        return self.severity > Status.COMPOSITE.severity

    @property
    def runs_on_npu(self) -> bool:
        return self in (Status.NPU, Status.COMPOSITE)


_STATUS_SEVERITY = {
    Status.UNSUPPORTED: 4, Status.UNKNOWN: 3, Status.CPU_FALLBACK: 2, Status.COMPOSITE: 1,
    Status.NPU: 0,
}
_STATUS_STYLE = {
    Status.NPU: "green", Status.COMPOSITE: "cyan", Status.CPU_FALLBACK: "yellow",
    Status.UNSUPPORTED: "red", Status.UNKNOWN: "magenta",
}
_STATUS_LABEL = {
    Status.NPU: "NPU kernel",
    Status.COMPOSITE: "composite (callees run on the NPU)",
    Status.CPU_FALLBACK: "CPU fallback",
    Status.UNSUPPORTED: "unsupported",
    Status.UNKNOWN: "unknown to the catalog",
}


class Verdict(Word):
    """The answer for a whole model on one target."""

    YES = "YES"
    MAYBE = "MAYBE"
    NO = "NO"

    @property
    def style(self) -> str:
        return {Verdict.YES: "bold green", Verdict.MAYBE: "bold yellow",
                Verdict.NO: "bold red"}[self]


class FailOn(Word):
    """``--fail-on``: which findings make the exit code 1."""

    UNSUPPORTED = "unsupported"
    FALLBACK = "fallback"
    RESTRICTED = "restricted"
    NEVER = "never"

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


class KernelSource(Word):
    """Where a release's kernel facts come from, most exact first."""

    WHEEL = "wheel"
    OP_PLUGIN = "op_plugin"
    OP_PLUGIN_BRANCH = "op_plugin_branch"
    NONE = "none"

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
        }[self]
