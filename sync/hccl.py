"""Distributed on HCCL: torch_npu's process-group facts at every mirrored release tag.

Reads the files :data:`opcheck.scrapers.hccl.FILES` names at each tag a release has
(``github/Ascend/pytorch/<tag>/...``; the mirror holds the Python side at the first and newest
tag of each torch line, the C++ side at the newest). A release whose tag lacks them is judged on
the nearest tag of its torch line that has them, and says so (``opcheck.checker.hccl``).

Facts are grouped across tags (one record per identical kind, subject, value, message and
file, with the tags, lines and source rows in step), so the snapshot stays small.
"""

from __future__ import annotations

from collections import defaultdict

from opcheck.core.errors import OpcheckError
from opcheck.core.versions import release_key
from opcheck.db.data import HcclFactRec
from opcheck.scrapers import hccl
from opcheck.sync.context import SyncContext

PYTORCH = "github/Ascend/pytorch"


class HcclFacts:
    name = "hccl"
    reads = f"{PYTORCH}/<tag>/{{{', '.join(hccl.FILES)}}}"
    parser = "opcheck.scrapers.hccl"
    adds = "hccl_fact (per tag: what torch_npu's HCCL process group runs, emulates, refuses)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("HCCL facts")
        mirrored = set(ctx.ls(PYTORCH))
        # the tag breaks ties: a set's order changes between runs (hash seed), and the source
        # ids follow the order files are fetched in
        tags = sorted({r.tag for r in ctx.data.releases if r.tag and r.tag in mirrored},
                      key=lambda t: (release_key(t.rsplit("pytorch", 1)[-1]), t))
        groups: dict[tuple[str, str, str, str, str], list[tuple[str, int, int]]] = (
            defaultdict(list))
        for tag in tags:
            for rel in hccl.FILES:
                path = f"{PYTORCH}/{tag}/{rel}"
                if not ctx.source.exists(path):
                    continue
                try:
                    got, sid = ctx.fetch(path, self.name)
                    rows = ctx.parsed(got, hccl.parse)
                except OpcheckError as exc:
                    ctx.failures.append(str(exc))
                    continue
                ctx.count(sid, len(rows))
                for r in rows:
                    groups[(r.kind, r.subject, r.value, r.message, rel)].append(
                        (tag, r.line, sid))
        ctx.data.hccl_facts = [
            HcclFactRec(kind=kind, subject=subject, value=value, message=message, path=path,
                        tags=",".join(t for t, _, _ in at),
                        lines=",".join(str(n) for _, n, _ in at),
                        sources=",".join(str(s) for _, _, s in at))
            for (kind, subject, value, message, path), at in sorted(groups.items())
        ]
