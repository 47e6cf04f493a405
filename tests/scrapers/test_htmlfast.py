"""htmlfast.feed: the events HTMLParser would give, by the fast path where it can."""

from __future__ import annotations

import random
from html.parser import HTMLParser
from pathlib import Path

import pytest

from opcheck.scrapers import aclnn_codes, aclnn_docs, htmlfast
from opcheck.scrapers.rows import Origin


class Recorder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[tuple[object, ...]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.events.append(("start", tag, tuple(attrs), self.getpos()[0]))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag))

    def handle_data(self, data: str) -> None:
        # HTMLParser hands a stray "<" over as a chunk of its own: compare joined text
        if self.events and self.events[-1][0] == "data":
            self.events[-1] = ("data", str(self.events[-1][1]) + data)
        else:
            self.events.append(("data", data))


def slow(text: str) -> list[tuple[object, ...]]:
    p = Recorder()
    p.feed(text)
    p.close()
    return p.events


def fast(text: str) -> list[tuple[object, ...]]:
    p = Recorder()
    htmlfast.feed(p, text)
    return p.events


def took_fast_path(text: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    calls: list[str] = []
    monkeypatch.setattr(Recorder, "feed", lambda self, data: calls.append(data), raising=False)
    p = Recorder()
    htmlfast.feed(p, text)
    monkeypatch.undo()
    return not calls


PLAIN = [
    "<table>\n<tr><th>a</th><th colspan=\"2\">b</th></tr>\n<tr><td rowspan='2'>x<br/>y</td>"
    "<td>p &amp; q &lt;r&gt;</td></tr>\n</table>",
    "<TABLE><TR><TD ROWSPAN=3 class=x>1</TD></TR></TABLE>",
    "<table><tr><td\n  rowspan=\"2\"\n>multi-line tag</td ></tr></table>",
    "<table><tr><td>a < b, c <= d, <- e</td></tr></table>",
    "std::vector<int64_t>& shape; <aclTensor*> <table><tr><td>1</td></tr></table>",
    "#include <math.h>\n<table><tr><td>x</td><td nowrap>y</td></tr></table>",
    "<table><tr><td><term>Atlas A2</term>：支持</td></tr></table>",
]
UNUSUAL = [
    "<table><!-- <tr><td>hidden</td></tr> --><tr><td>x</td></tr></table>",
    "<table><tr><td>a</td></tr><script>if (a<b) {}</script></table>",
    "<table><tr><td rowspan=2/>x</td></tr></table>",
    "<table><tr><td>x</ td></tr></table>",
    "<table><tr><td>x</td></tr></table><",
    "<table><tr><td\u00a0rowspan=2>x</td></tr></table>",
    "<table><tr><td a=\"1\"b=\"2\">x</td></tr></table>",
    "<?xml version='1.0'?><!DOCTYPE html><table><tr><td>x</td></tr></table>",
    "<table><tr><td rowspan==2>x</td></tr></table>",
    "<std::vector<int>> <table><tr><td>x</td></tr></table>",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_markup_takes_the_fast_path_with_the_same_events(
        text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert took_fast_path(text, monkeypatch)
    assert fast(text) == slow(text)


@pytest.mark.parametrize("text", UNUSUAL)
def test_anything_else_gives_the_same_events_as_htmlparser(text: str) -> None:
    assert fast(text) == slow(text)


def test_random_markup_gives_the_same_events() -> None:
    pieces = ["<table>", "</table>", "<tr>", "</tr>", "<td>", "</td>", "<th rowspan=2>",
              "<td colspan=\"3\">", "<br>", "<br/>", "<p>", "</p>", "x", " y ", "\n", "&amp;",
              "&lt;", "&", "<", "< ", "<=", "<int64_t>", "</ td>", "<!-- c -->", "'", "\"",
              "=", "<term>", "</term>", "<a href='u'>", ">", "<td rowspan=2/>", "中文"]
    rng = random.Random(20)
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        assert fast(text) == slow(text), text


def _pages(fixtures: Path) -> list[Path]:
    return sorted((fixtures / "aclnn").rglob("*.md"))


def test_fixture_pages_parse_as_with_htmlparser(fixtures: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pages = _pages(fixtures)
    assert pages
    texts = [p.read_text(encoding="utf-8") for p in pages]
    got = [(aclnn_docs.html_tables(t), _code_tables(t)) for t in texts]
    monkeypatch.setattr(htmlfast, "feed", lambda parser, text: (parser.feed(text),
                                                                parser.close()))
    assert got == [(aclnn_docs.html_tables(t), _code_tables(t)) for t in texts]


def _code_tables(text: str) -> str:
    parser = aclnn_codes._Tables()
    htmlfast.feed(parser, text)
    return repr(parser.tables)


def test_real_pages_parse_as_with_htmlparser(upstream: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pages = sorted((upstream / "github" / "hicann").rglob("aclnn*.md"))
    sample = random.Random(7).sample(pages, min(150, len(pages)))
    texts = [(p, p.read_text(encoding="utf-8-sig")) for p in sample]
    got = [(aclnn_docs.html_tables(t), aclnn_codes.parse_return_codes(
        t, origin=Origin(str(p)))) for p, t in texts]
    monkeypatch.setattr(htmlfast, "feed", lambda parser, text: (parser.feed(text),
                                                                parser.close()))
    assert got == [(aclnn_docs.html_tables(t), aclnn_codes.parse_return_codes(
        t, origin=Origin(str(p)))) for p, t in texts]


def test_page_or_skip_is_skip_reason_then_parse_page(fixtures: Path) -> None:
    for page in _pages(fixtures):
        text = page.read_text(encoding="utf-8")
        origin = Origin(f"x/{page.name}")
        reason = aclnn_docs.skip_reason(origin.path, text)
        expected = (reason, None if reason else aclnn_docs.parse_page(text, origin=origin))
        assert aclnn_docs.page_or_skip(text, origin=origin) == expected
