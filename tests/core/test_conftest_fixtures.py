"""The shared fixtures every sub-folder uses behave as the suite expects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from click.testing import Result


def test_cli_routes_a_model_path_to_check(cli: Callable[..., Result], tmp_path: Path) -> None:
    missing = tmp_path / "nothing.pt2"
    res = cli(str(missing))
    assert res.exit_code == 2
    assert "nothing.pt2" in res.output


def test_small_catalog_path_is_a_catalog_with_every_status(
    cli: Callable[..., Result], small_catalog_path: Path
) -> None:
    res = cli("op", "aten::relu", "--catalog", str(small_catalog_path), "--format", "json")
    assert res.exit_code == 0, res.output
    assert "aten::relu" in res.output
