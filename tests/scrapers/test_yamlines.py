"""YAML with line numbers: what every line-reporting YAML parser loads through."""

from __future__ import annotations

import pytest
import yaml

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import yamlines
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.yamlines import (
    LineDict,
    LineList,
    YamlCtx,
    check_keys,
    expect_list,
    expect_mapping,
    items,
    line_of,
    load,
)

X = Origin("x.yaml")


def test_lines_of_mappings_keys_and_items() -> None:
    data = load("# c\na: 1\nb:\n  - x\n\n  - {k: v}\nb: [y]\n", X)
    assert isinstance(data, LineDict) and data.line == 2
    assert line_of(data, "a") == 2
    assert data["b"] == ["y"] and line_of(data, "b") == 7  # a repeated key: the last one wins
    seq = load("- a\n-\n  k: 1\n- b\n", X)
    assert isinstance(seq, LineList) and seq.item_lines == [1, 3, 4]
    assert list(items(seq)) == [(1, "a"), (3, {"k": 1}), (4, "b")]
    assert line_of(seq, 9) == 1 and line_of("scalar", default=5) == 5
    assert list(items(None)) == [] and list(items("not a list")) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2\n", r"^x\.yaml:2: malformed YAML: "),
        ("a: 1\n  b: 2\n", r"^x\.yaml:2: malformed YAML: "),
        ("? [a, b]\n: 1\n", r"^x\.yaml:1: malformed YAML: unhashable key$"),
        ("a: \x07\n", r"^x\.yaml: malformed YAML: "),
    ],
)
def test_errors_name_file_and_line_on_one_line(text: str, message: str) -> None:
    with pytest.raises(ScrapeError, match=message) as e:
        load(text, X)
    assert "\n" not in str(e.value)


def test_shape_helpers() -> None:
    ctx = YamlCtx(X)
    with pytest.raises(ScrapeError, match=r"^x\.yaml:1: top: expected a mapping at top level, got LineList$"):
        expect_mapping(ctx, load("- a\n", X), "top")
    data = expect_mapping(ctx, load("s: 1\nt:\n  - func: a\n    bad: 1\n", X), "top")
    with pytest.raises(ScrapeError, match=r"^x\.yaml:1: s: expected a list, got int$"):
        expect_list(ctx, data["s"], line_of(data, "s"), "s")
    assert expect_list(ctx, None, 1, "s") is None
    (_, entry), = items(data["t"])
    with pytest.raises(ScrapeError, match=r"^x\.yaml:4: unknown key 'bad' in section 't'$"):
        check_keys(ctx, entry, frozenset({"func"}), "t")


def _shape(obj: object) -> object:
    """The loaded value with every line number it carries, for exact comparison."""
    if isinstance(obj, yamlines.LineDict):
        return ("map", obj.line, dict(obj.key_lines), {k: _shape(v) for k, v in obj.items()})
    if isinstance(obj, yamlines.LineList):
        return ("seq", obj.line, list(obj.item_lines), [_shape(v) for v in obj])
    return (type(obj).__name__, obj)


@pytest.mark.parametrize("text", [
    "a: 1\nb: [x, 2, true, null, 1.5]\nc:\n  - {k: v}\n  - - nested\n",
    "base: &b {x: 1, y: two}\nuse:\n  <<: *b\n  y: 3\nsame: *b\n",
    "when: 2024-01-02\nbin: !!binary aGk=\nempty:\nq: 'quoted'\nn: ~\n",
    "- &s shared\n- *s\n- 0x1F\n- 1_000\n",
    "dup: 1\ndup: 2\n",
    "",
])
def test_load_gives_what_pyyaml_gives_with_the_line_loader(text: str) -> None:
    expected = yaml.load(text, Loader=yamlines._LineLoader)
    got = yamlines.load(text, Origin("t.yaml"))
    assert _shape(got) == _shape(expected)


def test_an_alias_is_the_anchored_object_itself() -> None:
    got = yamlines.load("a: &x {k: [1]}\nb: *x\n", Origin("t.yaml"))
    assert got["a"] is got["b"]
