"""The APIs and ops around the kernels: torch_npu's API docs, the API → op map, the aclnn
return codes of the CANN docs and PyTorch's own op universe."""

from __future__ import annotations

from collections.abc import Iterable

from opcheck.core.errors import OpcheckError
from opcheck.core.opname import OpName
from opcheck.db.data import (
    AclnnCodeRec,
    ApiFacts,
    ApiOpRec,
    ApiSupportRec,
    OperatorRec,
)
from opcheck.scrapers import aclnn_codes, apidocs, apidocs_dtypes, apimap
from opcheck.sync.context import SyncContext, canonical_url
from opcheck.sync.releases import PYTORCH
from opcheck.sync.sources import walk_files as _walk

# --- API docs ----------------------------------------------------------------------------------




def _arg_limits(limits: Iterable[apidocs_dtypes.ArgLimit]) -> str:
    return ";".join(
        f"{a.arg}:{a.kind}:{'|'.join(v.replace(';', ',') for v in a.values)}" for a in limits
    )


class ApiDocs:
    name = "apidocs"
    reads = f"{PYTORCH}/<every ref>/docs/**/*.md (the per-API support docs)"
    parser = "opcheck.scrapers.apidocs"
    adds = "api_support"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("API support docs")
        paths: list[str] = []
        for ref in ctx.ls(PYTORCH):
            paths += _walk(ctx.source, f"{PYTORCH}/{ref}/docs")
        docs = apidocs.api_doc_paths(paths)
        ctx.prefetch_paths(docs, apidocs.parse_markdown, by_origin=True, kept=True)
        for path in docs:
            try:
                got, sid = ctx.fetch(path, "apidocs")
                # rows carry the doc version and ref read off the path
                rows = ctx.parsed(got, apidocs.parse_markdown, by_origin=True)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            ctx.count(sid, len(rows))
            for r in rows:
                facts = ApiFacts(
                    api=r.api, feature=r.feature, hardware=r.hardware, supported=r.supported,
                    only_dtypes=",".join(r.only_dtypes) if r.only_dtypes else "",
                    unsupported_dtypes=",".join(r.unsupported_dtypes),
                    arg_limits=_arg_limits(r.arg_limits), generation=r.generation,
                )
                ctx.data.api_support.append(ApiSupportRec(facts, r.doc_version, r.ref,
                                                          r.restriction, r.line, sid))


class ApiMap:
    name = "apimap"
    reads = "nothing upstream: data/api_overrides.yaml (packaged) and the op universe"
    parser = "opcheck.scrapers.apimap"
    adds = "api_ops (documented Python API → ATen ops)"

    def collect(self, ctx: SyncContext) -> None:
        if ctx.universe is None:
            return
        aten = {o.op for o in ctx.universe.operators}
        overrides = apimap.load_overrides()
        overridden = {apimap.normalize_api(k) for k in overrides}
        for api in sorted({a.facts.api for a in ctx.data.api_support}):
            via = "override" if apimap.normalize_api(api) in overridden else "rule"
            ctx.data.api_ops += [ApiOpRec(api=api, op=op, via=via)
                                 for op in apimap.link_api(api, aten, overrides)]


# --- aclnn return codes ------------------------------------------------------------------------

HICANN = "github/hicann"


def _newest_ref(refs: list[str]) -> str:
    """The newest tag (``v9.1.0``) of a docs repository, else its one pinned commit."""
    tags = [r for r in refs if r.startswith("v") and r[1:].replace(".", "").isdigit()]
    if tags:
        return max(tags, key=lambda r: tuple(int(x) for x in r[1:].split(".") if x))
    return sorted(refs)[-1] if refs else ""


class AclnnCodes:
    name = "aclnn_codes"
    reads = f"{HICANN}/<ops-* repo>/<newest ref>/**/aclnn*.md, aclnn返回码.md (CANN operator docs)"
    parser = "opcheck.scrapers.aclnn_codes"
    adds = "aclnn_codes (the shared return-code table and each aclnn function's own rows)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("aclnn return codes")
        paths: list[str] = []
        for repo in ctx.ls(HICANN):
            ref = _newest_ref(ctx.ls(f"{HICANN}/{repo}"))
            if ref:
                paths += _walk(ctx.source, f"{HICANN}/{repo}/{ref}")
        pages = [p for p in sorted(paths)
                 if aclnn_codes.is_code_page(p) or aclnn_codes.is_function_page(p)]
        fetched = ctx.prefetch_paths(pages, aclnn_codes.parse_return_codes, by_origin=True)
        for path in pages:
            try:
                # Only pages with a return-code table become sources (most pages of a repo
                # are not about codes), so they are fetched past ctx.fetch.
                got = fetched.get(path) or ctx.source.fetch(path)
                # a function page's rows name the function its path says
                rows = ctx.parsed(got, aclnn_codes.parse_return_codes, by_origin=True)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            if not rows:
                continue
            o = got.origin
            sid = ctx.data.add_source(self.name, path, url=o.url or canonical_url(path),
                                      ref=o.ref, commit=o.commit, sha256=o.sha256, rows=len(rows))
            ctx.data.aclnn_codes += [
                AclnnCodeRec(function=r.function, code=r.code, name=r.name,
                             triggers=",".join(r.triggers), params=",".join(r.params),
                             line=r.line, description=r.description, source_id=sid)
                for r in rows
            ]


# --- the op universe ---------------------------------------------------------------------------


class PytorchUniverse:
    name = "pytorch"
    reads = "the installed torch's torchgen/packaged/ATen/native/native_functions.yaml (ctx.universe)"
    parser = "opcheck.scrapers.pytorch"
    adds = "operators (also for ops only the registries or deprecations name)"

    def collect(self, ctx: SyncContext) -> None:
        data, universe = ctx.data, ctx.universe
        ops: dict[str, OperatorRec] = {}
        if universe is not None:
            sid = data.add_source("pytorch", universe.origin.path, ref=universe.origin.ref,
                                  url="https://github.com/pytorch/pytorch/blob/"
                                      f"v{universe.torch_version}/aten/src/ATen/native/native_functions.yaml",
                                  rows=len(universe.operators))
            for r in universe.operators:
                name = OpName.parse(r.op)
                ops[r.op] = OperatorRec(
                    op=r.op, namespace=name.namespace, name=name.name, overload=name.overload,
                    schema_=r.schema, tags=",".join(r.tags), dispatch=",".join(r.dispatch),
                    kernel_kind=r.kernel_kind, structured_delegate=r.structured_delegate or "",
                    source_id=sid)
        # Ops the registries name that this torch does not know (custom npu:: ops, ATen ops of
        # other torch versions) still need a row: schema from the registry, kind unknown.
        schemas: dict[str, str] = {}
        for row in ctx.parsed_kernel_rows():
            schemas.setdefault(row.op, row.schema)
        for k in data.kernels:
            if k.op not in ops:
                name = OpName.parse(k.op)
                ops[k.op] = OperatorRec(op=k.op, namespace=name.namespace, name=name.name,
                                        overload=name.overload, schema_=schemas.get(k.op, ""),
                                        source_id=k.source_id)
        for d in data.deprecations:
            if d.op not in ops:
                name = OpName.parse(d.op)
                ops[d.op] = OperatorRec(op=d.op, namespace=name.namespace, name=name.name,
                                        overload=name.overload, source_id=d.source_id)
        data.operators = sorted(ops.values(), key=lambda o: o.op)


# The order collect() runs them in (see the module docstring).
