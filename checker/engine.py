"""How a recorded call runs inside CANN: on the AI Core or the AI CPU, and whether the op types
it launches have a kernel binary for the target SoC.

The facts come from CANN's open operator sources (``opcheck.scrapers.cann_engine``: every
launch an aclnn entry reaches, with the condition under which it does;
``opcheck.scrapers.cann_binaries``: the binaries shipped per SoC). This module decides them on
one call signature: the ATen op → aclnn functions its kernel calls in the release (op_aclnn),
the call's dtypes per argument, and the SoC of the target product.

* ``aicpu``: an AI CPU launch is reached whatever the undecided conditions are (``holds``);
  the finding cites the conditions that decided it (file:line);
* ``aicore``: no AI CPU launch is reachable, or only for shapes, sizes (rank, element or
  index counts), memory layouts (strides, offsets, aliasing) and dtypes of CANN's own
  intermediate tensors, which are listed (``aicpu_when``);
* ``maybe_aicpu``: an AI CPU launch depends on something the signature does not say (index
  positions, argument values): "may run on the AI CPU when <condition>" with its file:line;
* ``unknown``: the aclnn function launches nothing the open sources define (CANN's closed
  built-in kernels): never guessed.

What op-plugin does before CANN sees the call comes first: boolean/byte masks in ``index`` /
``index_put`` are turned into int64 indices with ``nonzero`` (``npu_expand_tensors``, a host
sync and a data-dependent shape), so the routing is decided on int64 indices and the nonzero
is reported as a step of its own.

CANN versions before 8.5.0 have no open sources: facts come from the earliest documented
version and say so (``basis``), as the aclnn contract does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opcheck.checker.check import Restriction
from opcheck.checker.contract import _link_source, _links_for, cann_key, choose_doc
from opcheck.core.oplist import OpUse, Signature
from opcheck.core.products import canonical_alias
from opcheck.core.vocab import Engine
from opcheck.db import cann_engine as db
from opcheck.db import contract as db_contract
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.contract import HEAD
from opcheck.scrapers.cann_engine import EngineSite
from opcheck.scrapers.cann_formula import (
    Call,
    DtypeEq,
    DtypeIs,
    Formula,
    SocIs,
    Unknown,
    deciding_atoms,
    describe,
    evaluate,
    f_or,
    formula_loads,
    holds,
    role,
    undecided_atoms,
)

# --hardware alias → the SoC name of CANN's sources and binary lists
SOC_OF_PRODUCT = {
    "910A": "ascend910", "910B": "ascend910b", "910C": "ascend910_93", "310P": "ascend310p",
    "310B": "ascend310b", "950": "ascend950",
}

# the SoCs whose binaries, when an op type has some, say it is built for the Ascend line
MAIN_SOCS = frozenset({"ascend910", "ascend910b", "ascend910_93", "ascend310p", "ascend310b"})

# op-plugin turns boolean/byte masks into int64 indices before these aclnn functions run
MASK_EXPANDED = frozenset({"aclnnIndexPutImpl", "aclnnIndex", "aclnnIndexPut"})
MASK_DTYPES = frozenset({"bool", "uint8"})


@dataclass(frozen=True)
class Cite:
    text: str
    where: str  # library/path:line (relative to the library at that CANN version)
    url: str = ""


@dataclass
class EngineDecision:
    """One aclnn function on one call signature and SoC."""

    aclnn: str
    engine: str  # an Engine value: aicore | aicpu | maybe_aicpu | unknown
    aicpu_ops: list[str] = field(default_factory=list)  # AI CPU op types it may launch
    aicore_ops: list[str] = field(default_factory=list)
    because: list[Cite] = field(default_factory=list)  # aicpu: what decided it
    when: list[Cite] = field(default_factory=list)  # maybe_aicpu / aicore: undecided conditions
    launch: list[Cite] = field(default_factory=list)  # the AI CPU launch lines


def _cite(atom: Formula, urls: Mapping[str, str]) -> Cite:
    where = atom.where if isinstance(atom, (DtypeIs, DtypeEq, SocIs, Unknown)) else ""
    return Cite(describe(atom), where, _url(where, urls))


def _url(where: str, urls: Mapping[str, str]) -> str:
    path, _, line = where.rpartition(":")
    base = urls.get("")
    return f"{base}{path}#L{line}" if base and path else ""


def call_of(sig: Signature, soc: str, aclnn: str) -> tuple[Call, list[str]]:
    """The call CANN receives for ``sig``: dtypes by role, masks expanded where op-plugin
    expands them. Returns the call and the steps op-plugin adds before it (e.g. nonzero)."""
    dtypes: dict[str, tuple[str, ...]] = {}
    steps: list[str] = []
    for name, value in sig.inputs.items():
        parts = tuple(p for p in value.split(",") if p and p != "None")
        if aclnn in MASK_EXPANDED and role(name) == role("indices") and MASK_DTYPES & set(parts):
            steps.append("nonzero")
            # a k-dim mask becomes k int64 index tensors; their count is not recorded
            parts = tuple("int64" if p in MASK_DTYPES else p for p in parts)
        dtypes[role(name)] = parts
    if sig.outputs and len(set(sig.outputs)) == 1:  # the aclnn ``out`` tensor
        dtypes.setdefault("out", (sig.outputs[0],))
    return Call(soc, dtypes), steps


def _kind(atom: Unknown | DtypeIs | DtypeEq, call: Call) -> str:
    """Why an atom is undecided: its Unknown kind; ``internal`` for a dtype test on a tensor
    CANN makes itself (a cast to the output dtype before the copy-out, an index tensor it
    builds), which the call does not name; ``dtype`` for the call's own arguments."""
    if isinstance(atom, Unknown):
        return atom.kind
    names = (atom.arg,) if isinstance(atom, DtypeIs) else (atom.a, atom.b)
    return "internal" if any(role(n) not in call.dtypes for n in names) else "dtype"


def decide(aclnn: str, sites: Sequence[EngineSite], call: Call,
           urls: Mapping[str, str] | None = None) -> EngineDecision:
    """The engine of one aclnn function for one call (see the module docstring)."""
    urls = urls or {}
    cpu = [s for s in sites if s.engine == "aicpu"]
    core = [s for s in sites if s.engine == "aicore"]
    out = EngineDecision(aclnn, "unknown")
    if not sites:
        return out
    cpu_f = f_or(*(s.condition for s in cpu))
    core_f = f_or(*(s.condition for s in core))
    verdict = holds(cpu_f, call)
    # per launch, Kleene truth is enough (a superset of the reachable ones); the verdict
    # below tries undecided atoms both ways. Sites share conditions: each is evaluated once.
    truth: dict[int, bool | None] = {}
    for s in sites:
        if id(s.condition) not in truth:
            truth[id(s.condition)] = evaluate(s.condition, call)
    out.aicore_ops = sorted({s.op_type for s in core if truth[id(s.condition)] is not False})
    reachable = [s for s in cpu if truth[id(s.condition)] is not False]
    # cite first the launches the call surely reaches, and among them the function's own op
    # type (aclnnCos → Cos) before the copies and casts around it
    name = aclnn.removeprefix("aclnn").lower()
    reachable.sort(key=lambda s: (truth[id(s.condition)] is not True,
                                  not name.startswith(s.op_type.lower())))
    out.aicpu_ops = sorted({s.op_type for s in reachable})
    out.launch = [Cite(f"{s.op_type} (AI CPU)", s.launch, _url(s.launch, urls))
                  for s in reachable]
    if verdict is True:
        out.engine = "aicpu"
        seen: dict[str, Cite] = {}
        for s in reachable:
            for atom in deciding_atoms(s.condition, call):
                if isinstance(atom, DtypeIs):  # the dtype lines decide; SoC lines are context
                    seen.setdefault(atom.where, _cite(atom, urls))
        out.because = list(seen.values())
        return out
    if verdict is False:
        out.engine = "aicore" if holds(core_f, call) is not False else "unknown"
        return out
    undecided: dict[str, Cite] = {}
    kinds: set[str] = set()
    for s in reachable:
        for atom in undecided_atoms(s.condition, call):
            kinds.add(_kind(atom, call))
            undecided.setdefault(atom.where + describe(atom), _cite(atom, urls))
    out.when = list(undecided.values())
    # shapes, memory layouts and CANN's own intermediate tensors are not in a trace: AI Core
    # for the usual ones, with the conditions listed; anything else the signature could not
    # decide (index positions, argument values, dtype tests not understood) is a "may"
    out.engine = "aicore" if kinds <= {"size", "layout", "internal"} else "maybe_aicpu"
    return out


@dataclass
class OpEngine:
    """The engine facts of one op on the target, per call signature (the report's ``engine``)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    aicpu_calls: int = 0
    maybe_aicpu_calls: int = 0
    host_syncs: int = 0
    basis: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "aicpu_calls": self.aicpu_calls,
                "maybe_aicpu_calls": self.maybe_aicpu_calls, "host_syncs": self.host_syncs,
                "basis": self.basis}


def _json(d: EngineDecision, limit: int = 6) -> dict[str, Any]:
    def cites(items: Iterable[Cite]) -> list[dict[str, str]]:
        return [{"text": c.text, "at": c.where, **({"url": c.url} if c.url else {})}
                for c in list(items)[:limit]]

    out: dict[str, Any] = {"aclnn": d.aclnn, "engine": d.engine}
    if d.aicpu_ops:
        out["aicpu_ops"] = d.aicpu_ops
    if d.aicore_ops:
        out["aicore_ops"] = d.aicore_ops
    if d.because:
        out["because"] = cites(d.because)
    if d.when:
        out["aicpu_when"] = cites(d.when)
    if d.launch and d.engine != "aicore":
        out["launch"] = cites(d.launch)
    return out


# --- the lookup the checker calls per op -------------------------------------------------------

SOURCES_FROM = "8.5.0"  # CANN's operator libraries are open from here


@dataclass
class EngineFacts:
    """What :func:`engine_lookup` says of one op on the target (the report's ``engine`` and
    ``binaries``, and the findings that go with them)."""

    engine: dict[str, Any] | None = None
    binaries: list[dict[str, Any]] = field(default_factory=list)
    restrictions: list[Restriction] = field(default_factory=list)


EngineLookup = Callable[[OpUse, ReleaseInfo], EngineFacts]


def choose_version(versions: Iterable[str], cann: str) -> tuple[str, str] | None:
    """The CANN version whose sources stand for ``cann``, and the label saying how (the same
    choice as the aclnn contract's: exact, else the nearest older open version, else the
    earliest, labelled inferred)."""
    order = sorted(set(versions), key=cann_key)
    if not order:
        return None
    tags = [v for v in order if v != HEAD] or order
    want = cann_key(cann) if cann else ()
    if not want:
        return tags[-1], f"inferred from CANN {tags[-1]} sources (target CANN unknown)"
    if tags == [HEAD]:
        return HEAD, "inferred from the library's head commit (no CANN tag)"
    older = [v for v in tags if cann_key(v) <= want]
    if older and cann_key(older[-1]) == want:
        return older[-1], f"CANN {older[-1]} op_api sources"
    if older:
        return older[-1], (f"inferred from CANN {older[-1]} sources (the nearest older open "
                           f"sources of CANN {cann})")
    why = (f"CANN {cann} predates the open operator sources"
           if want < cann_key(SOURCES_FROM) else f"no CANN {cann} sources")
    return tags[0], f"inferred from CANN {tags[0]} sources ({why})"


def _sites(rows: Sequence[db.SiteRow]) -> list[EngineSite]:
    return [EngineSite(r.aclnn, r.op_type, r.engine, formula_loads(r.condition), r.launch,
                       r.entry) for r in rows]


def _sites_at(rows_by_fn: Mapping[str, Sequence[db.SiteRow]], cann: str,
              parsed: dict[tuple[str, str], list[EngineSite]],
              ) -> tuple[dict[str, list[EngineSite]], dict[str, str], list[str]]:
    """Per function: the sites of the CANN version chosen for ``cann``, the docs' base url and
    why that version (``parsed`` caches the formulas: they parse once per function and version)."""
    by_fn: dict[str, list[EngineSite]] = {}
    urls: dict[str, str] = {}
    bases: list[str] = []
    for fn, rows in rows_by_fn.items():
        chosen = choose_version((r.cann for r in rows), cann)
        if chosen is None:
            continue
        version, basis = chosen
        at = [r for r in rows if r.cann == version]
        if (fn, version) not in parsed:
            parsed[fn, version] = _sites(at)
        by_fn[fn] = parsed[fn, version]
        urls[fn] = at[0].base_url
        bases.append(f"{fn}: {basis}")
    return by_fn, urls, bases


def _aicpu_restriction(d: EngineDecision, sig: Signature, judged_on: str,
                       basis: str) -> Restriction:
    cite = d.because[0] if d.because else (d.launch[0] if d.launch else None)
    return Restriction(
        d.aclnn, f"{d.aclnn} runs {', '.join(d.aicpu_ops)} on the AI CPU on "
                 f"{judged_on} for {_sig_text(sig)}"
                 + (f" ({cite.text}, {cite.where})" if cite else "")
                 + ": a host round trip per call, slower than the AI Core",
        (), cite.url if cite else "", hardware=judged_on, source="cann_engine",
        products_failing=(judged_on,), basis=basis, slow=True,
        inferred=basis.startswith("inferred") or "inferred" in basis)


def engine_lookup(cat: Catalog, hardware: str | None) -> EngineLookup | None:
    """Per op: its engine per call signature and its binaries on the target product; None
    when the catalog has no engine facts. Without ``hardware`` the calls are judged on 910B
    and say so."""
    if not db.has_engine_facts(cat.engine):
        return None
    product = canonical_alias(hardware) if hardware else None
    judged_on = product or "910B"
    soc = SOC_OF_PRODUCT.get(judged_on)
    if soc is None:
        return None
    linked = db_contract.linked_releases(cat.engine)
    sources: dict[str, tuple[str, str]] = {}
    link_rows: dict[tuple[str, ...], Any] = {}
    site_cache: dict[str, list[db.SiteRow]] = {}
    bin_cache: dict[str, list[db.BinaryRow]] = {}

    def rows_of(functions: Sequence[str]) -> dict[str, list[db.SiteRow]]:
        missing = [f for f in functions if f not in site_cache]
        if missing:
            got = db.site_rows(cat.engine, missing)
            for f in missing:
                site_cache[f] = got.get(f, [])
        return {f: site_cache[f] for f in functions}

    def bins_of(op_types: Sequence[str]) -> dict[str, list[db.BinaryRow]]:
        missing = [o for o in op_types if o not in bin_cache]
        if missing:
            got = db.binary_rows(cat.engine, missing)
            for o in missing:
                bin_cache[o] = got.get(o, [])
        return {o: bin_cache[o] for o in op_types}

    docs_cache: dict[tuple[str, str], frozenset[str]] = {}
    parsed: dict[tuple[str, str], list[EngineSite]] = {}
    decided: dict[tuple[str, int, tuple[tuple[str, tuple[str, ...]], ...]], EngineDecision] = {}

    def documented_on(fn: str, cann: str) -> frozenset[str]:
        """The products the function's docs (the page the contract would judge by) mark √."""
        if (fn, cann) not in docs_cache:
            choice = choose_doc(db_contract.function_docs(cat.engine, fn), cann, judged_on)
            docs_cache[fn, cann] = frozenset(choice.doc.supported) if choice else frozenset()
        return docs_cache[fn, cann]

    def lookup(use: OpUse, target: ReleaseInfo) -> EngineFacts:
        if target.torch_npu not in sources:
            sources[target.torch_npu] = _link_source(cat, target, linked)
        links, via_note = _links_for(cat, use.op, *sources[target.torch_npu], link_rows)
        functions = list(dict.fromkeys(x.aclnn for x in links))
        if not functions:
            return EngineFacts()
        by_fn, urls, bases = _sites_at(rows_of(functions), target.cann, parsed)
        if not by_fn:
            return EngineFacts()
        basis = "; ".join(dict.fromkeys(bases))
        if product is None:
            basis += "; judged on 910B (pass --hardware for another product)"
        if via_note:
            basis += f"; {via_note}"
        known = [f for f in functions if f in by_fn]
        result = OpEngine(basis=basis)
        restrictions: list[Restriction] = []
        sigs = use.signatures or [Signature(count=use.count)]
        for sig in sigs:
            decisions: list[EngineDecision] = []
            steps: list[str] = []
            for fn in known:
                call, pre = call_of(sig, soc, fn)
                steps += [p for p in pre if p not in steps]
                key = (fn, id(by_fn[fn]), tuple(sorted(call.dtypes.items())))
                if key not in decided:  # the same dtypes recur across ops and signatures
                    decided[key] = decide(fn, by_fn[fn], call, {"": urls[fn]})
                decisions.append(decided[key])
            _add_call(result, sig, decisions, steps)
            restrictions += [_aicpu_restriction(d, sig, judged_on, basis)
                             for d in decisions if d.engine == "aicpu"]
        binaries, missing = _binaries(by_fn, soc, judged_on, bins_of, target.cann,
                                      lambda fn: documented_on(fn, target.cann))
        restrictions += [Restriction(
            m["aclnn"], m["message"], (), m.get("url", ""), hardware=judged_on,
            unsupported=m["every_route"], source="cann_binary", products_failing=(judged_on,),
            error="561000", basis=m["basis"], inferred="inferred" in m["basis"]) for m in missing]
        doc = result.to_json()
        doc["product"] = judged_on
        doc["soc"] = soc
        return EngineFacts(doc, binaries, restrictions)

    return lookup


def _sig_text(sig: Signature) -> str:
    return ", ".join(f"{k}={v}" for k, v in sig.inputs.items()) or "the recorded call"


def _add_call(result: OpEngine, sig: Signature, decisions: Sequence[EngineDecision],
              steps: Sequence[str]) -> None:
    worst = max((Engine(d.engine) for d in decisions), key=lambda e: e.severity,
                default=Engine.UNKNOWN)
    entry: dict[str, Any] = {"inputs": dict(sig.inputs), "count": sig.count,
                             "engine": worst.value, "label": worst.label,
                             "aclnn": [_json(d) for d in decisions]}
    if steps:
        entry["before"] = [{"step": "aten::nonzero", "host_sync": True,
                            "why": "op-plugin turns the boolean mask into int64 indices "
                                   "(npu_expand_tensors) before CANN runs: a host sync and a "
                                   "data-dependent shape"}]
        result.host_syncs += sig.count
    if worst is Engine.AICPU:
        result.aicpu_calls += sig.count
    elif worst is Engine.MAYBE_AICPU:
        result.maybe_aicpu_calls += sig.count
    result.calls.append(entry)


def _binaries(by_fn: Mapping[str, Sequence[EngineSite]], soc: str, product: str,
              bins_of: Callable[[Sequence[str]], dict[str, list[db.BinaryRow]]], cann: str,
              documented: Callable[[str], frozenset[str]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per aclnn function: the AI Core op types it may launch on ``soc`` and whether CANN's
    open library ships a kernel for them there. A missing one is a finding only when the op
    type is built in the open library for another of the main Ascend SoCs (not only for the
    950 family or Kirin/MC parts: those are re-implementations of closed built-in ops, which
    this cannot see) and the function's docs do not list the product as supported (an op
    type moved to the open library keeps its closed built-in kernel on older SoCs)."""
    out: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    bare = Call(soc, {})
    for fn, sites in by_fn.items():
        reach = [s for s in sites if s.engine == "aicore" and holds(s.condition, bare) is not False]
        types = sorted({s.op_type for s in reach})
        rows = bins_of(types)
        lacking: list[str] = []
        for op_type in types:
            chosen = choose_version((r.cann for r in rows[op_type]), cann)
            if chosen is None:
                out.append({"aclnn": fn, "op_type": op_type, "soc": soc, "kernel": "closed",
                            "note": "not defined in CANN's open libraries (built-in op)"})
                continue
            version, basis = chosen
            at = [r for r in rows[op_type] if r.cann == version]
            here = [r for r in at if r.soc == soc]
            has = any(r.binaries or r.configured for r in here)
            elsewhere = sorted({r.soc for r in at if r.binaries or r.configured})
            entry: dict[str, Any] = {"aclnn": fn, "op_type": op_type, "soc": soc,
                                     "kernel": "binary" if has else "none",
                                     "socs": elsewhere, "basis": basis}
            if here and here[0].dtypes:
                entry["dtypes"] = list(here[0].dtypes)
            out.append(entry)
            if not has and set(elsewhere) & MAIN_SOCS and product not in documented(fn):
                lacking.append(op_type)
                site = next(s for s in reach if s.op_type == op_type)
                ref = next((r for r in at if r.binaries), at[0])
                missing.append({
                    "aclnn": fn, "op_type": op_type, "basis": basis,
                    "every_route": False,
                    "url": f"{ref.base_url}{ref.path.split(':')[0]}" if ref.base_url else "",
                    "message": (
                        f"{fn} may launch {op_type} (AI Core, {site.launch}), which has no "
                        f"kernel binary for {soc} in CANN's open {ref.library} "
                        f"(binaries for {', '.join(elsewhere)}): the call fails with "
                        f"\"Op {op_type} does not has any binary\" (561000)"),
                })
        if lacking and set(lacking) == set(types):
            for m in missing:
                if m["aclnn"] == fn:
                    m["every_route"] = True
    return out, missing
