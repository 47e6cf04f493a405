"""The CANN contract applied to traced calls: would the aclnn function accept these dtypes on
this product?

For each recorded call signature of an op the NPU receives: the aclnn functions the op's
op_api kernel calls in the target release (op-plugin's sources at the release's pin), then,
for each, the target CANN version's page: the parameters that the call's arguments fill (by
name: ``self``, ``other``, ``indices``...; the output dtypes go to the function's output
parameters, in order), the dtypes each accepts (the table's list, widened per product by
``额外支持`` and narrowed by the ``不支持``/``仅支持``/``数据类型支持`` statements below it),
and the products the page supports. A dtype outside the list on a product is a finding
naming the function, the parameter, the dtype, the products where it fails and where it is
fine, the page line, and the return code the docs give for it.

What is inferred is labelled, never presented as exact:

* CANN versions before the first open operator docs (8.5.0): the earliest page documenting the
  product is used ("inferred from CANN 9.0.0 docs"); a version between two documented ones uses
  the older; an unknown CANN uses the newest docs.
* Releases whose pinned op-plugin sources are not mirrored: the links of the nearest release
  of the same torch line that has them, else of the nearest linked release (wheel-only
  releases such as 2.13.0).
* ``_to_copy`` and the ``to`` overloads are torch_npu's own kernels (not op-plugin's): a cast
  reaches CANN through ``npu_dtype_cast`` → ``aclnnCast``; that delegation is stated.

Conditional per-product statements ("当…时") are not applied (they hold only in a case the
text describes); parameters the page gives no dtype list for are not judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from opcheck.checker.check import Restriction, RestrictionLookup
from opcheck.checker.contract_dims import dims_restrictions
from opcheck.core.oplist import OpUse, Signature
from opcheck.core.products import canonical_alias, product_names, product_rank
from opcheck.core.versions import doc_cann_key, release_key, torch_minor
from opcheck.db import contract as db
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.contract import HEAD, FunctionDoc, OpLink, cann_dtype

# Ops torch_npu implements itself: the op-plugin op they hand the work to (first one the
# release links wins). A dtype-changing `.to()` is a cast on the NPU: npu_dtype_cast → aclnnCast.
_DELEGATES: dict[str, tuple[str, ...]] = {
    op: ("npu::_npu_dtype_cast", "npu::npu_dtype_cast")
    for op in ("aten::_to_copy", "aten::to.dtype", "aten::to.dtype_layout", "aten::to.other",
               "aten::to.device")
}
# aten::convolution is PyTorch's CompositeExplicitAutograd entry: on the NPU it calls
# _convolution, op-plugin's kernel over aclnnConvolution (the trace records the entry)
_DELEGATES["aten::convolution"] = ("aten::_convolution", "aten::convolution_overrideable")

DOCS_FROM = "8.5.0"  # CANN's operator libraries are open (documented per function) from here


# CANN versions in order, ``head`` (a library documented at a commit) after every release.
cann_key = doc_cann_key


@dataclass(frozen=True)
class Choice:
    doc: FunctionDoc
    basis: str  # "CANN 9.1.0 docs" or "inferred from ..."
    inferred: bool


def choose_doc(docs: dict[str, FunctionDoc], cann: str, product: str | None) -> Choice | None:
    """The page to judge a call on CANN ``cann`` (and ``product``, when given) by."""
    if not docs:
        return None
    order = sorted(docs, key=cann_key)
    tags = [v for v in order if v != HEAD] or order
    if product is not None:  # versions whose page names the product (√ or ×)
        naming = [v for v in tags if product in docs[v].supported + docs[v].unsupported]
        tags = naming or tags
    want = cann_key(cann) if cann else ()
    if not want:
        v = tags[-1]
        return Choice(docs[v], f"inferred from CANN {v} docs (target CANN unknown: the newest)",
                      True)
    older = [v for v in tags if cann_key(v) <= want]
    if older and cann_key(older[-1]) == want:
        return Choice(docs[older[-1]], f"CANN {older[-1]} docs", False)
    if older and cann_key(older[-1]) >= cann_key(DOCS_FROM):
        v = older[-1]
        return Choice(docs[v], f"inferred from CANN {v} docs (the nearest older docs of CANN "
                               f"{cann})", True)
    v = tags[0]
    why = (f"CANN {cann} predates the open operator docs" if want < cann_key(DOCS_FROM)
           else f"no CANN {cann} docs for this function")
    named = f", the earliest naming {product}" if product is not None and v != order[0] else ""
    return Choice(docs[v], f"inferred from CANN {v} docs ({why}{named})", True)


@dataclass(frozen=True)
class Failure:
    product: str
    param: str
    dtype: str
    line: int  # the exception or parameter row that excludes it


def _allowed(doc: FunctionDoc, param: db.ParamFact, product: str) -> tuple[frozenset[str], int]:
    """The dtypes ``param`` accepts on ``product``, and the line of the statement that last
    changed them (the parameter row when none did): the table's list, plus what the page says
    those products support in addition (额外支持), narrowed by 不支持 and by exhaustive lists
    (仅支持, "数据类型支持X、Y"). A list naming no parameter is about the parameters whose
    table list it overlaps (an INT64 index is not limited by "数据类型支持FLOAT、FLOAT16")."""
    allowed, line = param.dtypes, param.line
    applies = [e for e in doc.exceptions
               if product in e.products and not e.conditional
               and (not e.params or param.param in e.params)]
    for e in applies:
        if e.kind == "extra" and e.dtypes - allowed:
            allowed, line = allowed | e.dtypes, e.line
    for e in applies:
        if e.kind == "not":
            allowed, line = allowed - e.dtypes, e.line if allowed & e.dtypes else line
        elif e.kind == "only" and e.dtypes and (e.params or allowed & e.dtypes):
            allowed, line = allowed & e.dtypes, e.line if allowed - e.dtypes else line
    return allowed, line


def _bindings(doc: FunctionDoc, sig: Signature) -> list[tuple[db.ParamFact, str]]:
    """(parameter, CANN dtype) for each argument of the call the page has a parameter for."""
    by_name = {p.param: p for p in doc.params}
    out: list[tuple[db.ParamFact, str]] = []
    for name, dtypes in sig.inputs.items():
        param = by_name.get(name)
        if param is None:
            continue
        for d in dict.fromkeys(x.strip() for x in dtypes.split(",")):
            token = cann_dtype(d)
            if token:
                out.append((param, token))
    # The recorded outputs, in order, fill the page's output parameters in order (values,
    # indices); an ``out=`` argument is bound above by name. Only when the counts agree, or
    # the page has a single output, is an output bound: never to the first one by default.
    # (the catalog keeps parameters sorted by name: the page's order is their line order)
    outputs = sorted((p for p in doc.params if p.is_output and p.param not in sig.inputs),
                     key=lambda p: p.line)
    produced = [cann_dtype(d) for d in sig.outputs]
    if len(outputs) == len(produced) or (len(outputs) == 1 and produced):
        for param, token in zip(outputs, produced, strict=False):
            if token and param.dtypes:
                out.append((param, token))
    return out


def judge(doc: FunctionDoc, calls: Iterable[Signature],
          products: Sequence[str]) -> tuple[list[Failure], list[str]]:
    """The failures of ``calls`` on ``products`` under ``doc``, and the products where every
    judged call is accepted (none when the page lists no dtype for any argument given)."""
    failures: list[Failure] = []
    fine: list[str] = []
    # a parameter without a dtype list on the page (a C type, "same as self") is not judged
    pairs = {(p.param, p.line, d): (p, d) for s in calls for p, d in _bindings(doc, s)
             if p.dtypes}
    if not pairs:
        return [], []
    for product in products:
        bad = False
        for param, dtype in pairs.values():
            allowed, line = _allowed(doc, param, product)
            if dtype not in allowed:
                failures.append(Failure(product, param.param, dtype, line))
                bad = True
        if not bad:
            fine.append(product)
    return failures, fine


def _error_for(cat: Catalog, function: str, trigger: str) -> str:
    for code, name, triggers, _params in db.return_codes(cat.engine, function):
        if trigger in triggers.split(","):
            return f"{code} {name}".strip()
    return ""


def _link_source(cat: Catalog, release: ReleaseInfo, linked: set[str]) -> tuple[str, str]:
    """The release whose op → aclnn links stand for ``release`` ("" when none has links), and
    a label saying so when that is not the release itself."""
    if release.torch_npu in linked:
        return release.torch_npu, ""
    pool = [r.torch_npu for r in cat.releases if r.torch_npu in linked]
    if not pool:
        return "", ""
    same = [r for r in pool if torch_minor(r) == release.torch_minor]
    if same:  # the same torch line: the next linked release, else the newest before
        key = release_key(release.torch_npu)
        after = [r for r in same if release_key(r) >= key]
        source = after[0] if after else same[-1]
    else:  # another line (a wheel-only release): the nearest linked release
        order = {r.torch_npu: r.sort_key for r in cat.releases}
        here = order.get(release.torch_npu, 0)
        source = min(pool, key=lambda r: (abs(order[r] - here), -order[r]))
    return source, f"kernel sources of {source} (the pin of {release.torch_npu} is not mirrored)"


LinkRows = dict[str, list[tuple[OpLink, frozenset[str]]]]


def _links_for(cat: Catalog, op: str, source: str, note: str,
               rows: dict[tuple[str, ...], LinkRows]) -> tuple[list[OpLink], str]:
    """The op's aclnn links in release ``source`` (through the op torch_npu hands the work to,
    for its own kernels), and the label of where they come from. ``rows``: a cache of the
    ops' links over every release (one read per op, not one per op and release)."""
    if not source:
        return [], ""
    names = (op, *_DELEGATES.get(op, ()))
    if names not in rows:
        rows[names] = db.op_link_rows(cat.engine, list(names))
    links = db.links_in(rows[names], source)
    for name in names:
        found = [x for x in links.get(name, []) if x.kind in ("exec", "compat")]
        if found:
            if name != op:
                note = ", ".join(filter(None, [
                    f"torch_npu's {op.removeprefix('aten::')} "
                    f"{'casts' if name.startswith('npu::') else 'runs'} through "
                    f"{name.removeprefix('npu::').removeprefix('aten::')}", note]))
            return found, note
    return [], note


def _slow_path(function: str, docs: dict[str, FunctionDoc], links: Sequence[OpLink],
               cann: str, documented: Sequence[str]) -> Restriction | None:
    """A ``DO_COMPATIBILITY`` kernel on a CANN whose docs exist but do not have the function:
    the kernel runs its acl_op fallback instead (slower), not the aclnn function."""
    compat = next((x for x in links if x.aclnn == function and x.kind == "compat"), None)
    want = cann_key(cann)
    if compat is None or not docs or want not in {cann_key(v) for v in documented}:
        return None
    if any(cann_key(v) == want for v in docs):
        return None
    later = sorted((v for v in docs if cann_key(v) > want), key=cann_key)
    if not later:
        return None
    first = docs[later[0]]
    fallback = compat.fallback or "its acl_op kernel"
    return Restriction(
        function, f"{function} is not in CANN {cann}'s operator docs (first documented in "
                  f"{later[0]}): the kernel falls back to {fallback} (DO_COMPATIBILITY), the "
                  f"older, slower acl_op path", (), first.url(first.line), inferred=True,
        source="cann", basis=f"inferred from the CANN {cann} docs lacking it", slow=True)


def contract_lookup(cat: Catalog, hardware: str | None) -> RestrictionLookup | None:
    """A lookup for ``check`` that applies the aclnn contract; None when the catalog has no
    aclnn tables. ``hardware`` is a product alias (910A, 910B/A2, 910C/A3, 310P, 310B, 950)."""
    if not db.has_contract(cat.engine):
        return None
    product = canonical_alias(hardware) if hardware else None
    linked = db.linked_releases(cat.engine)
    documented = db.documented_canns(cat.engine)
    doc_cache: dict[str, dict[str, FunctionDoc]] = {}
    sources: dict[str, tuple[str, str]] = {}  # target release → (release linked, label)
    link_rows: dict[tuple[str, ...], LinkRows] = {}

    def docs_of(function: str) -> dict[str, FunctionDoc]:
        if function not in doc_cache:
            doc_cache[function] = db.function_docs(cat.engine, function)
        return doc_cache[function]

    def lookup(use: OpUse, target: ReleaseInfo) -> list[Restriction]:
        if not use.signatures:
            return []
        if target.torch_npu not in sources:
            sources[target.torch_npu] = _link_source(cat, target, linked)
        links, via_note = _links_for(cat, use.op, *sources[target.torch_npu], link_rows)
        out: list[Restriction] = []
        judged: dict[str, tuple[list[Restriction], tuple[str, ...]]] = {}
        for function in dict.fromkeys(x.aclnn for x in links):
            docs = docs_of(function)
            slow = _slow_path(function, docs, links, target.cann, documented)
            if slow is not None:
                out.append(slow)
            choice = choose_doc(docs, target.cann, product)
            if choice is None:
                continue
            basis = "; ".join(filter(None, [choice.basis, via_note]))
            judged[function] = _judge_use(cat, choice.doc, use.signatures, product, basis,
                                          inferred=choice.inferred or bool(via_note))
        return out + _one_path(judged)

    return lookup


def _one_path(judged: dict[str, tuple[list[Restriction], tuple[str, ...]]]) -> list[Restriction]:
    """A kernel that calls several aclnn functions takes one of them per call (a format, a
    version or a value picks the branch), which the trace cannot tell. A product counts as
    failing only when every function judged for it rejects the call; a rejection by one
    branch while another accepts stays listed, not counted."""
    failing: dict[str, set[str]] = {
        fn: {p for r in found if r.violated for p in r.products_failing}
        for fn, (found, _) in judged.items()}

    def fails(product: str) -> bool:
        return all(product in failing[fn] for fn, (_, considered) in judged.items()
                   if product in considered)

    out: list[Restriction] = []
    for fn, (found, _) in judged.items():
        others = [f for f in judged if f != fn]
        for r in found:
            if not r.violated:
                out.append(r)
                continue
            kept = tuple(p for p in r.products_failing if fails(p))
            if kept == r.products_failing:
                out.append(r)
            elif kept:
                out.append(replace(r, products_failing=kept, hardware=",".join(kept),
                                   text=f"{r.text} [counted on {product_names(kept)} only: on the "
                                        f"others another branch ({', '.join(others)}) accepts it]"))
            else:
                out.append(replace(r, dtypes_seen_outside=(), unsupported=False,
                                   text=f"{r.text} [not counted: the kernel also calls "
                                        f"{', '.join(others)}, which accepts it; one branch runs]"))
    return out


def _judge_use(cat: Catalog, doc: FunctionDoc, calls: Sequence[Signature], product: str | None,
               basis: str, *, inferred: bool) -> tuple[list[Restriction], tuple[str, ...]]:
    """The restrictions of ``doc`` on these calls, and the products it judged them for."""
    fn = doc.function
    if product is not None and product not in doc.supported:
        if product in doc.unsupported:
            return [Restriction(
                fn, f"{fn} is not supported on {product} ({basis})", (),
                doc.url(doc.products_line), product, unsupported=True, inferred=inferred,
                source="cann", products_failing=(product,),
                error=_error_for(cat, fn, "product"), basis=basis)], (product,)
        return [], ()  # the page does not name the product: nothing to judge by
    products = [product] if product is not None else list(doc.supported)
    shaped = dims_restrictions(doc, calls, products, basis,
                               lambda: _error_for(cat, fn, "dtype"), inferred=inferred)
    failures, fine = judge(doc, calls, products)
    if shaped:
        rejected = {p for r in shaped for p in r.products_failing}
        fine = [p for p in fine if p not in rejected]
    if not failures:
        if not fine:
            return shaped, tuple(products) if shaped else ()
        # Judged and accepted: said so, since it outweighs the generic per-API docs.
        return [*shaped, Restriction(
            fn, f"{fn} accepts the traced dtypes on {product_names(fine)} — {basis}", (),
            doc.url(doc.line), inferred=inferred, source="cann",
            products_fine=tuple(sorted(fine, key=product_rank)), basis=basis)], tuple(products)
    out = []
    by_case: dict[tuple[str, tuple[str, ...]], list[Failure]] = {}
    for f in failures:
        failing = tuple(sorted({x.product for x in failures
                                if (x.param, x.dtype) == (f.param, f.dtype)}, key=product_rank))
        by_case.setdefault((f.dtype, failing), []).append(f)
    for (dtype, failing), fs in by_case.items():
        params = tuple(dict.fromkeys(f.param for f in fs))
        ok = tuple(sorted((p for p in products if p not in failing), key=product_rank))
        error = _error_for(cat, fn, "dtype")
        text = (f"{fn}: {', '.join(params)} "
                f"{'does' if len(params) == 1 else 'do'} not accept {dtype} on {product_names(failing)}"
                + (f"; fine on {product_names(ok)}" if ok else "")
                + (f" (the call returns {error})" if error else "") + f" — {basis}")
        out.append(Restriction(
            fn, text, (dtype,), doc.url(min(f.line for f in fs)), ",".join(failing),
            inferred=inferred, source="cann", param=",".join(params), products_failing=failing,
            products_fine=ok, error=error, basis=basis))
    return shaped + out, tuple(products)


def combine(*lookups: RestrictionLookup | None) -> RestrictionLookup | None:
    """One lookup running each given one (None when none is given)."""
    present = [x for x in lookups if x is not None]
    if not present:
        return None

    def lookup(use: OpUse, target: ReleaseInfo) -> list[Restriction]:
        found = [r for x in present for r in x(use, target)]
        cann = [r for r in found if r.source == "cann"]
        if cann and not any(r.violated for r in cann):
            # The aclnn contract judged these calls per parameter and product and accepts
            # them: the per-API docs' generic limits stay listed but no longer count.
            found = [r if r.source == "cann" else replace(
                r, dtypes_seen_outside=(), unsupported=False,
                text=f"{r.text} [outweighed by the aclnn contract]") for r in found]
        return found

    return lookup


def aclnn_summary(cat: Catalog, op: str) -> list[dict[str, Any]]:
    """The aclnn functions an op's kernel calls (in any release) and each one's documented
    contract per CANN version: the ``aclnn`` part of the op-history document."""
    if not db.has_contract(cat.engine):
        return []
    functions = db.op_functions(cat.engine, op)
    delegate = ""
    for name in _DELEGATES.get(op, ()):
        if not functions:
            functions, delegate = db.op_functions(cat.engine, name), name
    out: list[dict[str, Any]] = []
    for function, releases in functions.items():
        docs = db.function_docs(cat.engine, function)
        out.append({
            "function": function,
            "releases": sorted(releases, key=release_key),
            "via": delegate,
            "docs": [doc_json(docs[v]) for v in sorted(docs, key=cann_key)],
        })
    return out


def doc_json(doc: FunctionDoc) -> dict[str, Any]:
    products = sorted(doc.supported, key=product_rank)
    return {
        "cann": doc.cann, "library": doc.library, "url": doc.page_url,
        "supported": products, "unsupported": sorted(doc.unsupported, key=product_rank),
        "params": [
            {"param": p.param, "direction": p.direction, "dtypes": sorted(p.dtypes),
             "formats": list(p.formats), "ranks": p.ranks, "non_contiguous": p.non_contiguous,
             "url": doc.url(p.line),
             # the dtypes each supported product accepts, after its exceptions
             "by_product": {prod: sorted(_allowed(doc, p, prod)[0]) for prod in products}}
            for p in doc.params
        ],
        "exceptions": [
            {"products": list(e.products), "kind": e.kind, "dtypes": sorted(e.dtypes),
             "params": list(e.params), "conditional": e.conditional, "url": doc.url(e.line),
             "text": e.text}
            for e in doc.exceptions
        ],
        "constraints": [
            {"kind": c.kind, "subject": c.subject, "value": c.value,
             "products": list(c.products), "url": doc.url(c.line), "text": c.text}
            for c in doc.constraints
        ],
    }


@dataclass(frozen=True)
class DtypeSupport:
    """Where an aclnn function's docs accept one dtype: what ``opcheck explain`` adds to a
    "not implemented for DT_X" failure."""

    function: str
    dtype: str  # the CANN token (BFLOAT16)
    accepts: tuple[str, ...]  # products where some parameter takes it
    rejects: tuple[str, ...]  # products where none does
    url: str
    basis: str

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "dtype": self.dtype, "accepts": list(self.accepts),
                "rejects": list(self.rejects), "url": self.url, "basis": self.basis}


def dtype_support(cat: Catalog, function: str, traced: str, cann: str = "") -> DtypeSupport | None:
    """The products whose documented contract of ``function`` takes dtype ``traced`` (a torch
    name, ``bfloat16``, or a CANN token, ``DT_BFLOAT16``); None when undocumented."""
    token = cann_dtype(traced) or traced.upper().removeprefix("DT_")
    if not db.has_contract(cat.engine):
        return None
    docs = db.function_docs(cat.engine, function)
    choice = choose_doc(docs, cann, None)
    if choice is None:
        return None
    doc, basis = choice.doc, choice.basis
    if choice.inferred:  # no docs of that CANN: the newest name the most products
        newest = [v for v in sorted(docs, key=cann_key) if v != HEAD] or sorted(docs)
        doc = docs[newest[-1]]
        basis = f"inferred from CANN {doc.cann} docs, the newest" + (
            f" (no docs of CANN {cann})" if cann else "")
    typed = [p for p in doc.params if p.dtypes]
    if not typed:
        return None
    accepts: list[str] = []
    rejects: list[str] = []
    line = doc.line
    for product in doc.supported:
        narrowed = [_allowed(doc, p, product) for p in typed]
        if any(token in allowed for allowed, _ in narrowed):
            accepts.append(product)
        else:
            rejects.append(product)
            # cite the statement that excludes it (a line below the table) over a parameter
            # row that never listed it
            said = [ln for (_, ln), p in zip(narrowed, typed, strict=True) if ln != p.line]
            line = min(said) if said else min(ln for _, ln in narrowed)
    return DtypeSupport(function, token, tuple(sorted(accepts, key=product_rank)),
                        tuple(sorted(rejects, key=product_rank)), doc.url(line), basis)
