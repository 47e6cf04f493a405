"""The site in a real browser at a laptop's width (1366 px) and a phone's (390 px): no element
of the home, op, search and check pages is wider than the viewport (nothing to scroll
sideways; what a scroll box clips is inside the page), and each page shows its search box.

Headless Debian Chromium driven by Playwright, as in test_browser.py. Screenshots go to
$OPCHECK_SCREENSHOTS or a temporary folder, to compare by eye."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_browser import CHROMIUM, FLAGS, _need_browser

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

# Elements whose right edge passes the viewport, unless an ancestor that scrolls or clips
# (and itself fits) holds them; elements parked off-screen to the left (Datasette's hidden
# table headers on phones) are not shown.
OVERFLOWING = """() => {
  const vw = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= vw + 1 || r.right < 0) continue;
    let held = false;
    for (let a = el.parentElement; a; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (['auto', 'scroll', 'hidden'].includes(ox) && a.getBoundingClientRect().right <= vw + 1) {
        held = true; break;
      }
    }
    if (!held) out.push(`${el.tagName.toLowerCase()}#${el.id}.${el.className} right=${Math.round(r.right)}`);
  }
  return {width: vw, scrollWidth: document.documentElement.scrollWidth, overflowing: out.slice(0, 10)};
}"""

OPLIST = {"schema_version": 1, "kind": "opcheck.oplist", "model": "/home/me/project/browser.py",
          "method": "runtime", "ir": "runtime-dispatch", "torch_version": "2.6.0",
          "ops": [{"op": "aten::add.Tensor", "count": 3, "dtypes": ["float32"]},
                  {"op": "aten::isin.Tensor_Tensor", "count": 2, "dtypes": ["int64"],
                   "locations": ["/home/me/project/generate.py:88"]},
                  {"op": "aten::linalg_lstsq", "count": 1, "dtypes": ["float32"]},
                  {"op": "aten::_native_multi_head_attention", "count": 1},
                  {"op": "mylib::a_custom_op_with_a_rather_long_name_for_a_phone", "count": 1}]}


@pytest.fixture(scope="module")
def site(bundled_catalog: Path) -> Iterator[str]:
    from live_server import running_server

    with running_server(bundled_catalog) as url:
        yield url


def _fits(page: Any, what: str) -> None:
    got = page.evaluate(OVERFLOWING)
    assert got["scrollWidth"] <= got["width"] and not got["overflowing"], (what, got)
    assert page.locator("form.opcheck-search input[name=q]").count() == 1, what


@pytest.mark.parametrize("width", [1366, 390])
def test_pages_fit_the_viewport(site: str, width: int,
                                tmp_path_factory: pytest.TempPathFactory,
                                capsys: pytest.CaptureFixture[str]) -> None:
    sync_playwright = _need_browser()
    shots = Path(os.environ.get("OPCHECK_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    with capsys.disabled():
        print(f"\nscreenshots: {shots}")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.set_default_timeout(15_000)
            for name, path in [("home", "/"), ("op", "/-/op/aten::isin.Tensor_Tensor"),
                               ("api", "/-/op/torch.isin"), ("search", "/-/search?q=isni")]:
                page.goto(site + path)
                _fits(page, f"{name} at {width}px")
                page.screenshot(path=str(shots / f"{width}-{name}.png"), full_page=True)
            # the op page leads with its release × status strip; code in workarounds is
            # highlighted, release ranges are read as ranges
            page.goto(site + "/-/op/aten::isin.Tensor_Tensor")
            assert page.locator("#strip .strip-cell").count() > 20
            assert page.locator(".workaround .codehilite").count() >= 1
            assert "[{" not in page.locator(".workaround").first.inner_text()

            # the search box: an API name lands on the op page of its single op
            page.fill("form.opcheck-search input[name=q]", "F.relu")
            page.press("form.opcheck-search input[name=q]", "Enter")
            page.wait_for_url("**/-/op/aten::relu")

            page.goto(site + "/-/check")
            page.fill("#oplist", json.dumps(OPLIST))
            page.click("#check-form input[type=submit]")
            page.wait_for_selector("#report")
            _fits(page, f"check at {width}px")
            page.screenshot(path=str(shots / f"{width}-check.png"), full_page=True)
        finally:
            browser.close()
