"""Fused-op tips: what a model computes by hand that one torch_npu kernel does at once.

Matched on the recorded calls, never on API names: each recorded op carries the module paths
and source lines that called it, so a pattern is a set of ops met in one module (RMSNorm:
pow/mean/rsqrt/mul in ``layers.0.input_layernorm``), in a module and its parent (SwiGLU: silu
in ``mlp.act_fn``, mul in ``mlp``) or on one source line (code outside modules: optimizer
steps, gradient clipping). A tip names the torch_npu API and its kernel, and is given only
where the target release has that kernel (the catalog's kernel table) and the target product
is not excluded by the docs of the aclnn functions the kernel calls (CANN's operator docs, as
the contract reads them); without a product named, the documented products are listed.
Availability read from a doc of another CANN version is labelled inferred.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opcheck.checker.contract import choose_doc
from opcheck.core.oplist import OpList, OpUse
from opcheck.db import contract as db_contract
from opcheck.db import reads
from opcheck.db.catalog import Catalog, ReleaseInfo

SDPA = "aten::scaled_dot_product_attention"


@dataclass
class Match:
    pattern: str
    keys: list[str]  # module paths (or source lines) where the pattern was seen
    replaces: list[str]  # the recorded ops it replaces
    sites: list[str] = field(default_factory=list)  # their source lines
    count: int = 0  # times the pattern runs (the anchor op's calls)


@dataclass(frozen=True)
class Api:
    """A torch_npu API a tip names and the kernel that decides where it exists."""

    name: str
    op: str
    why: str


def _index(records: Iterable[OpUse]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    by_module: dict[str, set[str]] = defaultdict(set)
    by_line: dict[str, set[str]] = defaultdict(set)
    for use in records:
        for m in use.modules:
            by_module[m].add(use.op)
        for loc in use.locations:
            by_line[loc].add(use.op)
    return by_module, by_line


def _sites(records: Sequence[OpUse], ops: Iterable[str], keys: Iterable[str],
           by_module: bool = True) -> tuple[list[str], int]:
    """Source lines and calls of the records of ``ops`` seen under ``keys``."""
    wanted, where = set(ops), set(keys)
    lines: list[str] = []
    calls = 0
    for use in records:
        if use.op in wanted and where & set(use.modules if by_module else use.locations):
            calls = max(calls, use.count)
            lines += [loc for loc in use.locations if loc not in lines]
    return lines, calls


def _any(ops: set[str], *names: str) -> str:
    return next((n for n in names if n in ops), "")


def match(oplist: OpList) -> list[Match]:
    """Every pattern found in the op list's records (both levels: a composite record names
    what the user called, its children what the backend receives without a kernel for it)."""
    records = [u for u in oplist.ops if SDPA not in u.via]
    by_module, by_line = _index(records)
    found: list[Match] = []

    def add(pattern: str, keys: list[str], replaces: list[str], anchor: list[str],
            by_module_keys: bool = True) -> None:
        if not keys:
            return
        sites, count = _sites(records, anchor, keys, by_module_keys)
        found.append(Match(pattern, sorted(keys), list(dict.fromkeys(replaces)), sites, count))

    rms: list[str] = []
    rms_ops: list[str] = []
    layer: list[str] = []
    layer_ops: list[str] = []
    rope: list[str] = []
    attn: list[str] = []
    attn_ops: list[str] = []
    for m, ops in by_module.items():
        inv = _any(ops, "aten::rsqrt") or (
            _any(ops, "aten::sqrt") and _any(ops, "aten::div.Tensor", "aten::reciprocal"))
        square = _any(ops, "aten::pow.Tensor_Scalar", "aten::square", "aten::mul.Tensor")
        mean = _any(ops, "aten::mean.dim", "aten::var_mean.correction", "aten::var.correction")
        if inv and square and mean and "aten::mul.Tensor" in ops:
            centred = "aten::sub.Tensor" in ops or "var" in mean
            if centred and not ops & {"aten::layer_norm", "aten::native_layer_norm"}:
                layer.append(m)
                layer_ops += [o for o in ("aten::mean.dim", mean, "aten::sub.Tensor", square,
                                          "aten::add.Scalar", "aten::add.Tensor", inv,
                                          "aten::sqrt", "aten::div.Tensor", "aten::mul.Tensor")
                              if o in ops and o not in layer_ops]
            elif not centred:
                rms.append(m)
                rms_ops += [o for o in (square, mean, "aten::add.Scalar", "aten::add.Tensor",
                                        inv, "aten::sqrt", "aten::div.Tensor",
                                        "aten::mul.Tensor") if o in ops and o not in rms_ops]
        # rotate_half (cat) or the interleaved GPT-J rotation (stack of even/odd slices)
        if {"aten::neg", "aten::slice.Tensor", "aten::mul.Tensor", "aten::add.Tensor"} <= ops \
                and ops & {"aten::cat", "aten::stack"}:
            rope.append(m)
        mm = _any(ops, "aten::bmm", "aten::matmul", "aten::baddbmm")
        sm = _any(ops, "aten::_softmax", "aten::softmax.int", "aten::_safe_softmax")
        if mm and sm:
            attn.append(m)
            attn_ops += [o for o in (mm, sm, "aten::masked_fill.Scalar", "aten::div.Tensor",
                                     "aten::mul.Scalar", "aten::dropout")
                         if o in ops and o not in attn_ops]
    add("RMSNorm", rms, rms_ops, ["aten::rsqrt", "aten::sqrt"])
    add("LayerNorm (by hand)", layer, layer_ops, ["aten::rsqrt", "aten::sqrt"])
    rope_ops = [o for o in ("aten::slice.Tensor", "aten::neg", "aten::cat", "aten::stack",
                            "aten::mul.Tensor", "aten::add.Tensor")
                if any(o in by_module[m] for m in rope)]
    add("rotary embedding", rope, rope_ops, ["aten::neg"])
    add("attention (by hand)", attn, attn_ops, ["aten::_softmax", "aten::softmax.int"])
    sdpa = sorted({m for u in oplist.ops if u.op == SDPA for m in u.modules}
                  or {loc for u in oplist.ops if u.op == SDPA for loc in u.locations})
    add("attention (SDPA)", sdpa, [SDPA], [SDPA],
        by_module_keys=any(u.modules for u in oplist.ops if u.op == SDPA))
    # SwiGLU: silu(gate(x)) * up(x): silu in a module (or its activation child), mul there
    swi = [m for m, ops in by_module.items() if "aten::silu" in ops
           and ("aten::mul.Tensor" in ops
                or "aten::mul.Tensor" in by_module.get(m.rpartition(".")[0], set()))]
    add("SwiGLU", swi, ["aten::silu", "aten::mul.Tensor"], ["aten::silu"])
    # optimizer steps and gradient clipping run outside modules: matched per source line
    adam = [k for k, ops in {**by_module, **by_line}.items()
            if _any(ops, "aten::_foreach_lerp_.Scalar", "aten::lerp_.Scalar")
            and _any(ops, "aten::_foreach_addcdiv_.ScalarList", "aten::_foreach_addcdiv_.Scalar",
                     "aten::addcdiv_")
            and _any(ops, "aten::_foreach_sqrt", "aten::sqrt")
            and not _any(ops, "aten::_fused_adamw_", "aten::_fused_adam_")]
    if adam:
        keys = [k for k in adam if ":" not in k] or adam
        # Adam and AdamW record the same ops; AdamW's decoupled weight decay adds one more
        # multiply per step to Adam's (exp_avg_sq *= beta2): told apart by the counts
        where = set(keys)

        def calls(*ops: str) -> int:
            return sum(u.count for u in records if u.op in ops
                       and where & set(u.modules if ":" not in keys[0] else u.locations))

        decoupled = calls("aten::_foreach_mul_.Scalar", "aten::mul_.Scalar") >= 2 * calls(
            "aten::_foreach_lerp_.Scalar", "aten::lerp_.Scalar")
        step_ops = sorted({o for k in keys for o in by_module.get(k, by_line.get(k, set()))
                           if "foreach" in o or o.endswith("_")})
        add("AdamW step" if decoupled else "Adam step", keys, step_ops,
            ["aten::_foreach_lerp_.Scalar", "aten::lerp_.Scalar"],
            by_module_keys=":" not in keys[0])
    clip = [k for k, ops in by_line.items()
            if "aten::linalg_vector_norm" in ops and "aten::stack" in ops
            and _any(ops, "aten::mul_.Tensor", "aten::_foreach_mul_.Tensor", "aten::clamp")
            and "aten::_foreach_norm.Scalar" not in ops]
    add("clip_grad_norm (per tensor)", clip,
        ["aten::linalg_vector_norm", "aten::stack", "aten::clamp", "aten::mul_.Tensor"],
        ["aten::linalg_vector_norm"], by_module_keys=False)
    return found


def apis_for(pattern: str, mode: str) -> list[Api]:
    """The torch_npu APIs (or torch APIs with an NPU fused kernel) a pattern maps to."""
    infer = mode != "train"
    return {
        "RMSNorm": [Api("torch_npu.npu_rms_norm", "npu::npu_rms_norm",
                        "one fused kernel for x * rsqrt(mean(x^2) + eps) * weight")],
        "LayerNorm (by hand)": [Api("torch.nn.functional.layer_norm", "aten::native_layer_norm",
                                    "one LayerNorm kernel instead of mean/sub/var/rsqrt/mul")],
        "rotary embedding": [Api("torch_npu.npu_rotary_mul", "npu::npu_rotary_mul",
                                 "x * cos + rotate_half(x) * sin in one kernel")],
        "attention (by hand)": [
            Api("torch_npu.npu_fused_infer_attention_score",
                "npu::npu_fused_infer_attention_score", "fused inference attention")
            if infer else Api("torch_npu.npu_fusion_attention", "npu::npu_fusion_attention",
                              "flash attention: no score matrix in memory"),
            Api("torch.nn.functional.scaled_dot_product_attention", SDPA,
                "torch_npu's SDPA kernel (fused for the inputs it accepts)")],
        "attention (SDPA)": [
            Api("torch_npu.npu_fused_infer_attention_score",
                "npu::npu_fused_infer_attention_score",
                "fused inference attention with KV-cache layouts; SDPA reaches the fused kernel "
                "only for the inputs torch_npu's SDPA accepts")
            if infer else Api("torch_npu.npu_fusion_attention", "npu::npu_fusion_attention",
                              "flash attention with explicit layout and mask modes; SDPA "
                              "reaches it only for the inputs torch_npu's SDPA accepts")],
        "SwiGLU": [Api("torch_npu.npu_swiglu", "npu::npu_swiglu",
                       "silu(a) * b in one kernel (the two halves of one projection)")],
        "AdamW step": [Api("torch.optim.AdamW(fused=True)", "aten::_fused_adamw_",
                           "one fused kernel per step instead of a foreach op per update term")],
        "Adam step": [Api("torch.optim.Adam(fused=True)", "aten::_fused_adam_",
                          "one fused kernel per step instead of a foreach op per update term")],
        "clip_grad_norm (per tensor)": [Api(
            "torch.nn.utils.clip_grad_norm_(foreach=True)", "aten::_foreach_norm.Scalar",
            "one foreach norm over every gradient instead of a norm per tensor")],
    }.get(pattern, [])


@dataclass
class Availability:
    ok: bool
    text: str
    products: list[str]
    inferred: bool
    links: list[str]


def availability(cat: Catalog, api: Api, release: ReleaseInfo, product: str | None,
                 releases: Callable[[str], list[str]]) -> Availability:
    """Whether ``api``'s kernel exists on ``release`` and ``product`` (see the module doc)."""
    facts = cat.kernel_facts(release.torch_npu, api.op)
    rels = releases(api.op)
    span = (f"kernel {api.op} in {len(rels)} releases ({rels[0]} … {rels[-1]})" if rels
            else f"no release has {api.op}")
    if facts is None or facts.status != "kernel":
        return Availability(False, f"not in torch_npu {release.torch_npu}; {span}", [], False, [])
    supported: set[str] = set()
    unsupported: set[str] = set()
    bases: list[str] = []
    links: list[str] = []
    inferred = False
    functions = db_contract.op_functions(cat.engine, api.op)
    linked = {r for rels in functions.values() for r in rels}
    read_at = release.torch_npu
    if functions and read_at not in linked:
        # the catalog read op-plugin's sources at fewer pins than it has releases: the links
        # of the nearest older linked release (else the oldest), labelled
        order = {r.torch_npu: r.sort_key for r in cat.releases}
        mine = order.get(read_at, 0)
        older = sorted((r for r in linked if order.get(r, 0) <= mine), key=lambda r: order[r])
        read_at = older[-1] if older else min(linked, key=lambda r: order.get(r, 0))
        bases.append(f"aclnn links of {read_at} (inferred: {release.torch_npu}'s pin not read)")
        inferred = True
    wanted = [fn for fn, fn_rels in functions.items() if read_at in fn_rels]
    pages: dict[str, dict[str, db_contract.FunctionDoc]] = {}
    for r in reads.aclnn_product_pages(cat.engine, wanted):
        pages.setdefault(r.function, {})[r.cann] = db_contract.FunctionDoc(
            r.function, r.cann, r.library, r.path, f"{r.base_url}{r.path}" if r.base_url else "",
            r.line, r.supported, r.unsupported, r.products_line)
    for fn in wanted:
        choice = choose_doc(pages.get(fn, {}), release.cann or "", product)
        if choice is None:
            continue
        supported |= set(choice.doc.supported)
        unsupported |= set(choice.doc.unsupported)
        inferred = inferred or choice.inferred
        bases.append(f"{fn}: {choice.basis}")
        if choice.doc.page_url:
            links.append(choice.doc.url(choice.doc.products_line))
    unsupported -= supported
    basis = "; ".join(dict.fromkeys(bases))
    here = f"in torch_npu {release.torch_npu} ({span})"
    if not supported | unsupported:
        return Availability(True, f"{here}; products not documented in the catalog (inferred "
                                  "from the kernel only)", [], True, links)
    products = sorted(supported)
    if product is not None:
        if product in unsupported:
            return Availability(False, f"{here}, but not on {product} ({basis})", products,
                                inferred, links)
        if product not in supported:  # the pages name the products they support
            return Availability(False, f"{here}, but {product} is not among the documented "
                                       f"products ({basis})", products, inferred, links)
        return Availability(True, f"{here}, on {product} ({basis})", products, inferred, links)
    if not products:
        return Availability(False, f"{here}, but no product documented ({basis})", [],
                            inferred, links)
    return Availability(True, f"{here}, on {', '.join(products)} ({basis})", products,
                        inferred, links)


def fused_tips(cat: Catalog, oplist: OpList, release: ReleaseInfo, product: str | None,
               matches: Sequence[Match] | None = None) -> list[dict[str, Any]]:
    """The tips for the op list on ``release`` (and ``product``): only APIs that exist there."""
    found = match(oplist) if matches is None else matches
    if not found:
        return []
    # one read for every kernel a tip may name (it says where each exists)
    spans = cat.kernel_releases({api.op for m in found for api in apis_for(m.pattern,
                                                                           oplist.mode)})

    def releases(op: str) -> list[str]:
        return spans.get(op, [])

    tips: list[dict[str, Any]] = []
    for m in found:
        for api in apis_for(m.pattern, oplist.mode):
            if api.op == SDPA and m.pattern == "attention (SDPA)":
                continue
            av = availability(cat, api, release, product, releases)
            if not av.ok:
                continue
            tips.append({
                "pattern": m.pattern, "api": api.name, "kernel": api.op, "why": api.why,
                "replaces": list(m.replaces), "call_sites": list(m.sites),
                "where": list(m.keys[:8]), "count": m.count, "availability": av.text,
                "products": av.products, "inferred": av.inferred,
                "source": "; ".join(av.links[:2]) or f"catalog kernel table ({api.op})",
            })
            break  # the first API that exists is the tip
    return tips


def tips_for_op(cat: Catalog, op: str) -> list[dict[str, str]]:
    """The op page's tips: the fused APIs whose patterns use ``op``, with the releases that
    have their kernels (no target: every release)."""
    out: list[dict[str, str]] = []
    for pattern, ops in PATTERN_OPS.items():
        if op not in ops:
            continue
        for api in apis_for(pattern, "train") + apis_for(pattern, "inference"):
            if any(t["api"] == api.name for t in out) or api.op == op:
                continue
            rels = cat.kernel_releases([api.op]).get(api.op, [])
            if rels:
                out.append({"pattern": pattern, "api": api.name, "kernel": api.op,
                            "why": api.why, "releases": f"{rels[0]} … {rels[-1]} "
                                                        f"({len(rels)} releases)"})
    return out


# The ops each pattern is made of (for the op page: which tips an op takes part in).
PATTERN_OPS: Mapping[str, frozenset[str]] = {
    "RMSNorm": frozenset({"aten::pow.Tensor_Scalar", "aten::mean.dim", "aten::rsqrt",
                          "aten::rms_norm"}),
    "rotary embedding": frozenset({"aten::neg", "aten::cat"}),
    "attention (by hand)": frozenset({"aten::_softmax", "aten::softmax.int", "aten::bmm"}),
    "attention (SDPA)": frozenset({SDPA}),
    "SwiGLU": frozenset({"aten::silu"}),
    "AdamW step": frozenset({"aten::_foreach_lerp_.Scalar", "aten::_foreach_addcdiv_.ScalarList",
                             "aten::addcdiv_", "aten::lerp_.Scalar"}),
    "clip_grad_norm (per tensor)": frozenset({"aten::linalg_vector_norm"}),
}
