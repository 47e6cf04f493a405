"""Terminal styling comes from the vocabulary (Status.style, Verdict.cell_style)."""

from __future__ import annotations

import pytest

from opcheck.cli.commands_atlas import ERROR_STYLE, _styled
from opcheck.cli.render import status_text
from opcheck.core.vocab import Status, Verdict


@pytest.mark.parametrize("status", list(Status))
def test_a_status_is_shown_in_its_style(status: Status) -> None:
    assert status_text(status.value) == f"[{status.style}]{status.value}[/{status.style}]"


def test_unsupported_stands_out_in_bold_red() -> None:
    assert status_text("unsupported") == "[bold red]unsupported[/bold red]"


def test_text_that_is_no_status_stays_plain() -> None:
    assert status_text("n/a") == "n/a"


@pytest.mark.parametrize("cell, style", [
    ("YES", "green"), ("MAYBE (2)", "yellow"), ("NO (1)", "bold red"), ("ERROR", ERROR_STYLE),
    ("–", ""),
])
def test_a_zoo_cell_is_styled_by_its_verdict(cell: str, style: str) -> None:
    text = _styled(cell)
    assert (text.plain, str(text.style)) == (cell, style)


def test_zoo_cells_use_the_verdicts_cell_style() -> None:
    assert {v.value: v.cell_style for v in Verdict} == {
        "YES": "green", "MAYBE": "yellow", "NO": "bold red", "INCOMPLETE": "magenta"}
