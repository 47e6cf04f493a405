"""Graph mode: would ``torch.compile(model, backend=torchair)`` convert every op, per release?

torchair converts each node of the FX graph torch.compile hands it to GE nodes through the
converter registered for the node's overload (``opcheck.scrapers.torchair``). Per op:

- ``converted``: the converter builds GE nodes;
- ``conditional``: it raises on some argument values or dtypes (the condition is shown);
- ``raises``: it always raises (declared unsupported, with its message);
- ``no_converter``: nothing registered: the compile fails or the graph breaks there;
- ``unknown``: no torchair converters in the catalog for the release or its torch line.

A release whose own torchair pin is not in the catalog is judged on the converters of the
nearest release of the same torch line whose pin is (``basis_pin``), and every answer says
"inferred from torchair at <commit>" and names the releases whose answer is exact.

The verdict is separate from eager mode's: NO when an op raises or has no converter, MAYBE when
some op converts only conditionally, YES when every op converts, UNKNOWN without converters.

Which IR: torch.compile's AOTAutograd traces below the autograd keys, so every
CompositeImplicitAutograd op reaches the backend decomposed (whatever kernels torch_npu has,
unlike eager mode, where the NPU receives a composite op whole when it registers a kernel for
it), and functionalization turns in-place ops into their functional forms. The check therefore
uses the trace's fully decomposed level (:meth:`OpList.leaves`) with in-place overloads mapped
to their functional ones (``add_.Tensor`` → ``add.Tensor``). torchair's own decomposition table
is not read: an op it decomposes before conversion may be reported ``no_converter``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from opcheck.checker.graph_conditions import describe, first_rank, holds
from opcheck.checker.resolve import Resolver
from opcheck.core.oplist import MAX_SAMPLES, OpList, OpUse
from opcheck.core.opname import OpName
from opcheck.core.versions import release_key, torch_minor
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.graph import (
    ConverterInfo,
    GraphPin,
    InductorEntry,
    converters,
    graph_pins,
    inductor_at,
    inductor_tags,
    op_converters,
)

CONVERTED, CONDITIONAL, RAISES = "converted", "conditional", "raises"
NO_CONVERTER, UNKNOWN = "no_converter", "unknown"
FAILING = (RAISES, NO_CONVERTER)
# worst first: the order ops are listed in
_SEVERITY = {RAISES: 4, NO_CONVERTER: 3, UNKNOWN: 2, CONDITIONAL: 1, CONVERTED: 0}

IR_NOTE = (
    "graph mode checks the ops torch.compile hands torchair: every CompositeImplicitAutograd "
    "op decomposed (AOTAutograd traces below autograd, so composite ops never reach the "
    "backend whole) and in-place ops functionalized (add_ -> add), i.e. the trace's fully "
    "decomposed level; torchair's own decomposition table is not read, so an op it "
    "decomposes first may show as no_converter")
STATIC_NOTE = (
    "graph mode on a static listing: its composite ops are not decomposed as torch.compile "
    "would; trace at runtime for the graph torchair receives")


@dataclass
class GraphOp:
    op: str
    status: str
    eager: str = ""  # the op's eager status on the same release (resolver)
    message: str = ""
    condition: str = ""
    declared_dtypes: str = ""  # dtypes the converter's tested samples name
    dtypes: list[str] = field(default_factory=list)  # dtypes the trace saw
    count: int = 0
    functional_of: list[str] = field(default_factory=list)  # in-place ops it stands for
    where: str = ""  # path:line in ge_converter/
    url: str = ""
    # a conditional converter's condition evaluated on the traced call signatures
    # (opcheck.checker.graph_conditions): why the status is raises/converted, else ""
    evaluated: str = ""


# Ops an eager dispatcher trace records that a torch.compile graph spells otherwise: C++
# ``reshape`` takes ``_reshape_alias`` only for plain tensors; under torch.compile the tensors
# are fake/functional (subclass-like), so it emits ``view``.
_COMPILE_SPELLING = {"aten::_reshape_alias": "aten::view"}


def functional_name(op: str, known: set[str] | dict[str, Any]) -> str:
    """How ``op`` appears in the graph torchair receives: the functional overload
    functionalization replaces an in-place one with (``aten::add_.Tensor`` →
    ``aten::add.Tensor``) when PyTorch has it, and the compile-time spelling of the few ops
    eager tracing records differently; else ``op``."""
    if op in _COMPILE_SPELLING:
        return _COMPILE_SPELLING[op]
    name = OpName.parse(op)
    if not name.name.endswith("_") or name.name.startswith("__"):
        return op
    functional = str(OpName(name.namespace, name.name[:-1], name.overload))
    return functional if functional in known else op


def graph_ops(oplist: OpList, known: set[str] | dict[str, Any]) -> list[tuple[str, OpUse, list[str]]]:
    """(op, use, in-place ops it stands for) of the graph torchair receives, sorted by op."""
    merged: dict[str, tuple[OpUse, list[str]]] = {}
    for use in oplist.leaves():
        op = functional_name(use.op, known)
        got = merged.get(op)
        if got is None:
            flat = use.copy()
            flat.op = op
            merged[op] = (flat, [use.op] if op != use.op else [])
        else:
            got[0].merge(use)
            if op != use.op and use.op not in got[1]:
                got[1].append(use.op)
    return [(op, u, via) for op, (u, via) in sorted(merged.items())]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _status(info: ConverterInfo | None, torch: str) -> str:
    if info is None or (info.min_torch and _version(torch) < _version(info.min_torch)):
        return NO_CONVERTER
    return info.status


def judged(status: str, info: ConverterInfo | None, use: OpUse,
           schema: str) -> tuple[str, str]:
    """A conditional converter's status for this model's calls: ``raises`` when its condition
    holds for a traced call signature, ``converted`` when it holds for none of them and the
    signatures cover every call, else still ``conditional``; with the reason."""
    if status != CONDITIONAL or info is None or not info.condition or not use.signatures:
        return status, ""
    rank = first_rank(schema, use.shapes, complete=len(use.shapes) < MAX_SAMPLES)
    results = [(sig, holds(info.condition, sig, schema, rank, info.rebound))
               for sig in use.signatures]
    raising = [sig for sig, r in results if r is True]
    if raising:
        return RAISES, (f"raises for the traced call ({describe(raising[0])}): "
                        f"{info.condition}")
    covered = sum(sig.count for sig in use.signatures) >= use.count
    if covered and all(r is False for _, r in results):
        n = len(results)
        return CONVERTED, (f"evaluated on the {n} traced call signature{'s' * (n != 1)}: "
                           f"never {info.condition} (static shapes)")
    return CONDITIONAL, ""


def verdict_of(statuses: list[str], *, known: bool, complete: bool = True) -> str:
    if not known:
        return "UNKNOWN"
    if any(s in FAILING for s in statuses):
        return "NO"
    if not complete:
        return "INCOMPLETE"
    return "MAYBE" if CONDITIONAL in statuses else "YES"


def _schema(cat: Catalog, op: str) -> str:
    info = cat.operators.get(op)
    return info.schema if info else ""


def _pin_note(pin: GraphPin | None, release: str, inferred: bool = False) -> str:
    unknown = "" if inferred else ": graph-mode status unknown"
    if pin is None or pin.state == "no_pin":
        return f"torch_npu {release} has no known torchair pin{unknown}"
    if not pin.known:
        return (f"torch_npu {release} pins torchair {pin.torchair[:12]} ({pin.tag}), whose "
                f"converters are not in the catalog{unknown}")
    return f"torch_npu {release}: torchair {pin.torchair[:12]} ({pin.tag})"


@dataclass(frozen=True)
class Basis:
    """The converters a release is judged on: its own pin's, or (``inferred``) those of the
    nearest release of its torch line whose pin is in the catalog."""

    pin: GraphPin | None  # the pin whose converters are read (None: no answer)
    inferred: bool = False
    from_release: str = ""  # the release whose pin was borrowed

    @property
    def label(self) -> str:
        if self.pin is None or not self.inferred:
            return ""
        return (f"inferred from torchair at {self.pin.torchair[:12]} (the pin of torch_npu "
                f"{self.from_release}, {self.pin.tag}, the nearest release of the same torch "
                "line whose torchair is in the catalog)")


def _minor(rel: ReleaseInfo) -> str:
    try:
        return torch_minor(rel.torch)
    except ValueError:
        return rel.torch


def basis_pin(cat: Catalog, pins: dict[str, GraphPin], release: str) -> Basis:
    """``release``'s own pin when its converters are in the catalog, else the nearest known
    pin of a release of the same torch line (closest in release order; the newer on a tie),
    labelled inferred; else none."""
    own = pins.get(release)
    if own is not None and own.known:
        return Basis(own)
    rel = cat.release(release)
    order = [r.torch_npu for r in sorted(cat.releases, key=lambda r: release_key(r.torch_npu))]
    here = order.index(release) if release in order else 0
    same = [r for r in cat.releases if r.torch_npu != release and _minor(r) == _minor(rel)
            and (p := pins.get(r.torch_npu)) is not None and p.known]
    if not same:
        return Basis(None)
    best = min(same, key=lambda r: (abs(order.index(r.torch_npu) - here),
                                    -order.index(r.torch_npu)))
    return Basis(pins[best.torch_npu], inferred=True, from_release=best.torch_npu)


def exact_releases(cat: Catalog, pins: dict[str, GraphPin], release: str) -> list[str]:
    """Releases whose graph answer is exact (their own pin's converters are in the catalog):
    those of ``release``'s torch line first, then the newest of the others; newest first."""
    rel = cat.release(release)
    known = [r for r in cat.releases if r.has_kernels and (p := pins.get(r.torch_npu))
             is not None and p.known]
    known.sort(key=lambda r: release_key(r.torch_npu), reverse=True)
    known.sort(key=lambda r: _minor(r) != _minor(rel))  # stable: newest first within each
    return [r.torch_npu for r in known][:6]


def graph_check(cat: Catalog, oplist: OpList, release: str, *, cpu_fallback: bool = True,
                pins: dict[str, GraphPin] | None = None) -> dict[str, Any]:
    """The graph-mode section of a report for one release (JSON-ready)."""
    pins = graph_pins(cat.engine) if pins is None else pins
    own = pins.get(release)
    basis = basis_pin(cat, pins, release)
    pin = basis.pin
    rel = cat.release(release)
    rows = graph_ops(oplist, cat.operators)
    known = pin is not None and pin.known
    infos = converters(cat.engine, pin, [op for op, _, _ in rows]) if known and pin else {}
    eager = [""] * len(rows)  # a release without a kernel list has no eager status
    if rel.has_kernels:
        resolver = Resolver(cat, release, cpu_fallback=cpu_fallback)
        eager = [str(r.status.value) for r in resolver.resolve_many([op for op, _, _ in rows])]
    ops: list[GraphOp] = []
    for (op, use, via), eager_status in zip(rows, eager, strict=True):
        info = infos.get(op)
        status = _status(info, rel.torch) if known else UNKNOWN
        status, evaluated = judged(status, info, use, _schema(cat, op))
        ops.append(GraphOp(
            op=op, status=status, eager=eager_status, count=use.count,
            dtypes=list(use.dtypes), functional_of=via,
            message=info.message if info and status != NO_CONVERTER else "",
            condition=info.condition if info and (status == CONDITIONAL or evaluated) else "",
            declared_dtypes=info.dtypes if info else "",
            where=f"{info.path}:{info.line}" if info else "", url=info.url if info else "",
            evaluated=evaluated,
        ))
    ops.sort(key=lambda g: (-_SEVERITY[g.status], -g.count, g.op))
    statuses = [g.status for g in ops]
    notes = [IR_NOTE, _pin_note(own, release, basis.inferred)]
    exact = [] if own is not None and own.known else exact_releases(cat, pins, release)
    if basis.inferred:
        notes.append(f"graph-mode answer {basis.label}")
    if exact:
        notes.append("releases whose graph-mode answer is exact (their torchair pin is in the "
                     f"catalog): {', '.join(exact)} (`--graph --torch-npu {exact[0]}`)")
    decided = [g for g in ops if g.evaluated]
    if decided:
        notes.append(
            f"{len(decided)} conditional converter(s) decided on the traced arguments "
            f"({sum(g.status == RAISES for g in decided)} raise, "
            f"{sum(g.status == CONVERTED for g in decided)} convert), assuming static shapes: "
            "under torch.compile(dynamic=True) scalar arguments may arrive as symbolic "
            "tensors")
    if oplist.ir == "pre-dispatch" or oplist.method.startswith("static"):
        notes.append(STATIC_NOTE)
    inductor = inductor_check(cat, rel, [(op, use.count, e) for (op, use, _), e
                                         in zip(rows, eager, strict=True)])
    return {
        "inductor": inductor,
        "release": release,
        "torchair": own.torchair if own else "",
        "tag": own.tag if own else "",
        "state": own.state if own else "no_pin",
        # the converters judged on: the release's own pin, or (inferred) a neighbour's
        "inferred": basis.inferred,
        "basis": basis.label or (f"torchair {pin.torchair[:12]} ({pin.tag})" if pin else ""),
        "basis_torchair": pin.torchair if pin else "",
        "exact_releases": exact,
        "ir": "aten, CompositeImplicitAutograd decomposed, functionalized (the trace's leaves)",
        "verdict": verdict_of(statuses, known=known, complete=oplist.complete),
        "counts": {s: statuses.count(s) for s in _SEVERITY},
        "not_converting": [g.op for g in ops if g.status in FAILING],
        "ops": [asdict(g) for g in ops],
        "notes": notes,
    }


# --- torch.compile's default backend (inductor) on the NPU ----------------------------------

INDUCTOR_NOTE = (
    "inductor: torch_npu generates Triton kernels (triton-ascend) only for the ops it lists; "
    "every other op runs its eager NPU kernel inside the compiled graph (its eager status "
    "applies); inductor's own decompositions are not read")


def _inductor_tag(cat: Catalog, rel: ReleaseInfo, tags: set[str]) -> tuple[str, bool]:
    """The tag whose inductor lists judge ``rel``: its own, else the newest tag of its torch
    line that has them (inferred), else none."""
    if rel.tag in tags:
        return rel.tag, False
    line = [t for t in tags if _minor_text(t.rsplit("pytorch", 1)[-1]) == _minor(rel)]
    by_tag = {r.tag: r for r in cat.releases if r.tag}
    line.sort(key=lambda t: abs(by_tag[t].sort_key - rel.sort_key) if t in by_tag else 1e9)
    return (line[0], True) if line else ("", False)


def _minor_text(version: str) -> str:
    try:
        return torch_minor(version)
    except ValueError:
        return version


def _generated(op: str, entries: list[InductorEntry]) -> InductorEntry | None:
    packet = op.split(".", 1)[0]
    rest = None
    for e in entries:
        if e.kind == "generate_rest":  # the fallback-list format: all but the fallbacks
            rest = e
        if e.kind == "generate" and (e.name == op or e.name == packet):
            return e
        if e.kind == "generate_prefix" and e.name in op:
            return e
    return rest


def _before_inductor(cat: Catalog, rel: ReleaseInfo, tags: set[str]) -> str:
    """The first torch line whose torch_npu has ``_inductor`` (a tag with its lists in the
    catalog), when ``rel`` belongs to an older line: there inductor has no NPU backend."""
    by_tag = {r.tag: r for r in cat.releases if r.tag}
    lines = {_minor_text(t.rsplit("pytorch", 1)[-1]) for t in tags}
    known = sorted((by_tag[t] for t in tags if t in by_tag), key=lambda r: r.sort_key)
    if not known or _minor(rel) in lines:
        return ""
    first = known[0]
    return first.torch_npu if rel.sort_key < first.sort_key else ""


def inductor_check(cat: Catalog, rel: ReleaseInfo,
                   ops: list[tuple[str, int, str]]) -> dict[str, Any]:
    """torch.compile with the default (inductor) backend on ``rel``: per op (name, calls, eager
    status), whether torch_npu's inductor generates it or runs its eager kernel; a verdict."""
    tags = inductor_tags(cat.engine)
    tag, inferred = _inductor_tag(cat, rel, tags)
    entries = inductor_at(cat.engine, tag) if tag else []
    basis = (f"torch_npu's _inductor at {tag}" if tag and not inferred
             else f"inferred from torch_npu's _inductor at {tag}" if tag else "")
    first = "" if entries else _before_inductor(cat, rel, tags)
    if first:
        return {"verdict": "NO", "tag": "", "inferred": False, "basis": "",
                "generated": [], "eager": [{"op": op, "count": count, "eager": status}
                                           for op, count, status in ops], "notes": [
                    f"inductor: torch_npu {rel.torch_npu} has no _inductor: torch.compile's "
                    f"default backend has no NPU backend there (torch_npu's _inductor first "
                    f"appears in the catalog at {first}); use the torchair backend or a newer "
                    "release"]}
    if not entries:
        return {"verdict": "UNKNOWN", "tag": "", "inferred": False, "basis": "",
                "generated": [], "eager": [], "notes": [
                    f"inductor: torch_npu's _inductor sources for torch_npu {rel.torch_npu} (or "
                    "its torch line) are not in the catalog"]}
    backend = next((e for e in entries if e.kind == "backend"), None)
    forced = {e.name for e in entries if e.kind == "fallback"}
    generated, eager = [], []
    for op, count, status in ops:
        e = None if op in forced or op.split(".", 1)[0] in forced else _generated(op, entries)
        if e is not None:
            generated.append({"op": op, "count": count, "where": f"{e.path}:{e.line}",
                              "url": e.url})
        else:
            eager.append({"op": op, "count": count, "eager": status})
    statuses = {o["eager"] for o in eager}
    if backend is None or "unsupported" in statuses:
        verdict = "NO"
    elif statuses & {"cpu_fallback", "unknown", ""}:
        verdict = "MAYBE"
    else:
        verdict = "YES"
    notes = [INDUCTOR_NOTE]
    if backend is None:
        notes.append(f"inductor: torch_npu registers no inductor backend for npu at {tag}")
    else:
        notes.append(f"inductor: NPU backend registered at {backend.path}:{backend.line} "
                     f"({basis}); needs triton-ascend installed")
    return {"verdict": verdict, "tag": tag, "inferred": inferred, "basis": basis,
            "generated": generated, "eager": eager, "notes": notes}


def inductor_lines(ind: dict[str, Any]) -> list[str]:
    """The inductor part of the graph section, as text lines."""
    head = (f"torch.compile default backend (inductor) on the NPU: {ind['verdict']}"
            + (f" ({ind['basis']})" if ind.get("inferred") else ""))
    if ind["generated"] or ind["eager"]:
        head += (f"  {len(ind['generated'])} ops generated as Triton kernels, "
                 f"{len(ind['eager'])} run their eager kernel")
    lines = [head]
    bad = [o for o in ind["eager"] if o["eager"] in ("unsupported", "cpu_fallback", "unknown")]
    for o in bad[:MAX_LISTED]:
        lines.append(f"  {o['op']:<44} eager {o['eager']}")
    return lines + [f"  note: {n}" for n in ind.get("notes", [])]


def graph_matrix(cat: Catalog, oplist: OpList) -> dict[str, Any]:
    """ops × releases → graph status for every release with kernels, and each release's graph
    verdict (UNKNOWN where its torchair pin is not in the catalog)."""
    pins = graph_pins(cat.engine)
    rows = graph_ops(oplist, cat.operators)
    names = [op for op, _, _ in rows]
    uses = {op: use for op, use, _ in rows}
    cells: dict[str, dict[str, str]] = {op: {} for op in names}
    verdicts: dict[str, str] = {}
    by_commit: dict[int, dict[str, ConverterInfo]] = {}
    decided = 0  # cells whose conditional converter was decided on the traced arguments
    releases = [r for r in cat.releases if r.has_kernels]
    inferred: dict[str, str] = {}  # release → the torchair commit its answer is inferred from
    for rel in releases:
        basis = basis_pin(cat, pins, rel.torch_npu)
        pin = basis.pin
        if pin is None or not pin.known or pin.source_id is None:
            verdicts[rel.torch_npu] = "UNKNOWN"
            continue
        if basis.inferred:
            inferred[rel.torch_npu] = pin.torchair
        if pin.source_id not in by_commit:
            by_commit[pin.source_id] = converters(cat.engine, pin, names)
        infos = by_commit[pin.source_id]
        judgements = [judged(_status(infos.get(op), rel.torch), infos.get(op), uses[op],
                             _schema(cat, op)) for op in names]
        statuses = [st for st, _ in judgements]
        decided += sum(bool(why) for _, why in judgements)
        for op, st in zip(names, statuses, strict=True):
            cells[op][rel.torch_npu] = st
        verdicts[rel.torch_npu] = verdict_of(statuses, known=True, complete=oplist.complete)
    good = [r for r, v in verdicts.items() if v in ("YES", "MAYBE") and r not in inferred]
    return {
        "inferred": inferred,
        "releases": [r.torch_npu for r in releases],
        "ops": cells,
        "verdicts": verdicts,
        "oldest_graph_release": min(good, key=release_key) if good else "",
        "decided": decided,
    }


def op_graph(cat: Catalog, op: str) -> list[dict[str, Any]]:
    """One op's graph-mode status on every release (the op page and ``opcheck op``)."""
    pins = graph_pins(cat.engine)
    if not pins:
        return []
    infos = op_converters(cat.engine, op)
    out = []
    for rel in cat.releases:
        basis = basis_pin(cat, pins, rel.torch_npu)
        pin = basis.pin or pins.get(rel.torch_npu)
        known = pin is not None and pin.known and pin.source_id is not None
        info = infos.get(pin.source_id) if known and pin and pin.source_id is not None else None
        status = _status(info, rel.torch) if known else UNKNOWN
        message = info.message if info and status != NO_CONVERTER else ""
        if basis.inferred and pin is not None:  # shown wherever the message is (op page, CLI)
            message = "; ".join(x for x in (message, f"inferred from torchair at "
                                            f"{pin.torchair[:12]}") if x)
        out.append({
            "torch_npu": rel.torch_npu, "torchair": pin.torchair if pin else "",
            "status": status,
            "message": message,
            "condition": info.condition if info and status == CONDITIONAL else "",
            "url": info.url if info else "",
            "inferred": basis.label,
        })
    return out


def graph_exit(graph: dict[str, Any] | None) -> int:
    """1 when the graph-mode check found ops that would not convert, else 0."""
    return 1 if graph and graph.get("verdict") == "NO" else 0


_WORDS = {CONVERTED: "converted", CONDITIONAL: "conditional", RAISES: "raises",
          NO_CONVERTER: "no converter", UNKNOWN: "unknown"}
MAX_LISTED = 40  # ops listed in the text and Markdown sections


def _problem_ops(graph: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in graph.get("ops", []) if o["status"] not in (CONVERTED, UNKNOWN)]


def _detail(o: dict[str, Any]) -> str:
    bits = []
    if o.get("evaluated"):
        bits.append(o["evaluated"])
    elif o["status"] == CONDITIONAL and o["condition"]:
        bits.append(f"raises when {o['condition']}")
    if o["message"] and o["status"] != CONVERTED:
        bits.append(o["message"])
    if o["functional_of"]:
        bits.append(f"functional form of {', '.join(o['functional_of'])}")
    return "; ".join(bits)


def _matrix_lines(matrix: dict[str, Any]) -> list[str]:
    verdicts = matrix.get("verdicts", {})
    lines = [f"graph verdict per release (oldest converting: "
             f"{matrix.get('oldest_graph_release') or 'none'}):"]
    runs: list[tuple[str, str, str]] = []  # first, last, what: consecutive equal releases fold
    for rel in matrix.get("releases", []):
        bad = [op for op, cells in matrix["ops"].items() if cells.get(rel) in FAILING]
        more = " …" if len(bad) > 6 else ""
        basis = matrix.get("inferred", {}).get(rel)
        what = verdicts.get(rel, "UNKNOWN") + (
            f" (inferred from torchair at {basis[:12]})" if basis else "") + (
            f"  ({len(bad)} not converting: {', '.join(bad[:6])}{more})" if bad else "")
        if runs and runs[-1][2] == what:
            runs[-1] = (runs[-1][0], rel, what)
        else:
            runs.append((rel, rel, what))
    for first, last, what in runs:
        span = first if first == last else f"{first} … {last}"
        lines.append(f"  {span:<30} {what}")
    if matrix.get("decided"):
        lines.append(f"  ({matrix['decided']} release × op cells of conditional converters "
                     "decided on the traced arguments, assuming static shapes)")
    return lines


def graph_text(graph: dict[str, Any]) -> str:
    """The graph section as plain text (under the eager table of ``opcheck check``)."""
    counts = graph.get("counts", {})
    head = (f"Graph mode (torch.compile + torchair) on torch_npu {graph['release']}: "
            f"{graph['verdict']}"
            + (" (inferred from torchair at " + graph["basis_torchair"][:12] + ")"
               if graph.get("inferred") else "") + "  "
            + ", ".join(f"{counts.get(s, 0)} {_WORDS[s]}" for s in _SEVERITY if counts.get(s)))
    lines = ["", head]
    problems = _problem_ops(graph)
    for o in problems[:MAX_LISTED]:
        detail = _detail(o)
        lines.append(f"  {o['op']:<44} {_WORDS[o['status']]:<12} eager {o['eager']:<12} "
                     f"{detail}")
    if len(problems) > MAX_LISTED:
        lines.append(f"  … and {len(problems) - MAX_LISTED} more (--format json lists all)")
    if "matrix" in graph:
        lines += _matrix_lines(graph["matrix"])
    lines += [f"  note: {n}" for n in graph.get("notes", [])]
    if graph.get("inductor"):
        lines += inductor_lines(graph["inductor"])
    return "\n".join(lines) + "\n"


def graph_markdown(graph: dict[str, Any]) -> list[str]:
    """The graph section of the Markdown report."""
    out = ["", "## Graph mode (torch.compile with torchair)", "",
           f"**{graph['verdict']}** on torch_npu {graph['release']}"
           + (f" ({graph['basis']})" if graph.get("inferred")
              else f" (torchair `{graph['torchair'][:12]}`, {graph['tag']})" if graph["torchair"]
              else ""), ""]
    problems = _problem_ops(graph)
    if problems:
        out += ["| op | graph | eager | detail |", "|---|---|---|---|"]
        for o in problems[:MAX_LISTED]:
            op = f"[`{o['op']}`]({o['url']})" if o["url"] else f"`{o['op']}`"
            detail = _detail(o).replace("|", "\\|")
            out.append(f"| {op} | {_WORDS[o['status']]} | {o['eager']} | {detail} |")
        if len(problems) > MAX_LISTED:
            out.append(f"\n… and {len(problems) - MAX_LISTED} more.")
    if "matrix" in graph:
        out += ["", *_matrix_lines(graph["matrix"])]
    out += ["", *(f"- {n}" for n in graph.get("notes", []))]
    if graph.get("inductor"):
        out += ["", "### torch.compile with the default backend (inductor)", "",
                *inductor_lines(graph["inductor"])]
    return out
