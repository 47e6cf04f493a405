"""Graph mode: torchair's converters at the commit each torch_npu release pins.

Runs after the releases are known (``ctx.data.releases``). The pins come from
``torchair_pins.tsv`` (tag → torchair commit: each tag's ``third_party/torchair/torchair``
submodule entry); a release whose tag has a pin whose converters the source holds gets them,
one whose pinned commit is not there is ``not_mirrored``, one without a pin ``no_pin`` and one
whose converters did not parse ``failed`` (a sync failure): all mean graph status unknown, never
borrowed from a neighbouring commit.

Live sources have no pins file yet (reading each tag's submodule entry through the GitHub
API, as ``build_releases_tsv`` does for op-plugin, is not done): a live sync notes that graph
status is unknown for every release.

One source row per commit (its ``ge_converter`` folder), not per file: ~900 files a commit,
and every converter row keeps its file and line.
"""

from __future__ import annotations

from collections import defaultdict

from opcheck.core.errors import OpcheckError
from opcheck.db.data import GraphConverterRec, GraphPinRec
from opcheck.scrapers import torchair
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import Fetched

TORCHAIR = "github/Ascend/torchair"
PINS_TSV = "torchair_pins.tsv"
CONVERTERS = "python/torchair/_ge_concrete_graph/ge_converter"
# Helpers of the converter package, not converters.
_NOT_CONVERTERS = ("converter_utils.py", "__init__.py")


def converter_dir(commit: str) -> str:
    return f"{TORCHAIR}/{commit}/{CONVERTERS}"


def _py_files(ctx: SyncContext, path: str, depth: int = 0) -> list[str]:
    out: list[str] = []
    for name in ctx.ls(path):
        child = f"{path}/{name}"
        if name.endswith(".py"):
            if name not in _NOT_CONVERTERS:
                out.append(child)
        elif depth < 4 and "." not in name:
            out += _py_files(ctx, child, depth + 1)
    return out


def read_commit(ctx: SyncContext, commit: str, fetched: dict[str, Fetched] | None = None
                ) -> tuple[list[tuple[str, torchair.ConverterRow]], int]:
    """Every converter of one torchair commit as (path in ge_converter/, row), and the id of
    the source registered for the commit's converter folder.  ``fetched``: files already
    fetched (and prefetched for parsing), by path."""
    base = converter_dir(commit)
    rows: list[tuple[str, torchair.ConverterRow]] = []
    for path in _py_files(ctx, base):
        got = (fetched or {}).get(path) or ctx.source.fetch(path)
        rel = path[len(base) + 1:]
        rows += [(rel, r) for r in ctx.parsed(got, torchair.parse_converters)]
    best: dict[str, tuple[str, torchair.ConverterRow]] = {}
    for rel, row in rows:  # an op registered in two files keeps its most capable converter
        kept = best.get(row.op)
        if kept is None or torchair.RANK[row.status] > torchair.RANK[kept[1].status]:
            best[row.op] = (rel, row)
    sid = ctx.data.add_source(
        "torchair", base, url=f"https://github.com/Ascend/torchair/tree/{commit}/{CONVERTERS}",
        ref=commit, commit=commit, rows=len(best))
    return sorted(best.values(), key=lambda x: x[1].op), sid


def group_converters(by_commit: dict[int, list[tuple[str, torchair.ConverterRow]]]
                     ) -> list[GraphConverterRec]:
    """One record per set of identical facts across commits (sources and lines in step)."""
    groups: dict[tuple[str, ...], list[tuple[int, int]]] = defaultdict(list)
    for sid in sorted(by_commit):
        for rel, r in by_commit[sid]:
            key = (r.op, r.status, r.message, r.condition, ",".join(r.dtypes), r.min_torch, rel,
                   ",".join(r.rebound))
            groups[key].append((sid, r.line))
    return [
        GraphConverterRec(op=op, status=status, message=message, condition=condition,
                          dtypes=dtypes, min_torch=min_torch, path=path, sources=",".join(str(s) for s, _ in at),
                          lines=",".join(str(n) for _, n in at), rebound=rebound)
        for (op, status, message, condition, dtypes, min_torch, path, rebound), at
        in sorted(groups.items())
    ]


class TorchairConverters:
    name = "torchair"
    reads = f"{PINS_TSV}; {TORCHAIR}/<pinned commit>/{CONVERTERS}/**/*.py"
    parser = "opcheck.scrapers.torchair"
    adds = "graph_pins (release → torchair commit, read or unknown), graph_converters"

    def collect(self, ctx: SyncContext) -> None:
        if not ctx.data.releases:
            return
        try:
            present = ctx.source.exists(PINS_TSV)
        except OpcheckError:
            present = False  # a live source: the pins file is the mirror's (see the module doc)
        if not present:
            ctx.notes.append(f"no {PINS_TSV} in {getattr(ctx.source, 'name', 'the source')}: "
                             "graph-mode status unknown for every release")
            return
        try:
            got, pins_sid = ctx.fetch(PINS_TSV, "torchair_pins")
            pins = torchair.parse_pins(got.text, origin=got.origin)
        except OpcheckError as exc:
            ctx.failures.append(str(exc))
            return
        ctx.count(pins_sid, len(pins))
        by_tag = {p.tag: p.commit for p in pins}
        mirrored = set(ctx.ls(TORCHAIR))
        ctx.progress("torchair converters")
        # the converters of every pinned commit parse in parallel up front
        wanted = sorted({c for r in ctx.data.releases if r.tag and (c := by_tag.get(r.tag, ""))
                         and c in mirrored})
        fetched = ctx.prefetch_paths((p for c in wanted for p in _py_files(ctx, converter_dir(c))),
                                     torchair.parse_converters)
        read: dict[str, int | None] = {}  # commit → source id (None: failed to read)
        by_commit: dict[int, list[tuple[str, torchair.ConverterRow]]] = {}
        for rel in ctx.data.releases:
            commit = by_tag.get(rel.tag, "") if rel.tag else ""
            pin = GraphPinRec(torch_npu=rel.torch_npu, tag=rel.tag, torchair=commit,
                              state="no_pin", source_id=pins_sid if commit else None)
            if commit and commit not in mirrored:
                pin.state = "not_mirrored"
            elif commit:
                if commit not in read:
                    read[commit] = None
                    try:
                        rows, folder_sid = read_commit(ctx, commit, fetched)
                        by_commit[folder_sid], read[commit] = rows, folder_sid
                    except OpcheckError as exc:
                        ctx.failures.append(str(exc))
                sid = read[commit]
                pin.state = "read" if sid is not None else "failed"
                pin.converters_source_id = sid
            ctx.data.graph_pins.append(pin)
        ctx.data.graph_converters = group_converters(by_commit)
