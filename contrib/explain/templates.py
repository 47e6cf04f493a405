"""The template matcher: a log line → the message template of the index (``message_template``)
that prints it, with the [FUNC:…][FILE:…][LINE:…] hints CANN's plog adds. Pure: it is handed
the templates; the catalog read is :func:`opcheck.contrib.explain.facts.message_index`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LOG_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_HINTS = re.compile(r"\[FUNC:(?P<func>\w{1,120})\]|\[FILE:(?P<file>[\w.-]{1,120})\]"
                    r"|\[LINE:(?P<line>\d{1,7})\]")
_DIGITS = re.compile(r"\d+")
MAX_SHAPES = 4096  # line shapes remembered (bounded memory)
MAX_ALSO = 8  # other matching templates kept per line
MIN_LITERAL = 12  # literal characters a template needs before a match names its line of code


@dataclass
class MessageMatch:
    """A log line matched to a template of the message index."""

    template: str
    literal: int
    # the other templates the line matches, most specific first: a shorter template may be
    # the one the failing function's own file prints (a check macro's text inside a
    # helper's longer message)
    also: tuple[str, ...] = ()
    func: str = ""  # [FUNC:…] / [FILE:…] / [LINE:…] the log line itself carries (CANN plog)
    file: str = ""
    line: int = 0


class MessageIndex:
    """The templates of the message index (``message_template``), keyed on each one's anchor
    word (its rarest literal word): a line is searched only with the templates whose anchor
    it contains, each compiled on first use. Memory: the templates' text and the compiled
    patterns of those a log actually reached."""

    def __init__(self, templates: list[tuple[str, str, int]]) -> None:
        from opcheck.scrapers.messages import longest_literal, template_pattern

        self._pattern = template_pattern
        self._by_word: dict[str, list[int]] = {}
        self._templates: list[tuple[str, int]] = []
        self._needles: list[str] = []  # each template's longest literal: a substring test first
        for template, anchor, literal in templates:
            if literal < MIN_LITERAL:
                continue
            self._by_word.setdefault(anchor, []).append(len(self._templates))
            self._templates.append((template, literal))
            # a run of spaces in the template matches any whitespace: test its longest word
            self._needles.append(max(longest_literal(template).split(), key=len, default=""))
        self._compiled: dict[int, re.Pattern[str]] = {}
        self._words = frozenset(self._by_word)
        # line shape → its best template, its literal length, the other templates it matches
        self._seen: dict[str, tuple[str, int, tuple[str, ...]] | None] = {}

    def __len__(self) -> int:
        return len(self._templates)

    def match(self, line: str, context: str = "") -> MessageMatch | None:
        """The most specific template (most literal characters) that ``line`` matches;
        ``context``: the whole log line, when ``line`` is the message part of it (its
        [FUNC:…][FILE:…][LINE:…] hints are read there)."""
        words = self._words.intersection(_LOG_WORD.findall(line))  # in C: most lines have none
        if not words:
            return None
        # a log repeats its lines with other numbers: the same line shape matches the same way
        shape = _DIGITS.sub("0", line) if len(line) < 2000 else ""
        if shape and shape in self._seen:
            got = self._seen[shape]
            return None if got is None else self._hints(MessageMatch(*got), context or line)
        by_word = self._by_word
        needles = self._needles
        hits: list[tuple[int, str]] = []
        for i in dict.fromkeys(i for w in words for i in by_word[w]):
            template, literal = self._templates[i]
            if needles[i] not in line:
                continue
            rx = self._compiled.get(i)
            if rx is None:
                try:
                    rx = self._compiled[i] = re.compile(self._pattern(template))
                except re.error:  # pragma: no cover - the scraper escapes every literal
                    continue
            if rx.search(line):
                hits.append((-literal, template))
        hits.sort()
        best = (hits[0][1], -hits[0][0], tuple(t for _, t in hits[1:MAX_ALSO + 1])) if hits else None
        if shape:
            if len(self._seen) >= MAX_SHAPES:
                self._seen.clear()
            self._seen[shape] = best
        if best is None:
            return None
        return self._hints(MessageMatch(*best), context or line)

    @staticmethod
    def _hints(m: MessageMatch, context: str) -> MessageMatch:
        if "[FUNC:" in context or "[FILE:" in context:
            for h in _HINTS.finditer(context):
                m.func = h["func"] or m.func
                m.file = h["file"] or m.file
                m.line = int(h["line"]) if h["line"] else m.line
        return m
