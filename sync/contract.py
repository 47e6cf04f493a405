"""The CANN side of the catalog: aclnn functions as documented, and which ones each op calls.

:class:`AclnnDocs` reads every aclnn page of CANN's operator libraries at each release tag
(``github/hicann/<ops-*>/<vX.Y.Z>``; a library with no tags is read at its one commit and
labelled ``head``) with :mod:`opcheck.scrapers.aclnn_docs`. :class:`OpApiSources` reads
op-plugin's op_api kernel sources at every pinned commit a release names with
:mod:`opcheck.scrapers.opapi_sources` and links each ATen overload of a release to the aclnn
functions its kernel calls.

Facts that several CANN versions (or releases) state identically are one record listing those
versions (and the line in each page), so the catalog and the snapshot stay small; one source
row per library version (per pin), since each fact keeps its own page path and line.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import partial
from typing import Generic, TypeVar

from opcheck.core.errors import OpcheckError
from opcheck.core.versions import doc_cann_key
from opcheck.db.contract import HEAD
from opcheck.db.data import (
    AclnnConstraintRec,
    AclnnExceptionRec,
    AclnnFunctionRec,
    AclnnParamRec,
    OpAclnnRec,
)
from opcheck.scrapers import aclnn_docs, opapi_sources, opplugin
from opcheck.scrapers.aclnn_docs import AclnnPage
from opcheck.scrapers.opapi_sources import CppFunction
from opcheck.sync.context import SyncContext
from opcheck.sync.pins import ReleaseGroups, releases_by_pin
from opcheck.sync.sources import Fetched, walk_files

HICANN = "github/hicann"
OP_PLUGIN = "github/Ascend/op-plugin"


def cann_of_ref(ref: str) -> str:
    """``v9.1.0`` → ``9.1.0``; any other ref (a commit) → ``head``."""
    if ref.startswith("v") and ref[1:].replace(".", "").isdigit():
        return ref[1:]
    return HEAD


# Documented CANN versions in order, ``head`` after every tag: the one CANN order.
cann_order = doc_cann_key


K = TypeVar("K")


class _Grouped(Generic[K]):
    """Facts keyed by their content, with the (version, line) of every page stating them."""

    def __init__(self) -> None:
        self.where: dict[K, dict[str, int]] = defaultdict(dict)

    def add(self, key: K, version: str, line: int) -> None:
        self.where[key].setdefault(version, line)  # a fact twice on one page: its first line

    def items(self) -> Iterable[tuple[K, str, str]]:
        for key, at in self.where.items():
            versions = sorted(at, key=cann_order)
            yield key, ",".join(versions), ",".join(str(at[v]) for v in versions)


def _cite(sid: int, yaml_sid: int, r: opapi_sources.OpAclnnRow) -> tuple[str, int, int]:
    """A generated kernel is cited at the YAML entry that generates it."""
    return r.path.rsplit("/", 1)[-1], r.line, yaml_sid if r.match == "gen_opapi" else sid


def _csv(items: Iterable[str]) -> str:
    return ",".join(items)


def _flat(text: str) -> str:
    """One line: a table cell or a constraint may span lines upstream; rows and snapshot
    cells are single lines."""
    return " ".join(text.split())


class AclnnDocs:
    name = "aclnn_docs"
    reads = f"{HICANN}/<ops-* repo>/<every CANN tag>/**/docs/**/aclnn*.md"
    parser = "opcheck.scrapers.aclnn_docs"
    adds = ("aclnn_functions, aclnn_params, aclnn_exceptions, aclnn_constraints "
            "(per-product dtype contract of every aclnn function, per CANN version)")

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("aclnn docs")
        functions: list[AclnnFunctionRec] = []
        params: _Grouped[tuple[str, str, str, str, str, str, bool | None]] = _Grouped()
        exceptions: _Grouped[tuple[str, str, str, str, str, bool, str]] = _Grouped()
        constraints: _Grouped[tuple[str, str, str, str, str, str, str]] = _Grouped()
        parsed = 0
        skipped: Counter[str] = Counter()  # why pages are not one function's contract
        seen: set[tuple[str, str]] = set()  # (function, version) already documented
        tree: list[tuple[str, str, str, list[str]]] = []  # repo, ref, root, pages
        for repo in ctx.ls(HICANN):
            for ref in ctx.ls(f"{HICANN}/{repo}"):
                root = f"{HICANN}/{repo}/{ref}"
                tree.append((repo, ref, root, [
                    p for p in walk_files(ctx.source, root)
                    if p.rsplit("/", 1)[-1].startswith("aclnn") and p.endswith(".md")
                    and "docs" in p[len(root) + 1:].split("/")]))
        fetched = ctx.prefetch_paths((p for *_, paths in tree for p in paths),
                                     aclnn_docs.page_or_skip, by_origin=True)
        for repo, ref, root, paths in tree:
            version = cann_of_ref(ref)
            if not paths:
                continue
            pages: list[tuple[str, AclnnPage]] = []
            # A function documented twice at one version (an experimental copy, another
            # library) keeps its first page: the main page before experimental/ ones.
            for path in sorted(paths, key=lambda p: ("/experimental/" in p, p)):
                try:
                    got = fetched.get(path) or ctx.source.fetch(path)
                    reason, maybe = ctx.parsed(got, aclnn_docs.page_or_skip, by_origin=True)
                    if maybe is None:
                        skipped[(reason or "").split(" (")[0].split(":")[0]] += 1
                        continue
                    page = maybe
                except OpcheckError as exc:
                    ctx.failures.append(str(exc))
                    continue
                pages.append((path[len(root) + 1:], page))
            parsed += len(pages)
            sid = ctx.data.add_source(self.name, root,
                                      url=f"https://github.com/hicann/{repo}/blob/{ref}/",
                                      ref=ref, commit="" if version != HEAD else ref,
                                      rows=len(pages))
            for rel, page in pages:
                fresh = {f for f in page.functions if (f, version) not in seen}
                if not fresh:
                    continue
                seen.update((f, version) for f in fresh)
                functions += _functions(page, repo, version, rel, sid, fresh)
                for p in page.params:
                    if p.function not in fresh:
                        continue
                    params.add((p.function, p.param, _flat(p.direction), _csv(p.dtypes),
                                _csv(p.formats), _flat(p.ranks), p.non_contiguous),
                               version, p.line)
                for e in (e for e in page.exceptions if e.function in fresh):
                    exceptions.add((e.function, _csv(e.products), e.kind, _csv(e.dtypes),
                                    _csv(e.params), e.conditional, _flat(e.text)), version, e.line)
                for c in page.constraints:
                    constraints.add((repo, rel, c.kind, _flat(c.subject), _flat(c.value),
                                     _csv(c.products), _flat(c.text)), version, c.line)
        data = ctx.data
        data.aclnn_functions = sorted(functions, key=lambda f: (f.function, cann_order(f.cann)))
        data.aclnn_params = [
            AclnnParamRec(function=fn, param=param, direction=direction, dtypes=dtypes,
                          formats=formats, ranks=ranks, non_contiguous=nc, canns=c, lines=ln)
            for (fn, param, direction, dtypes, formats, ranks, nc), c, ln in params.items()]
        data.aclnn_exceptions = [
            AclnnExceptionRec(function=fn, products=products, kind=kind, dtypes=dtypes,
                              params=names, conditional=cond, canns=c, lines=ln, text=text)
            for (fn, products, kind, dtypes, names, cond, text), c, ln in exceptions.items()]
        data.aclnn_constraints = [
            AclnnConstraintRec(library=lib, path=path, kind=kind, subject=subject, value=value,
                               products=products, canns=c, lines=ln, text=text)
            for (lib, path, kind, subject, value, products, text), c, ln in constraints.items()]
        why = ", ".join(f"{n} {r}" for r, n in skipped.most_common())
        ctx.notes.append(f"aclnn docs: {parsed} pages parsed, {sum(skipped.values())} skipped "
                         f"({why})")


def _functions(page: AclnnPage, library: str, version: str, path: str, sid: int,
               wanted: set[str]) -> list[AclnnFunctionRec]:
    supported = page.supported_on()
    unsupported = [a for p in page.products if not p.supported for a in p.products
                   if a not in supported]
    products_line = page.products[0].line if page.products else 0
    out = []
    for fn in (f for f in page.functions if f in wanted):
        first = min((p.line for p in page.params if p.function == fn), default=0)
        out.append(AclnnFunctionRec(
            function=fn, cann=version, library=library, path=path, line=first,
            supported=_csv(supported), unsupported=_csv(dict.fromkeys(unsupported)),
            products_line=products_line, source_id=sid))
    return out


class OpApiSources:
    name = "opapi_sources"
    reads = f"{OP_PLUGIN}/<pinned commit>/op_plugin/ops/opapi/*.cpp and config/op_plugin_functions.yaml"
    parser = "opcheck.scrapers.opapi_sources"
    adds = "op_aclnn (the aclnn functions each ATen overload's kernel calls, per release)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("op-plugin kernel sources")
        by_pin = releases_by_pin(ctx, "ops/opapi")
        groups: ReleaseGroups[tuple[str, str, str, str, str, str]] = ReleaseGroups(
            ctx.data.releases)
        memo: dict[str, tuple[CppFunction, ...]] = {}  # file text → functions, across pins
        # every pin's kernel sources parse in parallel up front; _link reads them back
        fetched = ctx.prefetch_paths(
            (f"{OP_PLUGIN}/{pin}/op_plugin/ops/opapi/{name}" for pin in sorted(by_pin)
             for name in sorted(ctx.ls(f"{OP_PLUGIN}/{pin}/op_plugin/ops/opapi"))
             if name.endswith(".cpp")), opapi_sources.parse_kernel_source)
        fetched.update(ctx.prefetch_paths(
            (f"{OP_PLUGIN}/{pin}/op_plugin/config/op_plugin_functions.yaml"
             for pin in sorted(by_pin)), opplugin.parse_functions))
        for pin in sorted(by_pin):
            try:
                link, sid, yaml_sid = self._link(ctx, pin, memo, fetched)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            # cite the newest release's pin; the row keeps the file name (the folder at that
            # pin is its source row's path)
            groups.add_pin(
                by_pin[pin], link.rows,
                lambda r: (r.op, r.aclnn, r.kind, r.fallback, r.via, r.match),
                partial(_cite, sid, yaml_sid))
        ctx.data.op_aclnn = sorted(
            (OpAclnnRec(op=key[0], aclnn=key[1], kind=key[2], fallback=key[3], via=key[4],
                        match=key[5], releases=releases, path=path, line=line, source_id=sid)
             for key, releases, path, line, sid in groups.items()),
            key=lambda r: (r.op, r.aclnn, r.kind, r.via, r.fallback),
        )

    def _link(self, ctx: SyncContext, pin: str, memo: dict[str, tuple[CppFunction, ...]],
              fetched: dict[str, Fetched]) -> tuple[opapi_sources.PinLink, int, int]:
        base = f"{OP_PLUGIN}/{pin}/op_plugin"
        config = f"{base}/config/op_plugin_functions.yaml"
        yaml = fetched.get(config) or ctx.source.fetch(config)
        cpps = [fetched.get(path) or ctx.source.fetch(path)
                for name in sorted(ctx.ls(f"{base}/ops/opapi")) if name.endswith(".cpp")
                for path in (f"{base}/ops/opapi/{name}",)]

        def link_files() -> opapi_sources.PinLink:
            kernels = ctx.parsed(yaml, opplugin.parse_functions)
            for got in cpps:
                if got.text not in memo:
                    memo[got.text] = ctx.parsed(got, opapi_sources.parse_kernel_source)
            return opapi_sources.link_pin([(g.origin, g.text) for g in cpps], kernels,
                                          parsed=memo, config=config)

        # a pin's link depends on its files only: a later sync reads it back whole
        link = ctx.combined([yaml, *cpps], opapi_sources.link_pin, link_files)
        sid = ctx.data.add_source(self.name, f"{base}/ops/opapi",
                                  url=f"https://github.com/Ascend/op-plugin/blob/{pin}/op_plugin/ops/opapi",
                                  ref=pin, commit=pin,
                                  rows=sum(r.match != "gen_opapi" for r in link.rows))
        # the links of kernels generated from gen_opapi cite the YAML entry naming the function
        yaml_sid = ctx.data.add_source(self.name, config,
                                       url=f"https://github.com/Ascend/op-plugin/blob/{pin}/op_plugin/config",
                                       ref=pin, commit=pin,
                                       rows=sum(r.match == "gen_opapi" for r in link.rows))
        return link, sid, yaml_sid
