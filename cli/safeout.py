"""The CLI's output boundary: stdout and stderr pass through :func:`core.terminal.sanitise`.

Installed once when ``opcheck`` starts (and by the root callback, so a command invoked through
a test runner goes through it too): whatever a command prints, with ``typer.echo``, ``print``,
a logging handler or a rich console, reaches the terminal without control characters from its
input, and no command needs to know. rich consoles are the one writer that emits escape
sequences of its own (colours, the progress bar's cursor moves): they write to the stream
underneath (rich unwraps ``rich_proxied_file``), and their text segments are sanitised before
rich styles them, so rich's own codes survive and the text's do not.
"""

from __future__ import annotations

import io
import sys
from typing import Any, TextIO

from opcheck.core.terminal import PLACEHOLDER, sanitise

__all__ = ["SafeStream", "install"]

OWN_PREFIXES = ("\r\x1b[K", "\r")


class SafeStream(io.TextIOBase):
    """A text stream that writes ``sanitise(text)`` to ``raw``; everything else is raw's."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        try:
            PLACEHOLDER.encode(getattr(raw, "encoding", None) or "utf-8")
            self.placeholder = PLACEHOLDER
        except (UnicodeEncodeError, LookupError):  # an ASCII terminal
            self.placeholder = "?"

    def write(self, text: str) -> int:
        # A write that starts with a carriage return (and an erase-line) is the CLI's own
        # progress line rewriting itself (``explain`` on a terminal): that prefix is kept.
        own = next((p for p in OWN_PREFIXES
                    if text.startswith(p) and (len(text) > 1 or p != "\r")), "")
        self.raw.write(own + sanitise(text[len(own):], self.placeholder))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.raw, "encoding", None) or "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.raw, "errors", None)

    @property
    def closed(self) -> bool:
        return bool(self.raw.closed)

    @property
    def rich_proxied_file(self) -> TextIO:
        # rich asks for this before every write: its segments are sanitised from then on
        _sanitise_rich_text()
        return self.raw


def install() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (idempotent)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream))


def _sanitise_rich_text() -> None:
    from rich.console import Console
    from rich.segment import Segment

    render = Console._render_buffer
    if getattr(render, "opcheck_safe", False):
        return

    def safe_render(self: Console, buffer: Any) -> str:
        # control segments are rich's own cursor and screen codes; the rest is text
        return str(render(self, (seg if seg.control else
                                 Segment(sanitise(seg.text), seg.style, seg.control)
                                 for seg in buffer)))

    safe_render.opcheck_safe = True  # type: ignore[attr-defined]
    Console._render_buffer = safe_render  # type: ignore[method-assign]
