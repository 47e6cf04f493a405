"""The message index: every line of code that prints what a user reads in a torch_npu / CANN log.

:class:`MessageSites` reads, with :mod:`opcheck.scrapers.messages`,

* CANN's op_api sources (``github/hicann/<ops-*>/<every CANN tag>/**/op_api/*.cpp``; the
  headers, ~1.4% of the sites, are not read: listing their folders again cost too much),
  kind ``cann``, versions = CANN versions;
* op-plugin's kernels and helpers (``op_plugin/ops/{opapi,aclops}/*.cpp``,
  ``op_plugin/utils/*``) and its codegen (``codegen/gen.py`` / ``torchnpugen/gen.py``) at every
  pinned commit, kinds ``op_plugin`` / ``codegen``, versions = the torch_npu releases pinning it;
* torch_npu's own ``torch_npu/csrc/**`` at every mirrored tag that has it, kind
  ``torch_npu``, versions = the releases of those tags.

One row per distinct (kind, library, path, function, template, condition) across versions:
the file and line are the newest version's, ``versions`` lists where it appears (a range when
long). Each row gets the rarest literal word of its template as ``anchor`` (what explain
keys its index on). Runs after the release matrix (``ctx.data.releases``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from opcheck.core.errors import OpcheckError
from opcheck.core.versions import release_key
from opcheck.db.data import MessageTemplateRec
from opcheck.scrapers import messages as ms
from opcheck.sync.context import SyncContext
from opcheck.sync.contract import HICANN, cann_of_ref, cann_order
from opcheck.sync.engine import library_trees
from opcheck.sync.sources import Fetched, Source, walk_files

PYTORCH = "github/Ascend/pytorch"
OP_PLUGIN = "github/Ascend/op-plugin"
_CODEGEN = ("torchnpugen/gen.py", "codegen/gen.py")
_PLUGIN_DIRS = ("op_plugin/ops/opapi", "op_plugin/ops/aclops", "op_plugin/utils")
MAX_VERSIONS = 6  # listed one by one; more are written as a range with a count
_CLEAN = re.compile(r"[\t\r\n]")


def _walk(source: Source, path: str, suffixes: tuple[str, ...], only: str = "") -> list[str]:
    """Files below ``path`` ending in ``suffixes`` (``only``: a folder name the file must be
    under), tests and experimental folders left out."""
    files = walk_files(source, path, suffixes, max_depth=14, descend_dotted=False,
                       skip=("experimental", "tests", "test"))
    return [f for f in files if not only or f"/{only}/" in f]


@dataclass
class _Group:
    """One distinct site across versions."""

    rec: MessageTemplateRec
    versions: list[str] = field(default_factory=list)
    key: Any = None  # order of the version the location is read at


def versions_text(versions: list[str], total: int) -> str:
    """``9.0.0,9.1.0``, or ``2.1.0.post8 … 2.8.0 (14 of 20)`` for a long list."""
    if len(versions) <= MAX_VERSIONS:
        return ",".join(versions)
    return f"{versions[0]} … {versions[-1]} ({len(versions)} of {total})"


class MessageSites:
    name = "messages"
    reads = (f"{HICANN}/<ops-*>/<tag>/**/op_api/*.cpp; {OP_PLUGIN}/<pin>/op_plugin/"
             f"{{ops/opapi,ops/aclops,utils}}/*, {{codegen,torchnpugen}}/gen.py; "
             f"{PYTORCH}/<tag>/torch_npu/csrc/**")
    parser = "opcheck.scrapers.messages"
    adds = ("message_template (each distinct line of code that prints a log message: template, "
            "file:line, function, guarding condition, dtype lists, versions)")

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("message sites (CANN, op-plugin, torch_npu sources)")
        groups: dict[tuple[str, ...], _Group] = {}
        totals: Counter[str] = Counter()  # kind → versions read
        self.coverage: dict[str, Counter[str]] = {}
        for kind, library, version, order, root, paths, sid_args in self._units(ctx):
            try:
                gots = [ctx.source.fetch(p) for p in paths]

                def compute(gots: list[Fetched] = gots, root: str = root) -> list[
                        tuple[str, ms.MessageFile]]:
                    ctx.prefetch(gots, ms.parse_source)
                    parsed = [(g.origin.path[len(root) + 1:], ctx.parsed(g, ms.parse_source))
                              for g in gots]
                    return [(rel, f) for rel, f in parsed if f.found]

                # one cache entry per library version: a warm sync reads it back whole
                # instead of one parse-cache file per source file
                parsed_files = [(rel, f) for rel, f in ctx.combined(gots, ms.unit_key, compute)
                                if f.found]
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            sid = 0
            for rel, parsed in parsed_files:
                self._count(kind, parsed)
                if not parsed.sites:
                    continue
                if not sid:
                    sid = ctx.data.add_source(self.name, root, url=sid_args["url"],
                                              ref=sid_args["ref"],
                                              commit=sid_args.get("commit", ""))
                for s in parsed.sites:
                    self._add(groups, kind, library, rel, s, parsed.aclnn, version, order, sid)
            totals[kind] += 1
        rows = [self._finish(g, totals[g.rec.kind]) for g in groups.values()]
        _anchor(rows)
        ctx.data.message_templates = sorted(
            rows, key=lambda r: (r.kind, r.library, r.path, r.line, r.template))
        ctx.notes.append(f"message index: {len(rows)} distinct templates ("
                         + ", ".join(f"{k} {n}" for k, n in sorted(Counter(
                             r.kind for r in rows).items())) + ")")

    def _count(self, kind: str, parsed: ms.MessageFile) -> None:
        c = self.coverage.setdefault(kind, Counter())
        for what, counts in (("found", parsed.found), ("literal", parsed.literal),
                             ("indexed", parsed.indexed)):
            for fam, n in counts.items():
                c[f"{fam}.{what}"] += n

    @staticmethod
    def _add(groups: dict[tuple[str, ...], _Group], kind: str, library: str, rel: str,
             s: ms.MessageSite, aclnn: tuple[str, ...], version: str, order: tuple[int, ...],
             sid: int) -> None:
        # by file name, not path: ops-math moved op_host/op_api/ to op_api/ between 8.5.0 and
        # 9.0.0, and a moved file's sites are the same sites
        key = (kind, library, rel.rsplit("/", 1)[-1], s.function, s.template, s.condition)
        g = groups.get(key)
        if g is None:
            rec = MessageTemplateRec(
                template=_CLEAN.sub(" ", s.template), kind=kind, library=library,
                macro=s.macro, level=s.level, function=s.function, entry=",".join(aclnn[:3]),
                condition=_CLEAN.sub(" ", s.condition), lists=_CLEAN.sub(" ", s.lists),
                code=s.code, literal=ms.literal_chars(s.template),
                path=rel, line=s.line, source_id=sid)
            g = groups[key] = _Group(rec)
        if version not in g.versions:
            g.versions.append(version)
        if g.key is None or order >= g.key:
            g.key, g.rec.line, g.rec.source_id, g.rec.newest = order, s.line, sid, version
            g.rec.path = rel

    @staticmethod
    def _finish(g: _Group, total: int) -> MessageTemplateRec:
        g.rec.versions = versions_text(g.versions, total)
        return g.rec

    def _units(self, ctx: SyncContext) -> Iterable[
            tuple[str, str, str, Any, str, list[str], dict[str, str]]]:
        """(kind, library, version, order, root, files, source fields) per library version,
        oldest first."""
        # the engine upstream's listing of each library version (listed once per sync); its
        # .cpp files only: op_api headers hold ~1.4% of the sites, and listing every op_api
        # folder again for them cost more than all the rest of this upstream's reading
        trees = sorted(library_trees(ctx), key=lambda t: (t[0], cann_order(cann_of_ref(t[1]))))
        for repo, ref, root, listed in trees:
            files = [p for p in listed if "/op_api/" in p and p.endswith(".cpp")
                     and "/experimental/" not in p]
            version = cann_of_ref(ref)
            yield ("cann", repo, version, cann_order(version), root, files, {
                "url": f"https://github.com/hicann/{repo}/blob/{ref}/", "ref": ref,
                "commit": ref if version == "head" else ""})
        by_pin: dict[str, list[str]] = {}
        by_tag: dict[str, str] = {}
        for rel in ctx.data.releases:
            if rel.op_plugin_commit:
                by_pin.setdefault(rel.op_plugin_commit, []).append(rel.torch_npu)
            if rel.tag:
                by_tag[rel.tag] = rel.torch_npu
        pins = [p for p in ctx.ls(OP_PLUGIN) if len(p) == 40]
        labelled: list[tuple[Any, str, str]] = []
        for pin in pins:
            rels = sorted({v for c, vs in by_pin.items() if pin.startswith(c) for v in vs},
                          key=release_key)
            if rels:
                labelled.append((release_key(rels[-1]), pin, rels[-1]))
        for order, pin, label in sorted(labelled):
            root = f"{OP_PLUGIN}/{pin}"
            files = [f"{root}/{d}/{n}" for d in _PLUGIN_DIRS for n in ctx.ls(f"{root}/{d}")
                     if n.endswith((".cpp", ".h"))]
            args = {"url": f"https://github.com/Ascend/op-plugin/blob/{pin}/", "ref": pin,
                    "commit": pin}
            if files:
                yield ("op_plugin", "op-plugin", label, order, root, files, args)
            gen = [f"{root}/{p}" for p in _CODEGEN if ctx.source.exists(f"{root}/{p}")]
            if gen:
                yield ("codegen", "op-plugin", label, order, root, gen[:1], args)
        tags = [(release_key(by_tag[t]), t) for t in ctx.ls(PYTORCH) if t in by_tag]
        for order, tag in sorted(tags):
            root = f"{PYTORCH}/{tag}"
            files = _walk(ctx.source, f"{root}/torch_npu/csrc", (".cpp", ".h"))
            if files:
                yield ("torch_npu", "pytorch", by_tag[tag], order, root, files, {
                    "url": f"https://github.com/Ascend/pytorch/blob/{tag}/", "ref": tag})


def _anchor(rows: list[MessageTemplateRec]) -> None:
    """Each row's rarest literal word (ties: the longest), across every template."""
    words = [dict.fromkeys(ms.anchor_words(r.template)) for r in rows]
    freq: Counter[str] = Counter(w for ws in words for w in ws)
    for r, ws in zip(rows, words, strict=True):
        if ws:
            r.anchor = min(ws, key=lambda w: (freq[w], -len(w), w))

