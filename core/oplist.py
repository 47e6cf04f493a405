"""The OpList document: what a model calls, as the NPU backend would receive it.

Shared by every tracer, the checker, ``opcheck explain`` and the Datasette page. It crosses
process boundaries (the sandboxed tracer writes it), so it is versioned JSON:

```json
{
  "schema_version": 1,
  "kind": "opcheck.oplist",
  "model": "resnet.pt2",
  "method": "runtime" | "static-export" | "static-torchscript" | "log",
  "ir": "runtime-dispatch" | "pre-dispatch" | "torchscript" | "log",
  "torch_version": "2.13.0",          // torch that produced the listing ("" for logs)
  "mode": "inference" | "train",
  "notes": ["..."],
  "ops": [
    {"op": "aten::add.Tensor", "count": 12,
     "dtypes": ["float32"], "shapes": [[1, 3, 224, 224]],
     "modules": ["layer1.0.conv1"],
     "locations": ["model.py:42"]}
  ]
}
```
Ops are keyed by the canonical ``namespace::name.overload`` string.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opcheck.core.errors import OpcheckError, TraceError
from opcheck.core.opname import canonical

SCHEMA_VERSION = 1
KIND = "opcheck.oplist"
MAX_SAMPLES = 8  # shapes / modules / locations kept per op: enough to find it, bounded size


@dataclass
class OpUse:
    op: str
    count: int = 0
    dtypes: list[str] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)

    def merge(self, other: OpUse) -> None:
        self.count += other.count
        for mine, theirs in (
            (self.dtypes, other.dtypes),
            (self.modules, other.modules),
            (self.locations, other.locations),
        ):
            for item in theirs:
                if item not in mine and len(mine) < MAX_SAMPLES:
                    mine.append(item)
        for shape in other.shapes:
            if shape not in self.shapes and len(self.shapes) < MAX_SAMPLES:
                self.shapes.append(shape)


@dataclass
class OpList:
    model: str
    method: str
    ir: str
    torch_version: str = ""
    mode: str = "inference"
    notes: list[str] = field(default_factory=list)
    ops: list[OpUse] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": KIND}
        doc.update(asdict(self))
        doc["ops"] = sorted(doc["ops"], key=lambda o: o["op"])
        return doc

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def by_op(self) -> dict[str, OpUse]:
        return {u.op: u for u in self.ops}

    @classmethod
    def from_json(cls, doc: Any, *, source: str = "<oplist>") -> OpList:
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            raise TraceError(f"{source}: not an opcheck op list (no \"kind\": \"{KIND}\")")
        version = doc.get("schema_version")
        if version != SCHEMA_VERSION:
            raise TraceError(
                f"{source}: op list schema_version {version!r} is not supported "
                f"(this opcheck reads {SCHEMA_VERSION})"
            )
        try:
            merged: dict[str, OpUse] = {}
            for raw in doc["ops"]:
                use = OpUse(
                    op=canonical(str(raw["op"])),
                    count=int(raw.get("count", 1)),
                    dtypes=[str(d) for d in raw.get("dtypes", [])],
                    shapes=[[int(x) for x in s] for s in raw.get("shapes", [])],
                    modules=[str(m) for m in raw.get("modules", [])],
                    locations=[str(loc) for loc in raw.get("locations", [])],
                )
                if use.op in merged:
                    merged[use.op].merge(use)
                else:
                    merged[use.op] = use
            return cls(
                model=str(doc.get("model", "")),
                method=str(doc["method"]),
                ir=str(doc.get("ir", "")),
                torch_version=str(doc.get("torch_version", "")),
                mode=str(doc.get("mode", "inference")),
                notes=[str(n) for n in doc.get("notes", [])],
                ops=list(merged.values()),
            )
        except (KeyError, TypeError, ValueError) as exc:
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
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise TraceError(f"{path}: JSON nested too deeply") from None
        return cls.from_json(doc, source=str(path))
