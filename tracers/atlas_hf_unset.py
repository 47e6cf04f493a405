"""Config fields a transformers default config leaves None (the checkpoint sets them) that the
model's code reads without a guard at trace time, not at build time: a clamp bound, a per-class
threshold list. The fake trace stops on the line reading one; the field is then given a value
by its declared type and the model built and traced again (:mod:`opcheck.tracers.atlas_trace`).

By the failing line and the config's declared field types only, never by a model's name.
Imported lazily (inside the sandbox), as atlas_hf is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_FAILED_AT = re.compile(r"tracing failed at (\S+\.py):(\d+): (.*)")
_READ = re.compile(r"\.(\w+)\b(?!\s*\()")  # an attribute read, not a method called
UNSET_FLOAT = 1.0  # a bound or scale a default config leaves to the checkpoint
UNSET_SCORE = 0.5  # a per-class threshold: half the classes' scores pass

# the fields set so far in this process (one model per sandboxed process): (config class
# name, field) -> value, applied to every later build of the model, fake or real-data
SET_AFTER_TRACE: dict[tuple[str, str], Any] = {}


def unset_on_line(cfgs: list[Any], why: str) -> dict[tuple[str, str], Any]:
    """Values for the fields a trace stopped on (``why``: "tracing failed at FILE:LINE: ...
    None ..."): each attribute the failing line of transformers' own code reads that a config
    holds as None, by its declared type: a float (a clamp bound) 1.0, a per-class list one
    entry per class label. Keyed by (config class name, field)."""
    import linecache

    import transformers

    m = _FAILED_AT.search(why)
    if m is None or "none" not in m.group(3).lower():
        return {}
    path = Path(transformers.__file__).parent.parent / m.group(1)
    line = linecache.getline(str(path), int(m.group(2)))
    found: dict[tuple[str, str], Any] = {}
    for name in _READ.findall(line):
        for c in cfgs:
            if name not in vars(c) or vars(c)[name] is not None:
                continue
            value = _unset_value(c, name)
            if value is not None:
                found[(type(c).__name__, name)] = value
    return found


def _unset_value(c: Any, name: str) -> Any:
    """By the field's declared type; a list only where its name says it has one entry per
    class (``class_*``), of a float (a score) or an int (each class mapped to itself)."""
    field = (getattr(type(c), "__dataclass_fields__", None) or {}).get(name)
    kind = str(getattr(field, "type", "")).replace(" ", "")
    labels = getattr(c, "num_labels", None)
    if kind.startswith("list[") and name.startswith("class_"):
        if not isinstance(labels, int) or labels <= 0:
            return None
        if kind.startswith("list[float]"):
            return [UNSET_SCORE] * labels
        if kind.startswith("list[int]"):
            return list(range(labels))
        return None
    if "float" in kind.split("|"):
        return UNSET_FLOAT
    return None


def remember(cfgs: list[Any], why: str) -> bool:
    """Whether ``why`` names unset fields not set before; they are set in later builds."""
    found = {k: v for k, v in unset_on_line(cfgs, why).items() if k not in SET_AFTER_TRACE}
    SET_AFTER_TRACE.update(found)
    return bool(found)


def apply(cfgs: Iterable[Any]) -> None:
    """The fields remembered set on a fresh default config, where it still leaves them None."""
    for c in cfgs:
        for (owner, key), value in SET_AFTER_TRACE.items():
            if type(c).__name__ == owner and vars(c).get(key, 0) is None:
                setattr(c, key, value)
