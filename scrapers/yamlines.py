"""YAML with line numbers, for parsers whose errors must name ``file:line``.

Every upstream YAML parser (op-plugin's registry, torch_npu's own registry and the wheel's
generated copy, PyTorch's ``native_functions.yaml``) loads through :func:`load`: mappings come
back as :class:`LineDict` and sequences as :class:`LineList`, which remember the line of the
node, of each key and of each item.  Parsers report problems with :class:`YamlCtx` so every
message has the same one-line ``path:line: what`` shape.

Duplicate keys: PyYAML keeps the last value of a key repeated in one mapping, and so does
this loader (the key line of the last occurrence is kept too).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin

try:  # libyaml's parser is ~15x faster than the pure-Python one; fall back when absent
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

__all__ = [
    "LineDict",
    "LineList",
    "YamlCtx",
    "check_keys",
    "expect_list",
    "expect_mapping",
    "items",
    "line_of",
    "load",
]


class LineDict(dict[Any, Any]):
    """A mapping from the YAML with the 1-based line of the mapping and of each key."""

    line: int
    key_lines: dict[Any, int]


class LineList(list[Any]):
    """A sequence from the YAML with the 1-based line of the sequence and of each item."""

    line: int
    item_lines: list[int]


class _LineLoader(_BaseLoader):
    """SafeLoader whose mappings and sequences remember where they were."""

    def construct_yaml_map(self, node: yaml.MappingNode) -> Iterator[LineDict]:  # type: ignore[override]
        data = LineDict()
        data.line = node.start_mark.line + 1
        data.key_lines = {}
        yield data
        self.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, "unhashable key", key_node.start_mark
                )
            data[key] = self.construct_object(value_node, deep=True)
            data.key_lines[key] = key_node.start_mark.line + 1

    def construct_yaml_seq(self, node: yaml.SequenceNode) -> Iterator[LineList]:  # type: ignore[override]
        data = LineList()
        data.line = node.start_mark.line + 1
        data.item_lines = [n.start_mark.line + 1 for n in node.value]
        yield data
        data.extend(self.construct_sequence(node, deep=True))


_LineLoader.add_constructor("tag:yaml.org,2002:map", _LineLoader.construct_yaml_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _LineLoader.construct_yaml_seq)


def load(text: str, origin: Origin) -> Any:
    """Load YAML keeping line numbers (``LineDict``/``LineList``); errors → ScrapeError."""
    try:
        loader = _LineLoader(text)
        try:
            node = loader.get_single_node()
            return None if node is None else _build(loader, node, {})
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ScrapeError(
            f"malformed YAML: {e.problem or e.context or e}", source=origin.path, line=line
        ) from e
    except yaml.YAMLError as e:
        # e.g. ReaderError (a control character): its text spans two lines
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ScrapeError(f"malformed YAML: {first}", source=origin.path) from e


_STR, _MAP, _SEQ = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:map",
                    "tag:yaml.org,2002:seq")


def _build(loader: _LineLoader, node: yaml.Node, built: dict[int, Any]) -> Any:
    """What ``yaml.load(text, Loader=_LineLoader)`` makes of ``node``, without PyYAML's
    generic constructor machinery for the three kinds a registry is made of (mappings,
    sequences, strings: almost every node; PyYAML's per-node bookkeeping was most of the
    time of loading op-plugin's registries).  Other scalars go through the loader."""
    if node.tag == _STR and isinstance(node, yaml.ScalarNode):
        return node.value
    done = built.get(id(node))
    if done is not None:  # an alias: the anchored object itself, as PyYAML gives it
        return done
    if node.tag == _MAP and isinstance(node, yaml.MappingNode):
        data = LineDict()
        data.line = node.start_mark.line + 1
        data.key_lines = {}
        built[id(node)] = data
        loader.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = _build(loader, key_node, built)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, "unhashable key", key_node.start_mark
                )
            data[key] = _build(loader, value_node, built)
            data.key_lines[key] = key_node.start_mark.line + 1
        return data
    if node.tag == _SEQ and isinstance(node, yaml.SequenceNode):
        seq = LineList()
        seq.line = node.start_mark.line + 1
        seq.item_lines = [n.start_mark.line + 1 for n in node.value]
        built[id(node)] = seq
        seq.extend(_build(loader, n, built) for n in node.value)
        return seq
    value = loader.construct_object(node, deep=True)
    built[id(node)] = value
    return value


def line_of(obj: Any, key: Any = None, default: int = 0) -> int:
    """The line of a loaded node, of one of its keys (LineDict) or items (LineList)."""
    if isinstance(obj, LineDict):
        return obj.key_lines.get(key, obj.line) if key is not None else obj.line
    if isinstance(obj, LineList):
        if isinstance(key, int) and 0 <= key < len(obj.item_lines):
            return obj.item_lines[key]
        return obj.line
    return default


def items(seq: Any) -> Iterator[tuple[int, Any]]:
    """(line, item) of a YAML list; an empty section (``symint:`` with nothing) is [].

    Anything but a list yields nothing: callers that need a list check with expect_list."""
    if not isinstance(seq, list):
        return
    for i, item in enumerate(seq):
        yield line_of(seq, i), item


class YamlCtx:
    """Error helper bound to one parsed file."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin

    def error(self, message: str, line: int | None) -> ScrapeError:
        return ScrapeError(message, source=self.origin.path, line=line or None)


def expect_mapping(ctx: YamlCtx, data: Any, what: str) -> LineDict:
    if not isinstance(data, LineDict):
        line = line_of(data, default=1)
        raise ctx.error(f"{what}: expected a mapping at top level, got {type(data).__name__}", line)
    return data


def expect_list(ctx: YamlCtx, value: Any, line: int, what: str) -> Any:
    if value is not None and not isinstance(value, list):
        raise ctx.error(f"{what}: expected a list, got {type(value).__name__}", line)
    return value


def check_keys(ctx: YamlCtx, entry: LineDict, allowed: frozenset[str], section: str) -> None:
    """An entry with a key outside ``allowed`` is an error naming the key's line."""
    for key in entry:
        if key not in allowed:
            raise ctx.error(
                f"unknown key {key!r} in section {section!r}", line_of(entry, key, entry.line)
            )
