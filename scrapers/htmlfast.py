"""A fast path for :class:`html.parser.HTMLParser` subclasses fed plain table markup.

The aclnn pages hold thousands of HTML tables; ``HTMLParser``'s general tokeniser (comments,
declarations, CDATA elements, tolerant recovery from broken tags) is most of what parsing
them costs.  :func:`feed` tokenises a text with one regular expression instead and calls the
parser's own ``handle_starttag`` / ``handle_endtag`` / ``handle_data`` with exactly the events
``HTMLParser`` would produce: it only does so when every ``<`` in the text opens a well-formed
start or end tag (no comments, declarations, ``<script>``/``<style>``, stray ``<``), and hands
anything else to ``HTMLParser`` itself, so both paths yield the same rows.
"""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

__all__ = ["feed"]

# A start tag with plain attributes (``<td rowspan="2">``, ``<br/>``) or a bare end tag.
_WS = "[ \\t\\n\\r\\f]"  # ASCII only: HTMLParser reads other whitespace into names
_TAG = re.compile(
    rf"""<(/?)([a-zA-Z][^\t\n\r\f />\x00<]*)"""  # HTMLParser's start-tag name
    rf"""((?:{_WS}+[a-zA-Z_][-a-zA-Z0-9_:.]*(?:{_WS}*={_WS}*(?:"[^"<>]*"|'[^'<>]*'|[^\s"'=<>`/]+))?)*)"""
    rf"""({_WS}*)(/?)>"""
)
_END_NAME = re.compile(r"[a-zA-Z][-.a-zA-Z0-9:_]*")  # HTMLParser's end-tag name
_ATTR = re.compile(
    rf"""([a-zA-Z_][-a-zA-Z0-9_:.]*)(?:{_WS}*={_WS}*("[^"<>]*"|'[^'<>]*'|[^\s"'=<>`/]+))?"""
)
_OPENERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/!?") | {""}
_STEP = 6  # what one tag adds to _TAG.split's list: its 5 groups and the text after it
# Elements whose content HTMLParser reads as raw text: left to HTMLParser.
_CDATA = ("script", "style")


def _attrs(text: str) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    for a in _ATTR.finditer(text):
        value = a.group(2)
        if value is not None:
            if value[:1] in ("'", '"'):
                value = value[1:-1]
            if value:
                value = unescape(value)
        pairs.append((a.group(1).lower(), value))
    return pairs


def _literal(text: str) -> bool:
    """Whether every "<" of a text between tags is one HTMLParser reads as data: one that
    cannot open anything (``a < b``, ``<=``) because no ASCII letter, ``/``, ``!`` or ``?``
    follows it."""
    return all(part[:1] not in _OPENERS for part in text.split("<")[1:])


def feed(parser: HTMLParser, text: str) -> None:
    """``parser.feed(text); parser.close()``, by the fast path when the text allows it.

    On the fast path ``parser.getpos()`` gives the line of the start tag being handled, as
    ``HTMLParser`` does (the column is not tracked)."""
    # [text, "/" or "", name, attributes, spaces, "/" or "", text, ...]: the split runs in C
    parts = _TAG.split(text)
    if any("<" in t and not _literal(t) for t in parts[::_STEP]):
        parser.feed(text)  # a "<" that opens no plain tag: HTMLParser's rules decide
        parser.close()
        return
    for k in range(1, len(parts), _STEP):
        closing, attrs, spaces, slash = parts[k], parts[k + 2], parts[k + 3], parts[k + 4]
        if closing:
            if attrs or slash or not _END_NAME.fullmatch(parts[k + 1]):
                break
        elif parts[k + 1].lower() in _CDATA or (
                slash and attrs and not spaces and attrs[-1] not in "\"'"):
            break  # raw-text content; ``a=1/>`` (HTMLParser reads the slash into the value)
    else:
        _dispatch(parser, parts)
        return
    parser.feed(text)
    parser.close()


def _dispatch(parser: HTMLParser, parts: list[str]) -> None:
    line = 1
    handle_data, handle_start, handle_end = (
        parser.handle_data, parser.handle_starttag, parser.handle_endtag)
    data = parts[0]
    if data:
        handle_data(unescape(data))
        line += data.count("\n")
    for k in range(1, len(parts), _STEP):
        closing, tag, attrs, spaces, slash, data = parts[k:k + _STEP]
        tag = tag.lower()
        if closing:
            handle_end(tag)
        else:
            parser.lineno = line
            pairs = _attrs(attrs) if attrs else []
            if slash:
                parser.handle_startendtag(tag, pairs)
            else:
                handle_start(tag, pairs)
            if attrs:
                line += attrs.count("\n")
        if spaces:
            line += spaces.count("\n")
        if data:
            handle_data(unescape(data))
            line += data.count("\n")
