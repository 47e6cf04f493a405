"""Sentences every view of a Report shares (Markdown, SARIF, the terminal table)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.check import Report, WorkaroundRef


def target_line(report: Report) -> str:
    t = report.target
    # a release known only from its published wheel (newer than the tables): say so, it is
    # the usual reason and the one a reader cannot guess
    wheel_only = t.get("kernel_source") == "wheel" and not t.get("train")
    cann = f"CANN {t['cann']}" if t.get("cann") else (
        "CANN unknown (not in the compatibility tables"
        + ("; a published wheel they do not list yet)" if wheel_only else ")"))
    cann += {"inferred": " (inferred from its train)", "requested": (
        f" (requested; the release pairs with CANN {t.get('cann_paired') or 'unknown'})")}.get(
        t.get("cann_basis", ""), "")
    return f"torch_npu {t['torch_npu']} (torch {t['torch']}, {cann})"


def summary_line(report: Report) -> str:
    """``MAYBE: 2 on NPU, 1 composite, 1 CPU fallback (3 CPU round-trips per forward), …``."""
    c = report.counts
    parts = []
    for status in Status:
        part = f"{c[status.value]} {status.tally}"
        if status is Status.CPU_FALLBACK:
            part += (f" ({report.fallback_calls} CPU round-trips per "
                     f"{'step' if report.mode == 'train' else 'forward'})")
        parts.append(part)
    restricted = sum(1 for f in report.ops if f.restricted)
    slow = report.slow_paths
    engine = "".join([
        f", {slow['aicpu_calls']} AI CPU calls" if slow.get("aicpu_calls") else "",
        f", {slow['host_syncs']} host syncs (nonzero)" if slow.get("host_syncs") else ""])
    return (f"{report.verdict}: " + ", ".join(parts)
            + (f", {restricted} restricted" if restricted else "") + engine)


SUMMARY_CHARS = 280  # a fix's summary in a report: at most four terminal lines


@dataclass(frozen=True)
class FixHint:
    """A workaround entry a report names: its id, title, fix, the problem ops it is for, and
    the command that prints it whole."""

    id: str
    title: str
    fix: str
    ops: tuple[str, ...]

    @property
    def summary(self) -> str:
        """The fix's first paragraph of prose, cut at a word near ``SUMMARY_CHARS``."""
        para: list[str] = []
        for line in self.fix.splitlines():
            text = line.strip().lstrip("#>-* ").strip()
            if text.startswith("```") or (not text and para):
                break
            if text:
                para.append(text)
        out = " ".join(para).rstrip(":") or self.title
        if len(out) <= SUMMARY_CHARS:
            return out
        first = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", out, maxsplit=1)[0]
        if len(first) <= SUMMARY_CHARS:
            return first
        return out[:SUMMARY_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " …"

    @property
    def command(self) -> str:
        return f"opcheck workaround show {self.id}"


def fix_hints(report: Report) -> list[FixHint]:
    """The entries the report's problems name, once each, in the problems' order."""
    ops: dict[str, list[str]] = {}
    first: dict[str, WorkaroundRef] = {}
    for f in report.problems:
        for w in f.workarounds:
            first.setdefault(w.id, w)
            ops.setdefault(w.id, []).append(f.op)
    return [FixHint(i, w.title, w.fix, tuple(dict.fromkeys(ops[i])))
            for i, w in first.items()]


def md_escape(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


# The short words of the --all-releases matrix cells (``Status.cell``).
MATRIX_CELL = {s: s.cell for s in Status}
NOT_RECEIVED = "–"  # the release does not receive the op (a composite op whole or decomposed)


@dataclass(frozen=True)
class ReleaseGroup:
    """Consecutive releases whose matrix columns are identical."""

    releases: tuple[str, ...]
    statuses: dict[str, str]  # op → status ("" = the release does not receive the op)
    full_npu: bool  # every op it receives runs on the NPU

    @property
    def label(self) -> str:
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"{first} – {last}"


def matrix_groups(matrix: Mapping[str, Any]) -> list[ReleaseGroup]:
    """The ``--all-releases`` matrix folded into runs of releases with identical columns."""
    ops: Mapping[str, Mapping[str, str]] = matrix.get("ops", {})
    full = set(matrix.get("full_npu_releases", []))
    groups: list[ReleaseGroup] = []
    for rel in matrix.get("releases", []):
        column = {op: str(cells.get(rel, "")) for op, cells in ops.items()}
        if groups and groups[-1].statuses == column and groups[-1].full_npu == (rel in full):
            last = groups[-1]
            groups[-1] = ReleaseGroup((*last.releases, rel), last.statuses, last.full_npu)
        else:
            groups.append(ReleaseGroup((rel,), column, rel in full))
    return groups


def matrix_rows(groups: Sequence[ReleaseGroup]) -> tuple[list[str], int]:
    """The ops worth a matrix row (not on the NPU in some group that receives them), and how
    many ops run on the NPU wherever they are received."""
    ops = list(groups[0].statuses) if groups else []
    shown = [op for op in ops
             if any(g.statuses[op] and not Status(g.statuses[op]).runs_on_npu for g in groups)]
    return shown, len(ops) - len(shown)


def matrix_cell(status: str) -> str:
    if not status:
        return NOT_RECEIVED
    try:
        return MATRIX_CELL.get(Status(status), status)
    except ValueError:
        return status


@dataclass(frozen=True)
class ReleaseRun:
    """Consecutive releases (in the matrix's order) where one op has one status."""

    status: str  # "" = the releases do not receive the op
    releases: tuple[str, ...]

    @property
    def label(self) -> str:
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"{first} – {last}"


def op_runs(matrix: Mapping[str, Any], ops: Sequence[str]) -> dict[str, list[ReleaseRun]]:
    """Per op, its statuses across the releases folded into runs: the matrix read one op at a
    time, which stays narrow however many releases differ (``--all-releases`` on 80 columns)."""
    cells: Mapping[str, Mapping[str, str]] = matrix.get("ops", {})
    out: dict[str, list[ReleaseRun]] = {}
    for op in ops:
        runs: list[ReleaseRun] = []
        for rel in matrix.get("releases", []):
            status = str(cells.get(op, {}).get(rel, ""))
            if runs and runs[-1].status == status:
                runs[-1] = ReleaseRun(status, (*runs[-1].releases, rel))
            else:
                runs.append(ReleaseRun(status, (rel,)))
        out[op] = runs
    return out


def first_full_npu(groups: Sequence[ReleaseGroup]) -> int:
    """Index of the first group running the whole model on the NPU (-1: none)."""
    return next((i for i, g in enumerate(groups) if g.full_npu), -1)


def relative_location(location: str, root: str) -> str:
    """``/home/me/proj/model.py:12`` → ``model.py:12`` when under ``root`` (the model's
    project root): a shared report should not carry one machine's absolute paths."""
    if root and location.startswith(root.rstrip("/") + "/"):
        return location[len(root.rstrip("/")) + 1:]
    return location


def _path_of(location: str) -> str:
    path, sep, line = location.rpartition(":")
    return path if sep and line.isdigit() else location


def report_root(report: Report) -> str:
    """The model's project root as far as the report shows it: the deepest folder holding the
    model file (when given as an absolute path) and every absolute source location."""
    import posixpath

    dirs = [posixpath.dirname(_path_of(loc)) for f in report.ops for loc in f.locations
            if loc.startswith("/")]
    if report.model.startswith("/"):
        dirs.append(posixpath.dirname(_path_of(report.model)))
    if not dirs:
        return ""
    root = posixpath.commonpath(dirs)
    return "" if root == "/" else root
