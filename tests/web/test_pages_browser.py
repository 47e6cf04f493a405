"""The home page, the check page's ops × releases grid, the op page's strip and workarounds,
the aclnn function page and the log page in a real browser at a laptop's width (1366 px) and a
phone's (390 px): nothing wider than the viewport, the grid shown with the target release
highlighted and in view, the "problems only" switch hiding exactly the rows without a problem
(with scripts and without them, through ?problems=1).

One server and one browser for the module (Headless Debian Chromium driven by Playwright, as
in test_browser.py). Screenshots go to $OPCHECK_SCREENSHOTS or a temporary folder."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_browser import CHROMIUM, FLAGS, _need_browser
from test_responsive import OVERFLOWING

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

WIDTHS = (1366, 390)
TARGET = "2.6.0.post5"
OPLIST = {"schema_version": 1, "kind": "opcheck.oplist", "model": "/home/me/project/train.py",
          "method": "runtime", "ir": "runtime-dispatch", "torch_version": "2.6.0",
          "ops": [{"op": "aten::add.Tensor", "count": 30, "dtypes": ["float32"],
                   "locations": ["/home/me/project/model.py:12"]},
                  {"op": "aten::isin.Tensor_Tensor", "count": 2, "dtypes": ["int64"],
                   "locations": ["/home/me/project/generate.py:88",
                                 "/home/me/project/generate.py:120"]},
                  {"op": "aten::grid_sampler_2d", "count": 1, "dtypes": ["float32"],
                   "locations": ["/home/me/project/model.py:41"]},
                  {"op": "aten::_native_multi_head_attention", "count": 1},
                  {"op": "aten::linalg_lstsq", "count": 1, "dtypes": ["float32"]},
                  {"op": "mylib::a_custom_op_with_a_rather_long_name_for_a_phone", "count": 1,
                   "locations": ["/home/me/project/ext.py:7"]}]}

# the rows the grid shows (display not none), and what the target column looks like
GRID_STATE = """() => {
  const rows = [...document.querySelectorAll('#grid tbody tr')];
  const shown = rows.filter(r => getComputedStyle(r).display !== 'none');
  const head = document.querySelector('#grid thead th.target');
  const box = document.querySelector('#grid-scroll').getBoundingClientRect();
  const h = head ? head.getBoundingClientRect() : null;
  return {rows: rows.length, problems: rows.filter(r => r.classList.contains('problem')).length,
          shown: shown.length, shownProblems: shown.every(r => r.classList.contains('problem')),
          targetText: head ? head.innerText : '', outline: head ? getComputedStyle(head).outlineStyle : '',
          targetInView: !!h && h.left >= box.left - 1 && h.right <= box.right + 1,
          targetCells: document.querySelectorAll('#grid tbody td.target').length,
          // op names wrap inside their (sticky) column rather than run over the cells
          namesFit: [...document.querySelectorAll('#grid tbody th.grid-op')].every(th =>
            [...th.children].every(c => c.getBoundingClientRect().right <= th.getBoundingClientRect().right + 1))};
}"""


@pytest.fixture(scope="module")
def site(bundled_catalog: Path) -> Iterator[str]:
    from live_server import running_server

    with running_server(bundled_catalog) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_playwright = _need_browser()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(os.environ.get("OPCHECK_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fits(page: Any, what: str) -> None:
    got = page.evaluate(OVERFLOWING)
    assert got["scrollWidth"] <= got["width"] and not got["overflowing"], (what, got)


def _check(page: Any, site: str, query: str = "") -> None:
    page.goto(site + "/-/check" + query)
    page.select_option("#release", TARGET)
    page.fill("#oplist", json.dumps(OPLIST))
    page.click("#check-form input[type=submit]")
    page.wait_for_selector("#grid")


@pytest.mark.parametrize("width", WIDTHS)
def test_home_leads_with_the_three_actions(site: str, browser: Any, shots: Path,
                                           width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(site + "/")
        _fits(page, f"home at {width}px")
        tops = [page.locator(f"#action-{a}").bounding_box() for a in ("check", "op", "explain")]
        assert all(t is not None for t in tops)
        # all three come before what the catalog holds
        holds = page.get_by_role("heading", name="What the catalog holds").bounding_box()
        assert holds is not None and all(t["y"] < holds["y"] for t in tops if t)
        page.screenshot(path=str(shots / f"home-{width}.png"), full_page=False)
        # the look-up box finds an op by the name people type
        page.fill("#action-op input[name=q]", "F.relu")
        page.press("#action-op input[name=q]", "Enter")
        page.wait_for_url("**/-/op/aten::relu")
    finally:
        page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_check_grid(site: str, browser: Any, shots: Path, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(20_000)
    try:
        _check(page, site)
        _fits(page, f"check at {width}px")
        assert page.locator("#grid").is_visible()
        got = page.evaluate(GRID_STATE)
        assert got["rows"] >= len(OPLIST["ops"]) and got["shown"] == got["rows"], got
        assert 0 < got["problems"] < got["rows"], got
        # the target has its own highlighted column, scrolled into view on a phone
        assert TARGET in got["targetText"] and got["outline"] != "none", got
        assert got["targetCells"] == got["rows"] and got["targetInView"], got
        assert got["namesFit"], got
        # cells name their status and columns their releases without hovering
        first_cell = page.locator("#grid tbody td.cell").first.inner_text().strip()
        assert first_cell
        assert page.locator("#grid thead th.rel .rel-first").count() >= 3
        # call sites under the op
        assert "generate.py:88" in page.locator('#grid tr[data-op="aten::isin.Tensor_Tensor"]').inner_text()
        page.locator("#grid-section").screenshot(path=str(shots / f"grid-{width}.png"))

        page.check("#problems-only")
        got = page.evaluate(GRID_STATE)
        assert got["shown"] == got["problems"] and got["shownProblems"], got
        assert "problems=1" in page.url  # the choice kept in the address
        page.locator("#grid-section").screenshot(path=str(shots / f"grid-problems-{width}.png"))
        page.uncheck("#problems-only")
        assert page.evaluate(GRID_STATE)["shown"] == got["rows"]
    finally:
        page.close()


def test_problems_only_without_scripts(site: str, browser: Any) -> None:
    ctx = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 900})
    try:
        page = ctx.new_page()
        page.set_default_timeout(20_000)
        _check(page, site, "?problems=1")
        assert page.locator("#problems-only").is_checked()
        shown = page.locator("#grid tbody tr:visible").count()
        assert shown == page.locator("#grid tbody tr.problem").count()
        assert 0 < shown < page.locator("#grid tbody tr").count()
    finally:
        ctx.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_op_aclnn_and_log_pages(site: str, browser: Any, shots: Path, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(20_000)
    try:
        page.goto(site + "/-/op/aten::isin.Tensor_Tensor")
        _fits(page, f"op at {width}px")
        # every strip cell names its release; the workarounds come before the tables
        labels = page.locator("#strip .strip-cell").all_inner_texts()
        assert len(labels) > 20 and all(t.strip() for t in labels)
        wa = page.locator("#workarounds").bounding_box()
        lines = page.get_by_role("heading", name="By PyTorch line").bounding_box()
        assert wa is not None and lines is not None and wa["y"] < lines["y"]
        page.screenshot(path=str(shots / f"op-{width}.png"), full_page=False)

        page.goto(site + "/-/aclnn/aclnnAbs")
        _fits(page, f"aclnn at {width}px")
        assert page.locator("#params-table tbody tr").count() >= 2
        assert page.locator("#ops-table a", has_text="abs").count() >= 1
        page.screenshot(path=str(shots / f"aclnn-{width}.png"), full_page=False)

        page.goto(site + "/-/explain")
        log = Path(__file__).parents[1] / "fixtures" / "logs" / "bf16_cast_910a.log"
        page.fill("#log", log.read_text())
        page.click("#explain-form input[type=submit]")
        page.wait_for_selector("#explained")
        _fits(page, f"explain at {width}px")
        assert page.locator("#explained a", has_text="aclnnCast").count() >= 1
    finally:
        page.close()
