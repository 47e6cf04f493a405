"""The OpList document: what a model calls, as the NPU backend would receive it.

Shared by every tracer, the checker, ``opcheck explain`` and the Datasette page. It crosses
process boundaries (the sandboxed tracer writes it), so it is versioned JSON:

```json
{
  "schema_version": 2,
  "kind": "opcheck.oplist",
  "model": "resnet.pt2",
  "method": "runtime" | "static-export" | "static-torchscript" | "log",
  "ir": "runtime-dispatch" | "pre-dispatch" | "torchscript" | "log",
  "torch_version": "2.13.0",          // torch that produced the listing ("" for logs)
  "mode": "inference" | "train",
  "complete": true,                   // false: the trace stopped early (see "stopped")
  "stopped": "",                      // why and where it stopped, when not complete
  "recorder": "fake-tensors",         // what ran the model: "fake-tensors" | "real-data" | ""
  "notes": ["..."],
  "loop_cuts": [{"where": "train.py:12", "ran": 2, "of": 40}],  // loops a run's budget ended
  "ops": [
    {"op": "aten::add.Tensor", "count": 12,
     "dtypes": ["float32"], "shapes": [[1, 3, 224, 224]],
     "modules": ["layer1.0.conv1"],
     "locations": ["model.py:42"],
     "parent": "", "via": [], "composite": false, "children": [],
     "signatures": [
       {"inputs": {"self": "float32", "other": "float32"}, "outputs": ["float32"],
        "dtype": "", "args": {"alpha": 2}, "count": 12, "apis": ["Tensor.add"]}]},
    {"op": "aten::slogdet", "count": 1, ..., "composite": true,
     "children": ["aten::linalg_slogdet"]},
    {"op": "aten::linalg_slogdet", "count": 1, ..., "parent": "aten::slogdet",
     "via": ["aten::slogdet"]}
  ]
}
```
Ops are keyed by the canonical ``namespace::name.overload`` string.

Two levels (schema 2): a backend that registers a kernel for a CompositeImplicitAutograd (CIA)
op receives that op itself; one that does not receives its decomposition. A runtime trace
therefore records both: the CIA op (``composite: true``, ``children`` = the distinct ops its
decomposition called) and each op of the decomposition with ``parent`` (the CIA op it came from)
and ``via`` (all enclosing CIA ops, outermost first; ``via[-1] == parent``). A record is keyed by
``(op, via)``. Which level a release receives is decided by ``opcheck.checker.levels``;
:meth:`OpList.leaves` is the fully decomposed view (schema 1's meaning of ``ops``).
Schema 1 documents still load: every record is then a top-level leaf.

``signatures`` (schema 2): the distinct ways the op was called, with counts: tensor dtypes by
schema argument name (``self``, ``other``, ``weight``, ``indices``...; a tensor list by its
dtypes joined with commas), output dtypes, the ``dtype=`` argument of factory and cast ops, and
the non-tensor arguments that differ from the schema default (scalars, strings, bools, short
lists; longer lists as ``"<N values>"``). At most MAX_SIGNATURES per record, the first seen.
``apis``: the public Python calls in the user's code that led to the op with that signature
(``torch.nn.functional.max_pool3d``, ``Tensor.to``, ``torch.nn.Embedding``), at most MAX_APIS.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opcheck.core import jsonio
from opcheck.core.errors import OpcheckError, TraceError
from opcheck.core.opname import canonical

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
KIND = "opcheck.oplist"
MAX_SAMPLES = 8  # shapes / modules / locations kept per op: enough to find it, bounded size
MAX_CHILDREN = 64  # distinct child ops kept per composite record
MAX_SIGNATURES = 16  # distinct call signatures kept per record (the first ones seen)
MAX_APIS = 4  # public API calls kept per signature
# OpList.recorder: what ran the model for a runtime listing
RECORDER_FAKE = "fake-tensors"  # tracers/runtime.py: FakeTensors on the renamed device
RECORDER_REAL = "real-data"  # tracers/realdevice.py: real CPU data behind the npu device
RECORDERS = (RECORDER_FAKE, RECORDER_REAL)


def _add_bounded(mine: list[Any], theirs: list[Any], limit: int = MAX_SAMPLES) -> None:
    for item in theirs:
        if item not in mine and len(mine) < limit:
            mine.append(item)


@dataclass
class Signature:
    """One distinct way an op was called: dtypes per tensor argument (by schema name), output
    dtypes, the ``dtype=`` argument, compact non-tensor arguments; with a call count."""

    inputs: dict[str, str] = field(default_factory=dict)  # "self": "float32", "indices": "int64"
    outputs: list[str] = field(default_factory=list)
    dtype: str = ""  # the dtype= argument of factory and cast ops
    args: dict[str, Any] = field(default_factory=dict)  # non-default non-tensor arguments
    count: int = 0
    # the public Python API calls (in the user's code) that produced these calls:
    # "torch.nn.functional.max_pool3d", "Tensor.to", "torch.nn.Embedding"
    apis: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return json.dumps([self.inputs, self.dtype, self.args], sort_keys=True, default=str)

    @classmethod
    def from_json(cls, raw: Any) -> Signature:
        args = raw.get("args", {})
        if not isinstance(args, dict):
            raise TypeError("signature args must be an object")
        return cls(
            inputs={str(k): str(v) for k, v in dict(raw.get("inputs", {})).items()},
            outputs=[str(d) for d in raw.get("outputs", [])],
            dtype=str(raw.get("dtype", "")),
            args={str(k): _compact(v) for k, v in args.items()},
            count=int(raw.get("count", 1)),
            apis=[str(a) for a in raw.get("apis", [])][:MAX_APIS],
        )


def _compact(v: Any) -> Any:
    """JSON scalars and flat lists of them as they are; anything else as its string."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list) and all(x is None or isinstance(x, (bool, int, float, str)) for x in v):
        return v
    return str(v)


def merge_signatures(mine: list[Signature], theirs: list[Signature]) -> None:
    index = {s.key: s for s in mine}
    for sig in theirs:
        got = index.get(sig.key)
        if got is not None:
            got.count += sig.count
            if not got.outputs:
                got.outputs = list(sig.outputs)
            _add_bounded(got.apis, sig.apis, MAX_APIS)
        elif len(mine) < MAX_SIGNATURES:
            copy = Signature(dict(sig.inputs), list(sig.outputs), sig.dtype, dict(sig.args),
                             sig.count, list(sig.apis))  # fmt: skip
            mine.append(copy)
            index[copy.key] = copy


@dataclass
class OpUse:
    op: str
    count: int = 0
    dtypes: list[str] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    parent: str = ""  # the CompositeImplicitAutograd op whose decomposition called this op
    via: list[str] = field(default_factory=list)  # enclosing CIA ops, outermost first
    composite: bool = False  # a CIA op: the ops of its decomposition are records with parent
    children: list[str] = field(default_factory=list)  # distinct ops its decomposition called
    signatures: list[Signature] = field(default_factory=list)  # distinct calls, with counts

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return (self.op, tuple(self.via))

    def merge(self, other: OpUse) -> None:
        self.count += other.count
        self.composite = self.composite or other.composite
        for mine, theirs in (
            (self.dtypes, other.dtypes),
            (self.modules, other.modules),
            (self.locations, other.locations),
            (self.shapes, other.shapes),
        ):
            _add_bounded(mine, theirs)
        _add_bounded(self.children, other.children, MAX_CHILDREN)
        merge_signatures(self.signatures, other.signatures)

    def copy(self) -> OpUse:
        out = OpUse(
            self.op, self.count, list(self.dtypes), [list(s) for s in self.shapes],
            list(self.modules), list(self.locations), self.parent, list(self.via),
            self.composite, list(self.children),
        )  # fmt: skip
        merge_signatures(out.signatures, self.signatures)
        return out


@dataclass
class LoopCut:
    """A loop of a run that the tracer's budget ended early (``tracers/script.py`` Budget):
    where, how many iterations ran, how many it had (None: an iterator with no length)."""

    where: str
    ran: int
    of: int | None = None

    @classmethod
    def from_json(cls, raw: Any) -> LoopCut:
        of = raw.get("of")
        return cls(where=str(raw["where"]), ran=int(raw["ran"]),
                   of=None if of is None else int(of))  # fmt: skip


def loop_cuts_text(cuts: Sequence[LoopCut]) -> str:
    """``where ran 2 of 8, then 1 of 8 iterations; ...`` (one part per loop, in order)."""
    runs: dict[str, list[str]] = {}
    for c in cuts:
        runs.setdefault(c.where, []).append(f"{c.ran}" + (f" of {c.of}" if c.of is not None
                                                          else ""))  # fmt: skip
    return "; ".join(f"{where} ran {', then '.join(each)} iterations"
                     for where, each in runs.items())  # fmt: skip


@dataclass
class OpList:
    model: str
    method: str
    ir: str
    torch_version: str = ""
    mode: str = "inference"
    notes: list[str] = field(default_factory=list)
    ops: list[OpUse] = field(default_factory=list)
    complete: bool = True  # False: the trace stopped before the end of the model
    stopped: str = ""  # why and where it stopped (empty when complete)
    # what ran the model (RECORDERS): fake tensors, or real data on the recorded device (a
    # fallback where code reads tensor values); "" for static listings and logs. Optional in
    # the document (readers of schema 2 without it ignore it), so the schema version stays.
    recorder: str = ""
    # what a run's script set that decides speed (``opcheck.tracers.settings``): one dict per
    # setting, ``{"kind": "optimizer"|"dataloader"|"to"|"anomaly"|"sync_batchnorm"|"env"|
    # "compile_mode", "where": "file:line", ...}``; optional, so older op lists still read
    settings: list[dict[str, Any]] = field(default_factory=list)
    # whether any tensor reached the recorded device (None: not known, e.g. not a run)
    on_device: bool | None = None
    # which part of a multimodal model ran (atlas traces of transformers models): "full" (every
    # vision/audio/video tower ran), "text only: <towers that did not run>", "" not known or
    # not applicable; optional in the document like ``recorder``
    forward: str = ""
    # the loops a run's budget ended early (its shapes and counts are then lower bounds); the
    # note saying so is rendered from them; optional in the document like ``recorder``
    loop_cuts: list[LoopCut] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": KIND}
        doc.update(asdict(self))
        doc["ops"] = sorted(doc["ops"], key=lambda o: (o["op"], o["via"]))
        return doc

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def leaves(self) -> list[OpUse]:
        """Every op below the CIA level, merged by name: the ops a backend with no kernel for
        any CompositeImplicitAutograd op receives (what schema 1 listed)."""
        merged: dict[str, OpUse] = {}
        for use in self.ops:
            if use.composite:
                continue
            if use.op in merged:
                merged[use.op].merge(use)
            else:
                flat = use.copy()
                flat.parent, flat.via, flat.children = "", [], []
                merged[use.op] = flat
        return sorted(merged.values(), key=lambda u: u.op)

    def composites(self) -> list[OpUse]:
        """The CIA records (every level), in document order."""
        return [u for u in self.ops if u.composite]

    def by_op(self) -> dict[str, OpUse]:
        """The leaves by op name (see :meth:`leaves`)."""
        return {u.op: u for u in self.leaves()}

    @classmethod
    def from_json(cls, doc: Any, *, source: str = "<oplist>") -> OpList:
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            raise TraceError(f"{source}: not an opcheck op list (no \"kind\": \"{KIND}\")")
        version = doc.get("schema_version")
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            raise TraceError(
                f"{source}: op list schema_version {version!r} is not supported "
                f"(this opcheck reads {', '.join(map(str, READABLE_VERSIONS))})"
            )
        try:
            merged: dict[tuple[str, tuple[str, ...]], OpUse] = {}
            for raw in doc["ops"]:
                via = [canonical(str(v)) for v in raw.get("via", [])] if version >= 2 else []
                use = OpUse(
                    op=canonical(str(raw["op"])),
                    count=int(raw.get("count", 1)),
                    dtypes=[str(d) for d in raw.get("dtypes", [])],
                    shapes=[[int(x) for x in s] for s in raw.get("shapes", [])],
                    modules=[str(m) for m in raw.get("modules", [])],
                    locations=[str(loc) for loc in raw.get("locations", [])],
                    parent=via[-1] if via else "",
                    via=via,
                    composite=version >= 2 and raw.get("composite") is True,
                    children=[canonical(str(c)) for c in raw.get("children", [])]
                    if version >= 2
                    else [],
                )
                if version >= 2:
                    sigs = [Signature.from_json(x) for x in raw.get("signatures", [])]
                    merge_signatures(use.signatures, sigs)
                if use.key in merged:
                    merged[use.key].merge(use)
                else:
                    merged[use.key] = use
            complete = doc.get("complete", True) is not False
            return cls(
                model=str(doc.get("model", "")),
                method=str(doc["method"]),
                ir=str(doc.get("ir", "")),
                torch_version=str(doc.get("torch_version", "")),
                mode=str(doc.get("mode", "inference")),
                notes=[str(n) for n in doc.get("notes", [])],
                ops=list(merged.values()),
                complete=complete,
                stopped="" if complete else str(doc.get("stopped", "")),
                recorder=str(doc.get("recorder", "")),
                forward=str(doc.get("forward", "")),
                loop_cuts=[LoopCut.from_json(x) for x in doc.get("loop_cuts", [])],
                settings=[dict(x) for x in doc.get("settings", []) if isinstance(x, dict)],
                on_device=(doc.get("on_device") if isinstance(doc.get("on_device"), bool)
                           else None),
            )
        except OverflowError:  # a JSON number like 1e400 reads as inf, which int() refuses
            raise TraceError(
                f"{source}: malformed op list: a count or shape is not a finite integer"
            ) from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TraceError(f"{source}: malformed op list: {exc}") from None
        except OpcheckError as exc:  # UsageError from a bad op name
            raise TraceError(f"{source}: malformed op list: {exc}") from None

    @classmethod
    def load(cls, path: Path) -> OpList:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TraceError(f"cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise TraceError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        try:
            doc = jsonio.loads(text)
        except jsonio.JsonInputError as exc:
            raise TraceError(f"{path}: {exc}") from None
        return cls.from_json(doc, source=str(path))
