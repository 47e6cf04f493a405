"""The parse cache's on-disk form: JSON that can only rebuild opcheck's own data classes.

A pickle runs whatever code its bytes name, so a file swapped into the cache directory would run
at the next sync. This codec writes plain JSON with tagged containers and reads back only
dataclasses and enums defined in opcheck's parser packages; anything else is refused as a miss.

Encoding (every non-JSON value is a one-key object, so plain data needs no escaping):
``{"t": [...]}`` tuple, ``{"s": [...]}`` set, ``{"f": [...]}`` frozenset,
``{"d": [[k, v], ...]}`` dict (keys of any encodable type), ``{"c": [class, [field values]]}``
dataclass (fields in declaration order), ``{"e": [class, value]}`` enum member.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
from functools import cache
from typing import Any

__all__ = ["CodecError", "decode", "encode"]

# Modules whose classes the cache may rebuild: the parsers' rows and the facts they carry.
_ALLOWED_PREFIXES = ("opcheck.scrapers.", "opcheck.core.", "opcheck.db.data", "opcheck.sync.")


class CodecError(ValueError):
    """An entry this codec did not write, or one naming a class it may not rebuild."""


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


@cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _enc(value: Any) -> Any:
    if value is None or (isinstance(value, (str, bool, int, float)) and not isinstance(
        value, enum.Enum
    )):
        return value
    if isinstance(value, list):
        return [_enc(v) for v in value]
    if isinstance(value, enum.Enum):
        return {"e": [_name(type(value)), _enc(value.value)]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return {"c": [_name(cls), [_enc(getattr(value, n)) for n in _fields(cls)]]}
    if isinstance(value, tuple):
        return {"t": [_enc(v) for v in value]}
    if isinstance(value, frozenset):
        return {"f": [_enc(v) for v in value]}
    if isinstance(value, set):
        return {"s": [_enc(v) for v in value]}
    if isinstance(value, dict):
        return {"d": [[_enc(k), _enc(v)] for k, v in value.items()]}
    raise CodecError(f"cannot cache a {type(value).__name__}")


@cache
def _class(name: str) -> type:
    module, _, qualname = name.partition(":")
    if not module.startswith(_ALLOWED_PREFIXES) or not qualname or "<" in qualname:
        raise CodecError(f"class {name!r} may not be rebuilt from the cache")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type) or not (
        dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum)
    ):
        raise CodecError(f"{name!r} is not a dataclass or an enum")
    return obj


def _hook(obj: dict[str, Any]) -> Any:
    # json calls this innermost first, so a tagged body's members are already decoded and lists
    # of plain values are never walked in Python (the warm sync reads ~100 MB of entries).
    if len(obj) != 1:
        if "key" in obj:  # the envelope
            return obj
        raise CodecError("malformed entry")
    ((tag, body),) = obj.items()
    if tag == "c":
        cls = _class(body[0])
        values = body[1]
        if not dataclasses.is_dataclass(cls) or len(values) != len(_fields(cls)):
            raise CodecError(f"{body[0]}: fields changed")
        return cls(*values)
    if tag == "t":
        return tuple(body)
    if tag == "d":
        return dict(body)
    if tag == "e":
        cls = _class(body[0])
        if not issubclass(cls, enum.Enum):
            raise CodecError(f"{body[0]} is not an enum")
        return cls(body[1])
    if tag == "s":
        return set(body)
    if tag == "f":
        return frozenset(body)
    raise CodecError(f"unknown tag {tag!r}")


def encode(key: str, value: Any) -> bytes:
    """The entry for ``value`` under ``key`` (the key is stored to be checked on reading)."""
    return json.dumps({"key": key, "value": _enc(value)}, separators=(",", ":")).encode()


def decode(key: str, data: bytes) -> Any:
    """The value of an entry, or :class:`CodecError` when it is not a whole entry for ``key``."""
    if not data.startswith(b'{"key":' + json.dumps(key).encode() + b',"value":'):
        raise CodecError("entry written for another key")  # checked before any class is built
    try:
        doc = json.loads(data, object_hook=_hook)
    except CodecError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ImportError,
            RecursionError) as exc:
        raise CodecError(f"malformed entry: {exc}") from None
    if not isinstance(doc, dict) or doc.get("key") != key or "value" not in doc:
        raise CodecError("entry written for another key")
    return doc["value"]
