"""Reading JSON that users hand over (op lists, reports, baselines): numbers within bounds.

The standard parser turns a 5,000-digit integer into a ``ValueError`` of its own (and spends
quadratic time on the digits first). Every integer is checked as it is parsed, so a document is
either sane data or one :class:`JsonInputError` naming what was wrong.
"""

from __future__ import annotations

import json
from json.scanner import py_make_scanner  # type: ignore[attr-defined]
from typing import Any

__all__ = ["MAX_INT_DIGITS", "JsonInputError", "loads"]

# Wider than any int64 (19 digits): counts, shapes and argument values all fit.
MAX_INT_DIGITS = 20


class JsonInputError(ValueError):
    """The text is not JSON, or holds a number or nesting opcheck does not accept."""


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise JsonInputError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def loads(text: str | bytes, *, yielding: bool = False) -> Any:
    """``json.loads`` with bounded numbers. ``yielding``: build objects and arrays in Python
    (slower, but a server's event loop gets turns between them; see web/pages/check.py)."""
    # Floats stay as Python reads them: op lists carry -Infinity and NaN as argument values
    # (masked_fill(-inf)), and where a count or shape must be an integer the reader says so.
    decoder = json.JSONDecoder(parse_int=_int)
    if yielding:
        decoder.scan_once = py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return decoder.decode(text)
    except JsonInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise JsonInputError("JSON nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:  # what the standard library adds (int conversion limits)
        raise JsonInputError(str(exc)) from None
