"""Issue 39: nothing opcheck echoes from its input reaches a terminal with control characters.

The sequences are those terminal-injection advisories use: window-title set and report (xterm
CVE-2003-0063), clipboard writes (OSC 52), hyperlinks (OSC 8), iTerm2's OSC 1337
(CVE-2019-9535), DECRQSS answers typed into the shell (DCS $q), device-status reports (CSI 6n),
screen clears and resets, 8-bit C1 forms, and carriage returns and backspaces that overwrite
what was printed."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opcheck.cli.app import app
from opcheck.cli.safeout import SafeStream
from opcheck.core.terminal import PLACEHOLDER, is_safe, sanitise

ATTACKS = {
    "osc title": "\x1b]0;owned\x07",
    "osc title, ST": "\x1b]2;owned\x1b\\",
    "osc clipboard": "\x1b]52;c;cm0gLXJmIH4K\x07",
    "osc hyperlink": "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "iterm2 osc 1337": "\x1b]1337;RequestUpload=format=tgz\x07",
    "title report": "\x1b[21t",
    "dcs decrqss": "\x1bP$q\"p\x1b\\",
    "device status": "\x1b[6n",
    "clear screen": "\x1b[2J\x1b[H",
    "alternate screen": "\x1b[?1049h",
    "reset": "\x1bc",
    "charset": "\x1b(0",
    "8-bit csi": "\x9b6n",
    "8-bit osc": "\x9d0;owned\x9c",
    "apc": "\x1b_payload\x1b\\",
    "pm": "\x1b^payload\x1b\\",
    "backspaces": "safe\x08\x08\x08\x08evil",
    "carriage return": "good\rEVIL",
    "bell and nul": "\x07\x00",
    "c1 next line": "\x85",
    "delete": "\x7f",
    "unterminated osc": "\x1b]0;owned",
}
CONTROLS = {chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))} - {"\t", "\n"}


def no_controls(text: str) -> bool:
    return not CONTROLS & set(text)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_every_advisory_sequence_becomes_a_placeholder(name: str) -> None:
    text = f"before {ATTACKS[name]} after\n"
    out = sanitise(text)
    assert no_controls(out), repr(out)
    assert out.startswith("before ") and PLACEHOLDER in out
    assert is_safe(out) and not is_safe(text)
    if name not in ("unterminated osc",):
        assert out.endswith(" after\n"), repr(out)  # the text around it survives


def test_a_whole_escape_sequence_is_one_placeholder() -> None:
    assert sanitise("a\x1b]0;owned\x07b") == f"a{PLACEHOLDER}b"
    assert sanitise("a\x1b[1;31mb") == f"a{PLACEHOLDER}b"
    assert sanitise("a\x1bP$q\"p\x1b\\b") == f"a{PLACEHOLDER}b"
    # an unterminated string ends with its line, not with the rest of the output
    assert sanitise("a\x1b]0;owned\nnext line\n") == f"a{PLACEHOLDER}\nnext line\n"


def test_plain_text_and_line_ends_are_untouched() -> None:
    text = "aten::add.Tensor\tfloat16 → 支持\r\nnext\n"
    assert sanitise(text) == text


def test_no_esc_survives_a_stream_written_one_character_at_a_time() -> None:
    raw = io.StringIO()
    stream = SafeStream(raw)
    for ch in "".join(ATTACKS.values()):
        stream.write(ch)
    assert no_controls(raw.getvalue())


def test_rich_keeps_its_colours_and_loses_the_texts() -> None:
    from rich.console import Console
    from rich.text import Text

    raw = io.StringIO()
    console = Console(file=SafeStream(raw), force_terminal=True, color_system="standard")
    console.print(Text.assemble(("error: ", "red"), "op \x1b]0;owned\x07 failed"))
    out = raw.getvalue()
    assert "\x1b[31m" in out  # rich's own colour
    assert "\x1b]" not in out and "\x07" not in out and "owned" not in out


def test_the_progress_line_rewrite_is_the_clis_own() -> None:
    raw = io.StringIO()
    SafeStream(raw).write("\r\x1b[Kreading x.log: 3 of 9 MB \x1b]0;t\x07")
    assert raw.getvalue() == f"\r\x1b[Kreading x.log: 3 of 9 MB {PLACEHOLDER}"


def crafted_log(tmp_path: Path) -> Path:
    lines = [f"[ERROR] line {i}: aten::add.Tensor {seq} not supported on the NPU"
             for i, seq in enumerate(ATTACKS.values())]
    lines.append("RuntimeError: \x1b]0;owned\x07 EZ1001 aclnnAdd failed \x1b[31mred\x1b[0m")
    path = tmp_path / "crafted\x1b]0;name\x07.log"
    path.write_bytes("\n".join(lines).encode() + b"\n")
    return path


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_explain_of_a_crafted_log_prints_no_esc(tmp_path: Path, bundled_catalog: Path,
                                               fmt: str) -> None:
    log = crafted_log(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "opcheck", "explain", str(log),
                           "--catalog", str(bundled_catalog), "--format", fmt],
                          capture_output=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert proc.stdout, "explain printed nothing"
    for out in (proc.stdout, proc.stderr):
        assert b"\x1b" not in out and b"\x07" not in out and b"\xc2\x9b" not in out, out[-500:]


def test_a_crafted_file_name_in_an_error_is_quoted_safely(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["explain", str(tmp_path / "x\x1b]0;owned\x07.log")])
    assert result.exit_code == 2
    assert "x" + PLACEHOLDER in result.output and no_controls(result.output)
