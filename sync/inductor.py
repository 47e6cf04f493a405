"""torch.compile's default backend on the NPU: torch_npu's inductor lists at every release tag
whose ``torch_npu/_inductor/`` is in the source (``opcheck.scrapers.inductor``).

A tag without those files gives no rows: the checker then says the inductor answer is unknown
for the release (the shared mirror holds only torch_npu's ``csrc`` and ``npu`` folders; a live
sync or a mirror with ``torch_npu/_inductor/{__init__,lowering_op_list}.py`` fills it).
Rows are grouped across tags as the capture rules are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from opcheck.core.errors import OpcheckError
from opcheck.db.data import InductorRuleRec
from opcheck.scrapers import inductor
from opcheck.scrapers.rows import Origin
from opcheck.sync.context import SyncContext

PYTORCH = "github/Ascend/pytorch"
INIT = "torch_npu/_inductor/__init__.py"
LISTS = "torch_npu/_inductor/lowering_op_list.py"
# the newer format of some tags: the ops kept eager, and those with torch_npu's own lowering
FALLBACKS = "torch_npu/_inductor/lowering_fallback_list.py"
OVERRIDES = "torch_npu/_inductor/lowering_override_list.py"


class InductorLowerings:
    name = "inductor"
    reads = f"{PYTORCH}/<tag>/{{{INIT}, {LISTS} | {FALLBACKS} + {OVERRIDES}}}"
    parser = "opcheck.scrapers.inductor"
    adds = "inductor_rules (per tag: the NPU inductor backend, ops it generates, fallbacks)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("inductor lowerings")
        mirrored = set(ctx.ls(PYTORCH))
        tags = sorted({r.tag for r in ctx.data.releases if r.tag and r.tag in mirrored})
        groups: dict[tuple[str, str, str], list[tuple[str, int, int]]] = defaultdict(list)
        read = 0
        for tag in tags:
            files: tuple[tuple[str, Callable[[str, Origin], list[inductor.InductorRow]]], ...]
            if ctx.source.exists(f"{PYTORCH}/{tag}/{LISTS}"):
                files = ((INIT, inductor.parse_init), (LISTS, inductor.parse))
            elif ctx.source.exists(f"{PYTORCH}/{tag}/{FALLBACKS}"):
                files = ((INIT, inductor.parse_init), (FALLBACKS, inductor.parse_fallbacks),
                         (OVERRIDES, inductor.parse_overrides))
            else:
                continue
            for rel, parser in files:
                path = f"{PYTORCH}/{tag}/{rel}"
                if not ctx.source.exists(path):
                    continue
                try:
                    got, sid = ctx.fetch(path, self.name)
                    rows = ctx.parsed(got, parser)
                except OpcheckError as exc:
                    ctx.failures.append(str(exc))
                    continue
                ctx.count(sid, len(rows))
                for r in rows:
                    groups[(r.kind, r.name, rel)].append((tag, r.line, sid))
            read += 1
        if not read:
            ctx.notes.append(f"inductor: no {PYTORCH}/<tag>/{LISTS} in the source: torch.compile's "
                             "default (inductor) backend on the NPU is unknown for every release")
        ctx.data.inductor_rules = [
            InductorRuleRec(kind=kind, name=name, path=path, tags=",".join(t for t, _, _ in at),
                            lines=",".join(str(n) for _, n, _ in at),
                            sources=",".join(str(s) for _, _, s in at))
            for (kind, name, path), at in sorted(groups.items())
        ]
