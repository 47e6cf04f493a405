"""Repeated layers traced once (``--fast``): trace a few blocks of a deep stack, extrapolate.

Runs inside the sandboxed worker, beside :func:`opcheck.tracers.runtime.trace_module`. A
transformer is mostly N structurally identical blocks in one ``nn.ModuleList`` (or
``nn.Sequential``); tracing all of them costs N times the ops of one and adds no distinct op.

Method (difference, checked at runtime). For each run of N identical blocks (a whole list, or
its longest run of >= 4 when the first block differs, as in T5), the model is traced on a copy
whose list keeps only the run's blocks S0 = [0], S1 = [0, N-1] and S2 = [0, N//2, N-1] (the
blocks outside the run always, the other lists' runs at [0]). With Δa = T(S1) − T(S0) and
Δb = T(S2) − T(S1), taken per op record and per call signature, the blocks are additive when
Δa == Δb (and nothing is negative); then the full trace's counts are T(S0) + (N−1)·Δa. Per
record, not per call, so the backward pass, the engine's gradient accumulation and the
optimizer step are covered without attributing each call to a block. Several lists (encoder +
decoder) add up, which one more trace (every run at [0, N-1]) checks. The op set, dtypes,
signatures, shapes, locations and APIs are the union of the traces; module paths keep the
original block names (``model.layers.79``).

Arguments that grow with N. A call taking one tensor per parameter (AdamW's ``_foreach_`` ops)
is one call per step whatever N is: its count difference is 0, so it stays 1, and its tensor
lists are keyed by their dtypes, not their length. Its per-tensor scalar list (the step sizes)
does enter the signature, written out up to 8 values and as ``<N values>`` beyond: for
``_foreach_`` ops that length is factored out, checked to grow linearly like a count and
written back at its extrapolated value, so the signature is the full trace's. Any other
argument whose value changes with the block count changes the signature key and fails the
check.

What it cannot see, and so the note says: a block that behaves differently from blocks 0, N//2
and N-1 only at run time (``if self.layer_idx == 5``). Blocks that differ in structure or in a
simple attribute (sliding-window layers, ``attention_type``, a different MLP class) are found
before tracing and the list is traced in full. Anything else that fails (the forward indexes
``self.layers[i]`` for ``i`` up to the config's count, the model cannot be copied, the counts
are not additive) falls back to the full trace with a note saying why.
"""

from __future__ import annotations

import copy
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from opcheck.core.oplist import OpList, OpUse
from opcheck.tracers import runtime
from opcheck.tracers.inputs import InputSpec
from opcheck.tracers.signature import _MAX_LIST

MIN_BLOCKS = 4  # below this the saving is small and the check would trace every block anyway
NOTE = "--fast"  # every note this module writes starts with it
# Attributes that number a block rather than configure it: equal blocks differ only here.
INDEX_ATTRS = frozenset({
    "layer_idx", "layer_id", "layer_index", "layer_number", "layer_num", "layer_no",
    "idx", "index", "block_idx", "block_id", "block_index", "block_num", "i_layer",
})  # fmt: skip
_DIGEST_DEPTH = 2


@dataclass
class Repeated:
    """A run of structurally identical blocks, positions ``start``..``stop - 1`` of the list at
    ``path`` (whose keys, in order, are ``keys``); blocks outside the run are always kept."""

    path: str  # "" for the model itself (an nn.Sequential of blocks)
    keys: list[str]
    cls: str
    start: int = 0
    stop: int = -1

    def __post_init__(self) -> None:
        if self.stop < 0:
            self.stop = len(self.keys)

    @property
    def name(self) -> str:
        return self.path or "the model"

    @property
    def n(self) -> int:
        """Blocks in the run."""
        return self.stop - self.start

    def keep(self, run: list[int]) -> list[int]:
        """List positions kept: every block outside the run and the run's blocks ``run``."""
        outside = [i for i in range(len(self.keys)) if not self.start <= i < self.stop]
        return sorted(outside + [self.start + p for p in run])

    def key(self, p: int) -> str:
        """The key of the run's block ``p``."""
        return self.keys[self.start + p]

    def describe(self) -> str:
        if self.n == len(self.keys):
            return f"{self.name} holds {self.n} identical {self.cls} blocks"
        return (f"{self.name} holds {self.n} identical {self.cls} blocks ({self.key(0)} to "
                f"{self.key(self.n - 1)} of {len(self.keys)}; the others traced as they are)")


@dataclass
class Found:
    lists: list[Repeated] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # why a candidate list was not used


# ---------------------------------------------------------------- finding repeated blocks


def find_repeated(model: Any) -> Found:
    """In the outermost ``ModuleList``/``Sequential`` with ≥ MIN_BLOCKS children, the longest
    run of ≥ MIN_BLOCKS consecutive structurally identical blocks (T5's first block has the
    relative position bias, a ResNet stage's the downsampling: the rest is the run). A list of
    one class without such a run is rejected with the first difference found."""
    import torch

    found = Found()
    taken: list[str] = []
    for path, mod in model.named_modules():
        if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        if any(t == "" or path.startswith(t + ".") for t in taken):
            continue  # inside a block of an outer list: follows that list
        children = list(mod._modules.items())
        if len(children) < MIN_BLOCKS or any(c is None for _, c in children):
            continue
        one_class = len({type(c) for _, c in children}) == 1
        prints = [fingerprint(c) for _, c in children]
        start, stop, i = 0, 0, 0
        while i < len(prints):
            j = i + 1
            while j < len(prints) and _first_difference(prints[i], prints[j]) == "":
                j += 1
            if j - i > stop - start:
                start, stop = i, j
            i = j
        keys = [k for k, _ in children]
        if stop - start >= MIN_BLOCKS:
            taken.append(path)
            cls = type(children[start][1]).__name__
            found.lists.append(Repeated(path, keys, cls, start, stop))
        elif one_class:
            taken.append(path)
            j = next(j for j in range(1, len(prints)) if _first_difference(prints[0], prints[j]))
            found.rejected.append(f"{path or 'the model'}: block {keys[j]} differs from block "
                                  f"{keys[0]} in {_first_difference(prints[0], prints[j])}")
    return found


def _module_internals() -> frozenset[str]:
    import torch

    return frozenset(vars(torch.nn.Module()))


def fingerprint(block: Any) -> dict[tuple[str, str], Any]:
    """What makes two blocks run the same ops: submodule classes, parameter and buffer shapes,
    dtypes and requires_grad, and the simple instance attributes of every submodule (a block's
    number excepted)."""
    import torch

    internals = _module_internals()
    out: dict[tuple[str, str], Any] = {}
    memo: dict[int, Any] = {}
    for rel, sub in block.named_modules(remove_duplicate=False):
        at = rel or "(block)"
        out[("class", at)] = f"{type(sub).__module__}.{type(sub).__qualname__}"
        for name, p in sub._parameters.items():
            out[("param", _join(rel, name))] = None if p is None else (
                tuple(p.shape), str(p.dtype), bool(p.requires_grad))
        for name, b in sub._buffers.items():
            out[("buffer", _join(rel, name))] = None if b is None else (
                tuple(b.shape), str(b.dtype))
        for name, value in vars(sub).items():
            if name in internals or name in INDEX_ATTRS:
                continue
            if isinstance(value, torch.Tensor):
                out[("attr", _join(rel, name))] = ("tensor", tuple(value.shape), str(value.dtype))
            else:
                out[("attr", _join(rel, name))] = _digest(value, _DIGEST_DEPTH, memo)
    return out


def _join(rel: str, name: str) -> str:
    return f"{rel}.{name}" if rel else name


def _digest(value: Any, depth: int, memo: dict[int, Any]) -> Any:
    """A comparable summary: simple values as they are, containers element-wise, objects by
    their type and (to ``depth``) their own attributes; shared objects summarise alike."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if id(value) in memo:
        return memo[id(value)]
    out: Any
    if isinstance(value, (list, tuple)):
        out = ("seq", tuple(_digest(v, depth, memo) for v in value[:64]), len(value))
    elif isinstance(value, dict):
        items = sorted(((str(k), _digest(v, depth, memo)) for k, v in list(value.items())[:256]),
                       key=lambda kv: kv[0])
        out = ("dict", tuple(items))
    elif callable(value) and hasattr(value, "__qualname__"):
        out = ("callable", getattr(value, "__module__", ""), value.__qualname__)
    elif depth > 0 and hasattr(value, "__dict__"):
        items = sorted((str(k), _digest(v, depth - 1, memo)) for k, v in vars(value).items()
                       if not str(k).startswith("__"))
        out = ("obj", type(value).__qualname__, tuple(items))
    else:
        out = ("obj", type(value).__qualname__)
    memo[id(value)] = out
    return out


def _first_difference(a: dict[tuple[str, str], Any], b: dict[tuple[str, str], Any]) -> str:
    for key in [*a, *(k for k in b if k not in a)]:
        if key not in a or key not in b:
            kind, where = key
            return f"{where} (a {kind} one block has and the other has not)"
        try:
            same = bool(a[key] == b[key])
        except Exception:  # values that do not compare: treat as different
            same = False
        if not same:
            kind, where = key
            if kind == "class":
                return f"submodule {where} ({_short(a[key])} vs {_short(b[key])})"
            if kind == "attr":
                return f"attribute {where} ({_show(a[key])} vs {_show(b[key])})"
            return f"{kind} {where} ({a[key]} vs {b[key]})"
    return ""


def _short(qualname: Any) -> str:
    return str(qualname).rsplit(".", 1)[-1]


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- tracing


def trace_fast(
    model: Any,
    inputs: InputSpec,
    *,
    example_args: tuple[Any, ...] = (),
    example_kwargs: dict[str, Any] | None = None,
    train: bool = False,
    label: str = "",
    method: str = "runtime",
    composites: Iterable[str] = (),
    stream: runtime.Stream | None = None,
) -> OpList:
    """:func:`runtime.trace_module` with repeated blocks traced a few times and the counts
    extrapolated, or the full trace (with a note saying why) when that is not provably the
    same."""
    composites = list(composites)

    def run(target: Any) -> OpList:
        return runtime.trace_module(
            target, inputs, example_args=example_args, example_kwargs=example_kwargs,
            train=train, label=label, method=method, composites=composites, stream=stream,
        )  # fmt: skip

    def full(why: str) -> OpList:
        note = f"{NOTE}: {why}; traced in full"
        try:
            ol = run(model)
        except runtime.PartialTrace as exc:
            exc.partial.notes.insert(0, note)
            raise
        ol.notes.insert(0, note)
        return ol

    found = find_repeated(model)
    rejected = "; ".join(found.rejected)
    if not found.lists:
        why = f"no list of {MIN_BLOCKS} or more identical blocks"
        return full(f"{why} ({rejected})" if rejected else why)
    try:
        ol, why = _extrapolated(model, found.lists, run)
    except MemoryError:
        raise
    except runtime.PartialTrace as exc:
        if str(exc).startswith("data-dependent"):
            return full(f"the trace with fewer blocks stopped ({exc})")
        return full(f"the model does not run with fewer blocks ({exc})")
    except Exception as exc:  # truncation broke the model: the full trace decides
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return full(f"the model does not run with fewer blocks ({type(exc).__name__}"
                    + (f": {text[:200]})" if text else ")"))
    if ol is None:
        return full(why)
    if rejected:
        ol.notes.insert(len(found.lists), f"{NOTE}: traced in full: {rejected}")
    return ol


Counts = Counter[tuple[Any, ...]]
Lengths = dict[tuple[Any, ...], dict[str, int]]
# A _foreach_ op takes one scalar per tensor of its lists (AdamW's step sizes): that list grows
# with the block count, explicit up to 8 values and "<N values>" beyond (signature._compact_arg),
# so its length is factored out of the signature and extrapolated like a count.
_LONG = re.compile(r"^<(\d+) values>$")
_UNKNOWN = object()


class NotAdditive(Exception):
    """The traces cannot be combined by counting."""


@dataclass
class Profile:
    """A trace's counts per op record and per signature (long-list lengths factored out) and
    those lengths."""

    counts: Counts
    lengths: Lengths
    fills: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)


def _sig_key(
    op: str, via: list[str], sig: Any
) -> tuple[tuple[Any, ...], dict[str, int], dict[str, Any]]:
    """The signature's key with per-tensor scalar lists as "<n values>", their lengths and
    (when written out) their one repeated value."""
    lens: dict[str, int] = {}
    fills: dict[str, Any] = {}
    if "::_foreach_" in op:
        for k, v in sig.args.items():
            if isinstance(v, str) and (m := _LONG.match(v)):
                lens[k] = int(m.group(1))
            elif isinstance(v, list) and v and all(x == v[0] for x in v):
                lens[k], fills[k] = len(v), v[0]
    if not lens:
        return ("sig", sig.key, op, *via), {}, {}
    args = {k: ("<n values>" if k in lens else v) for k, v in sig.args.items()}
    return ("sig", replace(sig, args=args).key, op, *via), lens, fills


def _profile(ol: OpList) -> Profile:
    p = Profile(Counter(), {})
    for u in ol.ops:
        p.counts[("op", u.op, *u.via)] += u.count
        for s in u.signatures:
            key, lens, fills = _sig_key(u.op, u.via, s)
            if lens:
                known = p.fills.get(key, {})
                if p.lengths.get(key, lens) != lens or any(
                        known.get(k, x) != x for k, x in fills.items()):
                    raise NotAdditive(f"{u.op}: called with different scalar lists")
                p.lengths[key] = lens
                p.fills.setdefault(key, {}).update(fills)
            p.counts[key] += s.count
    return p


def _extrapolated(
    model: Any, lists: list[Repeated], run: Callable[[Any], OpList]
) -> tuple[OpList | None, str]:
    """The combined op list, or (None, why not)."""
    base_keep = {r.path: r.keep([0]) for r in lists}
    traces: list[OpList] = [_trace_kept(model, lists, base_keep, run)]
    try:
        base = _profile(traces[0])
        total: Counts = Counter(base.counts)
        lengths: Lengths = {k: dict(v) for k, v in base.lengths.items()}
        deltas: list[Profile] = []
        for r in lists:
            mid = r.n // 2
            t1 = _trace_kept(model, lists, {**base_keep, r.path: r.keep([0, r.n - 1])}, run)
            t2 = _trace_kept(model, lists, {**base_keep, r.path: r.keep([0, mid, r.n - 1])}, run)
            p1, p2 = _profile(t1), _profile(t2)
            da = _minus(p1, base)
            bad = (_disagree(da, _minus(p2, p1)) or _negative(da.counts)
                   or _negative_lengths(da.lengths))  # fmt: skip
            if bad:
                return None, (f"{r.name}: the op counts of blocks {r.key(mid)} and "
                              f"{r.key(r.n - 1)} differ ({bad}), so the blocks are not "
                              "interchangeable")  # fmt: skip
            deltas.append(da)
            traces += [t2, t1]
            for k, v in da.counts.items():
                total[k] += (r.n - 1) * v
            for k, grow in da.lengths.items():
                for arg, v in grow.items():
                    lengths[k][arg] += (r.n - 1) * v
        if len(lists) > 1:  # the lists' contributions add up: every list at [0, N-1] at once
            both = _trace_kept(model, lists, {r.path: r.keep([0, r.n - 1]) for r in lists}, run)
            want = Profile(Counter(), {})
            for d in deltas:
                want.counts.update(d.counts)
                for k, dl in d.lengths.items():
                    for arg, v in dl.items():
                        want.lengths.setdefault(k, {}).setdefault(arg, 0)
                        want.lengths[k][arg] += v
            bad = _disagree(_minus(_profile(both), base), want)
            if bad:
                return None, f"the repeated lists do not add up independently ({bad})"
            traces.append(both)
    except NotAdditive as exc:
        return None, f"the counts cannot be extrapolated ({exc})"
    return _combine(traces, total, lengths, lists), ""


def _trace_kept(
    model: Any, lists: list[Repeated], keep: dict[str, list[int]], run: Callable[[Any], OpList]
) -> OpList:
    """Trace a copy of ``model`` whose lists hold only the blocks at the ``keep`` positions;
    module paths in the result name the original blocks."""
    import torch

    saved: list[tuple[Any, Any]] = []
    renames: dict[str, str] = {}
    try:
        for r in lists:
            mod = model.get_submodule(r.path)
            old = mod._modules
            kept = OrderedDict()
            for i, pos in enumerate(keep[r.path]):
                key = r.keys[pos]
                # a ModuleList is indexed by position (its keys must be 0..n-1); a Sequential
                # looks keys up by position itself, so its own names can stay
                new = str(i) if isinstance(mod, torch.nn.ModuleList) else key
                kept[new] = old[key]
                if new != key:
                    renames[_join(r.path, new)] = _join(r.path, key)
            saved.append((mod, old))
            mod._modules = kept
        # a copy: the traces move tensors to fake ones and models may cache state on the
        # first call, so each trace (and a fallback full trace) starts from the user's model
        twin = copy.deepcopy(model)
    finally:
        for mod, old in reversed(saved):
            mod._modules = old
    ol = run(twin)
    if renames:
        for use in ol.ops:
            use.modules = [_renamed(m, renames) for m in use.modules]
    return ol


def _renamed(path: str, renames: dict[str, str]) -> str:
    for new, old in renames.items():
        if path == new or path.startswith(new + "."):
            return old + path[len(new):]
    return path


def _minus(a: Profile, b: Profile) -> Profile:
    """Per key a − b; long-list lengths only where both have the key (a key present in one
    only must keep its length: it has nothing to extrapolate from)."""
    out = Profile(Counter(), {})
    for k in set(a.counts) | set(b.counts):
        d = a.counts.get(k, 0) - b.counts.get(k, 0)
        if d:
            out.counts[k] = d
    for k in set(a.lengths) | set(b.lengths):
        la, lb = a.lengths.get(k), b.lengths.get(k)
        if la is None or lb is None:
            continue
        if set(la) != set(lb):
            raise NotAdditive(f"{k[2]}: different long arguments")
        out.lengths[k] = {arg: la[arg] - lb[arg] for arg in la}
    return out


def _what(k: tuple[Any, ...]) -> str:
    return str(k[2] if k[0] == "sig" else k[1])


def _disagree(a: Profile, b: Profile) -> str:
    """The first difference, the telling one first: an op one side calls and the other not."""
    differ = [k for k in set(a.counts) | set(b.counts) if a.counts.get(k, 0) != b.counts.get(k, 0)]
    if differ:
        k = min(differ, key=lambda k: (k[0] != "op", bool(a.counts.get(k) and b.counts.get(k)),
                                       str(k)))  # fmt: skip
        return f"{_what(k)}: {a.counts.get(k, 0)} vs {b.counts.get(k, 0)} calls"
    for k in sorted(set(a.lengths) | set(b.lengths), key=str):
        la, lb = a.lengths.get(k, {}), b.lengths.get(k, {})
        if any(la.get(arg, 0) != lb.get(arg, 0) for arg in set(la) | set(lb)):
            return f"{_what(k)}: list arguments grow by {la} vs {lb} values"
    return ""


def _negative(d: Counts) -> str:
    for k, v in d.items():
        if v < 0:
            return f"{_what(k)}: {v} calls per block"
    return ""


def _negative_lengths(d: Lengths) -> str:
    for k, dl in d.items():
        if any(v < 0 for v in dl.values()):
            return f"{_what(k)}: list arguments shrink by {dl} values per block"
    return ""


def _written(length: int, fill: Any) -> Any:
    """A scalar list of ``length`` as signature._signature writes it."""
    if length > _MAX_LIST or fill is _UNKNOWN:
        return f"<{length} values>"
    return [fill] * length


def _combine(
    traces: list[OpList], total: Counts, lengths: Lengths, lists: list[Repeated]
) -> OpList:
    """The union of the traces (first seen first) with the extrapolated counts and long-list
    lengths."""
    first = traces[0]
    fills: dict[tuple[Any, ...], dict[str, Any]] = {}
    for t in traces:
        for u in t.ops:
            for s in u.signatures:
                key, _, fill = _sig_key(u.op, u.via, s)
                fills.setdefault(key, {}).update(fill)
    merged: dict[tuple[str, tuple[str, ...]], OpUse] = {}
    for t in traces:
        for u in t.ops:
            for s in u.signatures:
                key, lens, _ = _sig_key(u.op, u.via, s)
                for arg in lens:
                    if key in lengths:
                        s.args[arg] = _written(lengths[key][arg],
                                               fills.get(key, {}).get(arg, _UNKNOWN))
            if u.key in merged:
                merged[u.key].merge(u)
            else:
                merged[u.key] = u.copy()
    for u in merged.values():
        u.count = total.get(("op", u.op, *u.via), 0)
        for s in u.signatures:
            s.count = total.get(_sig_key(u.op, u.via, s)[0], 0)
    notes: list[str] = []
    for r in lists:
        notes.append(
            f"{NOTE}: {r.describe()}; blocks {r.key(0)}, {r.key(r.n // 2)} and "
            f"{r.key(r.n - 1)} were traced, their op counts agreed, and the counts of "
            f"the {r.n - 3} untraced ones are extrapolated from them (an approximation of the full "
            "trace: module paths, shapes and locations are those of the traced blocks)"
        )
    for t in traces:
        for n in t.notes:
            if n not in notes:
                notes.append(n)
    return OpList(
        model=first.model, method=first.method, ir=first.ir, torch_version=first.torch_version,
        mode=first.mode, notes=notes,
        ops=sorted(merged.values(), key=lambda u: (u.op, u.via)),
        complete=all(t.complete for t in traces),
        stopped=next((t.stopped for t in traces if t.stopped), ""),
    )  # fmt: skip
