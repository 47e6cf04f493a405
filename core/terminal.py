"""Text made safe for a terminal: what opcheck echoes from its input (log lines, file names,
op names, workaround text, a script's output) can carry escape sequences that retitle the
terminal (OSC 0), write to the clipboard (OSC 52), answer device queries into the shell's input
(CSI 6n, DCS) or overwrite earlier lines (CR, cursor moves). Every C0 and C1 control character
except tab and newline, and every ESC sequence whole, becomes one visible placeholder.

The CLI applies :func:`sanitise` at its output boundary (``opcheck.cli.safeout``), so no
command has to remember it; markdown, HTML and JSON outputs keep their own escaping.
"""

from __future__ import annotations

import re

PLACEHOLDER = "\N{REPLACEMENT CHARACTER}"

# Control strings (OSC, DCS, SOS, PM, APC), 7- or 8-bit, up to their terminator (BEL or ST)
# or the end of the line: an unterminated one would swallow the terminal's later output.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
_OTHER_ESC = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"  # ESC c (reset), ESC ( 0, ESC 7, ...
# A carriage return that does not end a line (CRLF) lets a later text overwrite an earlier one.
_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)"
_UNSAFE = re.compile("|".join((_STRING, _CSI, _OTHER_ESC, _CONTROL)))
_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitise(text: str, placeholder: str = PLACEHOLDER) -> str:
    """``text`` with every control character and escape sequence replaced by ``placeholder``
    (tab, newline and CRLF are kept). No ESC byte survives, however the text is split."""
    if _ANY.search(text) is None:  # the common case: nothing to do
        return text
    return _UNSAFE.sub(placeholder, text)


def is_safe(text: str) -> bool:
    """Whether ``text`` holds no character :func:`sanitise` would replace."""
    return _UNSAFE.search(text) is None
