"""Distributed on HCCL: what torch_npu's process group does with each c10d collective a run
recorded, on the target release.

The facts come from torch_npu's own sources (``opcheck.scrapers.hccl``, table ``hccl_fact``):
the C++ process group (``ProcessGroupHCCL.cpp``, ``HCCLUtils.cpp``, ``HcclCompile.h``) and the
Python layer (``distributed_c10d.py``). A release whose own tag was not read takes the nearest
read tag of its torch line, per side, and every answer says so (``inferred``).

Per op (the resolver asks ``opcheck.checker.hccl_facts``): runs on HCCL (``npu``), emulated
by torch_npu (``npu`` plus a speed restriction here, with the cost and the fix), refused
(``unsupported`` with the line). Per recorded call (:func:`hccl_lookup`, a restriction lookup):
the dtype against the dtype map and the per-collective check (restricted, with the cast), the
ReduceOp (AVG summed then divided, refused, or silently summed, per era), alltoall's 0-dim and
uneven-split rules.
"""

from __future__ import annotations

from opcheck.checker.check import Restriction, RestrictionLookup
from opcheck.checker.hccl_facts import COLLECTIVES, Collective, HcclRelease, for_release
from opcheck.core.oplist import OpUse, Signature
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.hccl import HcclFact, fact_files
from opcheck.scrapers import hccl as h

# what to cast a dtype HCCL does not take to (the usual lossless or closest choice)
_CAST = {"float64": "float32", "complex64": "torch.view_as_real (float32 pairs)",
         "complex128": "torch.view_as_real then float32", "uint16": "int32", "uint32": "int64",
         "uint64": "int64", "bool": "int32", "uint8": "int32", "float8_e4m3fn": "float16",
         "float8_e5m2": "float16"}  # fmt: skip
_HCCL_TO_TORCH = {
    "HCCL_DATA_TYPE_INT8": "int8", "HCCL_DATA_TYPE_INT16": "int16",
    "HCCL_DATA_TYPE_INT32": "int32", "HCCL_DATA_TYPE_INT64": "int64",
    "HCCL_DATA_TYPE_FP16": "float16", "HCCL_DATA_TYPE_FP32": "float32",
    "HCCL_DATA_TYPE_BFP16": "bfloat16", "HCCL_DATA_TYPE_FP64": "float64",
    "HCCL_DATA_TYPE_UINT8": "uint8", "HCCL_DATA_TYPE_UINT16": "uint16",
    "HCCL_DATA_TYPE_UINT32": "uint32", "HCCL_DATA_TYPE_UINT64": "uint64",
}  # fmt: skip


def _dtype_restrictions(rel: HcclRelease, coll: Collective, sig: Signature,
                        dtype: str) -> list[Restriction]:  # fmt: skip
    api = f"torch.distributed.{coll.api}"
    mapped = {f.subject: f for f in rel.of(h.DTYPE_MAP)}
    if not mapped:
        return []
    cast = _CAST.get(dtype, "a dtype HCCL maps")
    if dtype not in mapped:
        at = rel.of(h.DTYPE_MAP)[0]
        return [Restriction(api, f"{dtype} has no HCCL data type: \"Unsupported data type for "
                                 f"HCCL process group\"; cast to {cast} before the call and back "
                                 "after", dtypes_seen_outside=(dtype,), link=at.url,
                            source="hccl", basis=rel.basis(at))]
    checks = rel.of(h.CHECKS_DTYPE, coll.method)
    if not checks:
        return []
    ok = {_HCCL_TO_TORCH.get(f.value, f.value) for f in rel.of(h.DTYPE_CHECKED)}
    if rel.of(h.BOOL_CAST, coll.method):
        ok |= {"bool", "uint8"}  # cast to int32 before the check
    if dtype in ok:
        return []
    c = checks[0]
    return [Restriction(api, f"HCCL {coll.method}: Unsupported data type {dtype} (accepted: "
                             f"{', '.join(sorted(ok))}); cast to {cast} before the call and "
                             "back after", dtypes_seen_outside=(dtype,), link=c.url,
                        source="hccl", basis=rel.basis(c))]


def _reduce_restrictions(rel: HcclRelease, coll: Collective, op: str) -> list[Restriction]:
    api = f"torch.distributed.{coll.api}"
    fact = next(iter(rel.of(h.REDUCE_OP, op)), None)
    if fact is None or fact.value == h.NATIVE:
        return []
    if fact.value == h.REFUSED_OP:
        return [Restriction(api, f"{fact.message}: reduce with SUM (then divide for AVG) or "
                                 "MIN/MAX instead", unsupported=True, link=fact.url,
                            source="hccl", basis=rel.basis(fact))]
    if fact.value == h.UNCHECKED:
        return [Restriction(api, f"ReduceOp.{op} reaches HCCL unchecked and is summed "
                                 "(wrong result, no error); reduce with SUM and divide by the "
                                 "group size yourself", unsupported=True, link=fact.url,
                            source="hccl", basis=rel.basis(fact))]
    div = next(iter(rel.of(h.AVG_DIVIDE, coll.method)), None)
    if div is None:
        return [Restriction(api, f"ReduceOp.{op}: {coll.method} does not divide after the "
                                 "sum on this release (wrong result); reduce with SUM and divide",
                            unsupported=True, link=fact.url, source="hccl",
                            basis=rel.basis(fact))]
    return [Restriction(api, f"ReduceOp.{op} on HCCL: {fact.message} ({div.message}): one "
                             "more kernel per call, after the collective. Fix: none needed; "
                             "with SUM and your own division you can fold it into the next op",
                        link=div.url, source="hccl", basis=rel.basis(div), slow=True)]


def _alltoall_restrictions(rel: HcclRelease, coll: Collective, sig: Signature,
                           shape: list[int] | None) -> list[Restriction]:  # fmt: skip
    api = f"torch.distributed.{coll.api}"
    out = []
    uneven = sig.args.get("splits") == "uneven"
    zero = next(iter(rel.of(h.ZERO_DIM, coll.method)), None)
    if zero is not None and shape == [] and not uneven:
        out.append(Restriction(api, zero.message, unsupported=True, link=zero.url,
                               source="hccl", basis=rel.basis(zero)))
    if uneven:
        fact = next(iter(rel.of(h.UNEVEN, coll.method)), None)
        sym = next(iter(rel.of(h.SYMBOL, "HcclAlltoAllV")), None)
        if fact is None:
            out.append(Restriction(api, "uneven split sizes: no HcclAlltoAllV path in this "
                                        "release's sources", unsupported=True, source="hccl",
                                   basis=rel.basis()))
        else:
            needs = (" (looked up in CANN's libhccl at run time: a CANN without it fails)"
                     if sym is not None else "")
            out.append(Restriction(api, f"uneven split sizes: {fact.message}{needs}",
                                   link=fact.url, source="hccl", basis=rel.basis(fact)))
    return out


def _emulation(rel: HcclRelease, coll: Collective, group: int,
               use: OpUse) -> list[Restriction]:  # fmt: skip
    emulated = rel.of(h.EMULATED, coll.api)
    if not emulated:
        return []
    e = emulated[0]
    n = f"{group}×" if group > 1 else "N× (N ranks)"
    cost = (f"emulated: {e.message} Every rank receives every rank's tensor: {n} the traffic "
            "and output memory of a gather, plus a broadcast_object_list of the shapes per call")
    if "use_compatible_impl" in e.value:
        # newer sources gather natively when torch_npu's compatible implementation is on
        cost += (" (unless torch_npu's compatible implementation is on: "
                 "torch_npu.npu.use_compatible_impl(True), on the SoCs the code names)")
    out = []
    apis = {a.rsplit(".", 1)[-1] for s in use.signatures for a in s.apis} or {coll.api}
    if apis - {"gather_object"}:
        out.append(Restriction(
            f"torch.distributed.{coll.api}", f"{cost}. Fix: all_gather_into_tensor into one "
            "preallocated tensor (every rank gets the result; keep dst's use of it), or, when "
            "only dst needs it and N is large, send/recv to dst", link=e.url, source="hccl",
            basis=rel.basis(e), slow=True))
    if "gather_object" in apis:
        out.append(Restriction(
            "torch.distributed.gather_object", f"{cost}; gather_object adds an all_gather of "
            "the pickled sizes and pickles on every rank. Fix: all_gather_object only where "
            "every rank needs the objects, else send the objects' tensors to dst with send/recv, "
            "or gather small metadata over a gloo group on the CPU", link=e.url,
            source="hccl", basis=rel.basis(e), slow=True))
    return out


def hccl_lookup(cat: Catalog) -> RestrictionLookup | None:
    """A restriction lookup for ``check``: the c10d calls a run recorded, judged on the target
    release's HCCL facts; None when the catalog has none."""
    if not fact_files(cat.engine):
        return None
    cache: dict[str, HcclRelease] = {}

    def lookup(use: OpUse, target: ReleaseInfo) -> list[Restriction]:
        coll = COLLECTIVES.get(use.op)
        if coll is None:
            return []
        rel = cache.get(target.torch_npu)
        if rel is None:
            rel = cache[target.torch_npu] = for_release(cat, target)
        if not rel.known:
            return []
        group = max((int(s.args.get("group_size", 0) or 0) for s in use.signatures), default=0)
        out = _emulation(rel, coll, group, use)
        seen: set[str] = set()
        wraps = {f.value.split("->")[0]: f for f in rel.of(h.DTYPE_WRAP, coll.api)}
        for sig, shape in _calls(use):
            for dtype in dict.fromkeys(sig.inputs.values()):
                wrap = wraps.get(dtype)
                if wrap is not None:
                    out.append(_wrapped(rel, coll, wrap))
                    dtype = wrap.value.split("->")[1]
                out += _dtype_restrictions(rel, coll, sig, dtype)
            op = str(sig.args.get("op", ""))
            if coll.reduces and op:
                out += _reduce_restrictions(rel, coll, op)
            if coll.method == "alltoall_base":
                out += _alltoall_restrictions(rel, coll, sig, shape)
        return [r for r in out if r.text not in seen and not seen.add(r.text)]  # type: ignore[func-returns-value]

    return lookup


def _wrapped(rel: HcclRelease, coll: Collective, wrap: HcclFact) -> Restriction:
    src, _, dst = wrap.value.partition("->")
    return Restriction(f"torch.distributed.{coll.api}",
                       f"{wrap.message}: a copy each way per call, and {src} values outside "
                       f"{dst}'s range do not survive. Fix: send {dst} yourself where the values "
                       "fit, or a release whose HCCL takes the dtype", link=wrap.url,
                       source="hccl", basis=rel.basis(wrap), slow=True)


def _calls(use: OpUse) -> list[tuple[Signature, list[int] | None]]:
    """Each recorded call signature with its shape (a collective's record carries the shape
    in its arguments)."""
    out = []
    for sig in use.signatures:
        raw = sig.args.get("shape")
        shape = [int(x) for x in raw] if isinstance(raw, list) else None
        out.append((sig, shape))
    return out



def accepted_dtypes(rel: HcclRelease, coll: Collective) -> list[str]:
    """The dtypes the collective takes on the release (the map, narrowed by the per-collective
    check where the method makes it)."""
    mapped = [f.subject for f in rel.of(h.DTYPE_MAP)]
    if not rel.of(h.CHECKS_DTYPE, coll.method):
        return sorted(set(mapped))
    ok = {_HCCL_TO_TORCH.get(f.value, f.value) for f in rel.of(h.DTYPE_CHECKED)}
    if rel.of(h.BOOL_CAST, coll.method):
        ok |= {"bool", "uint8"}
    return sorted(set(mapped) & ok)


def collective_history(cat: Catalog, op: str) -> list[dict[str, object]]:
    """What ``op`` (a c10d collective) is on every release the catalog has HCCL facts for:
    status, why (with the source line), the dtypes it takes, the ReduceOps, and the basis
    (the tag read, or the nearest one, inferred). Empty when ``op`` is no collective or the
    catalog has no HCCL facts."""
    coll = COLLECTIVES.get(op)
    if coll is None or not fact_files(cat.engine):
        return []
    out: list[dict[str, object]] = []
    for release in cat.releases:
        rel = for_release(cat, release)
        decided = rel.decide(op)
        if decided is None:
            continue
        reduce_ops = {f.subject: f.value for f in rel.of(h.REDUCE_OP)} if coll.reduces else {}
        emulated = bool(rel.of(h.EMULATED, coll.api))
        out.append({
            "torch_npu": release.torch_npu, "torch": release.torch, "train": release.train,
            "status": decided[0].value,
            "how": ("emulated" if emulated else "refused" if decided[0].value == "unsupported"
                    else "native"),
            "why": decided[1], "dtypes": accepted_dtypes(rel, coll),
            "reduce_ops": reduce_ops, "rules": _rules(rel, coll),
            "inferred": rel.cpp_inferred or rel.py_inferred, "basis": rel.basis(),
        })
    return out


def _rules(rel: HcclRelease, coll: Collective) -> list[str]:
    """The collective's own rules on the release, each with its line: shape rules, casts,
    AVG's division, the HCCL functions it calls (looked up at run time when listed)."""
    symbols = {f.subject for f in rel.of(h.SYMBOL)}
    out = [f"{f.kind}: {f.message}" + (f" (when {f.value})" if f.kind == h.ZERO_DIM and f.value
                                       else "") + f" {f.url}"
           for kind in (h.ZERO_DIM, h.UNEVEN, h.BOOL_CAST, h.AVG_DIVIDE)
           for f in rel.of(kind, coll.method)[:1]]
    out += [f"dtype_wrap: {f.message} {f.url}" for f in rel.of(h.DTYPE_WRAP, coll.api)]
    calls = [f.value + (" (run-time lookup)" if f.value in symbols else "")
             for f in rel.of(h.CALLS, coll.method)]
    if calls:
        out.append("calls: " + ", ".join(dict.fromkeys(calls)))
    return out
