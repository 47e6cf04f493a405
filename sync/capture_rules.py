"""ACL graph capture: torch_npu's own capture rules at every mirrored release tag.

Reads the files :data:`opcheck.scrapers.capture_rules.FILES` names at each tag a release has
(``github/Ascend/pytorch/<tag>/...``; the mirror holds them at the newest tag of each torch
line). A tag without them gives no rules: the checker then judges the release on the nearest
tag of its torch line that has them, and says so (``opcheck.checker.capture``).

A tag whose Python device module (``torch_npu/npu/__init__.py``) is mirrored without
``graphs.py`` gets one ``absent`` rule: NPUGraph did not exist yet (trains before 7.0.0).

Rules are grouped across tags (one record per identical kind, subject, message and file,
with the tags, lines and source rows in step), so the snapshot stays small.
"""

from __future__ import annotations

from collections import defaultdict

from opcheck.core.errors import OpcheckError
from opcheck.core.versions import release_key
from opcheck.db.data import CaptureRuleRec
from opcheck.scrapers import capture_rules as cr
from opcheck.sync.context import SyncContext

PYTORCH = "github/Ascend/pytorch"
DEVICE_MODULE = "torch_npu/npu/__init__.py"
ABSENT_TEXT = "no torch_npu/npu/graphs.py at this tag: torch.npu.NPUGraph does not exist"


class CaptureRules:
    name = "capture_rules"
    reads = f"{PYTORCH}/<tag>/{{{', '.join(cr.FILES)}}}"
    parser = "opcheck.scrapers.capture_rules"
    adds = "capture_rules (per tag: what torch_npu refuses during NPU graph capture)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("capture rules")
        mirrored = set(ctx.ls(PYTORCH))
        tags = sorted({r.tag for r in ctx.data.releases if r.tag and r.tag in mirrored},
                      key=lambda t: release_key(t.rsplit("pytorch", 1)[-1]))
        groups: dict[tuple[str, str, str, str], list[tuple[str, int, int]]] = defaultdict(list)
        for tag in tags:
            present = [f for f in cr.FILES if ctx.source.exists(f"{PYTORCH}/{tag}/{f}")]
            if "torch_npu/npu/graphs.py" not in present:
                # the tag's Python device module is here without graphs.py: no NPUGraph yet
                device = f"{PYTORCH}/{tag}/{DEVICE_MODULE}"
                if ctx.source.exists(device):
                    _, sid = ctx.fetch(device, self.name)
                    groups[(cr.ABSENT, "NPUGraph", ABSENT_TEXT, "torch_npu/npu")].append(
                        (tag, 0, sid))
                continue
            for rel in present:
                try:
                    got, sid = ctx.fetch(f"{PYTORCH}/{tag}/{rel}", self.name)
                    rows = ctx.parsed(got, cr.parse)
                except OpcheckError as exc:
                    ctx.failures.append(str(exc))
                    continue
                ctx.count(sid, len(rows))
                for r in rows:
                    groups[(r.kind, r.subject, r.message, rel)].append((tag, r.line, sid))
        ctx.data.capture_rules = [
            CaptureRuleRec(kind=kind, subject=subject, message=message, path=path,
                           tags=",".join(t for t, _, _ in at),
                           lines=",".join(str(n) for _, n, _ in at),
                           sources=",".join(str(s) for _, _, s in at))
            for (kind, subject, message, path), at in sorted(groups.items())
        ]
