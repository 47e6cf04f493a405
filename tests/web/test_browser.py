"""A real browser on the Datasette site: home page, op page, a facet, an op list submitted.

Headless Debian Chromium driven by Playwright (never `playwright install`: the browser is the
system package). The server runs in a child process on 127.0.0.1 only. Screenshots go to
$OPCHECK_SCREENSHOTS or a temporary folder; the path is printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def _need_browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not CHROMIUM.exists():
        why = "needs pip playwright and Debian chromium (installed by .ci/run)"
        if os.environ.get("CI"):
            pytest.fail(why)  # CI installs both: a skip there would hide a broken install
        pytest.skip(why)
    pytest.importorskip("datasette")
    return sync_playwright


@pytest.fixture(scope="module")
def site(bundled_catalog: Path) -> Iterator[str]:
    from live_server import running_server

    with running_server(bundled_catalog) as url:
        yield url


def test_browse_facet_and_check(site: str, tmp_path_factory: pytest.TempPathFactory,
                                capsys: pytest.CaptureFixture[str]) -> None:
    sync_playwright = _need_browser()
    shots = Path(os.environ.get("OPCHECK_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with capsys.disabled():
        print(f"\nscreenshots: {shots}")
    oplist = {"schema_version": 1, "kind": "opcheck.oplist", "model": "browser.py",
              "method": "runtime", "ir": "runtime-dispatch", "torch_version": "2.6.0",
              "ops": [{"op": "aten::add.Tensor", "count": 3, "dtypes": ["float32"]},
                      {"op": "aten::isin.Tensor_Tensor", "count": 2, "dtypes": ["int64"]},
                      {"op": "mylib::custom", "count": 1}]}
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)

            page.goto(site + "/")
            assert "opcheck catalog" in page.title()
            assert page.get_by_text("How to read this").count() == 1
            page.screenshot(path=str(shots / "1-home.png"), full_page=True)

            page.goto(site + "/-/op/aten::repeat_interleave.self_Tensor")
            rows = page.locator("#timeline tbody tr")
            assert rows.count() > 10
            assert page.locator("#timeline .st-npu").count() > 0
            page.screenshot(path=str(shots / "2-op.png"), full_page=True)

            # Apply a facet the way a visitor does: click a value in the facet list.
            page.goto(site + "/catalog/release")
            page.locator('.facet-info[data-column="kernel_source"] a', has_text="wheel").first.click()
            page.wait_for_url("**kernel_source=wheel**")
            cells = page.locator("td.col-kernel_source").all_inner_texts()
            assert cells and {c.strip() for c in cells} == {"wheel"}
            page.screenshot(path=str(shots / "3-facet.png"), full_page=True)

            page.goto(site + "/-/check")
            page.select_option("#release", "2.6.0.post5")
            page.fill("#oplist", json.dumps(oplist))
            page.click("input[type=submit]")
            page.wait_for_selector("#report")
            assert "Verdict:" in page.inner_text(".verdict")
            assert page.locator("#report table.rows-and-columns a", has_text="mylib::custom").count() == 1
            assert page.locator("#grid a", has_text="mylib::custom").count() == 1
            page.screenshot(path=str(shots / "4-check-paste.png"), full_page=True)

            upload = shots / "ops.json"
            upload.write_text(json.dumps(oplist))
            page.goto(site + "/-/check")
            page.set_input_files("#file", str(upload))
            page.click("input[type=submit]")
            page.wait_for_selector("#report")
            assert "torch_npu" in page.inner_text("#report")
            page.screenshot(path=str(shots / "5-check-upload.png"), full_page=True)
        finally:
            browser.close()
    assert all((shots / f).stat().st_size > 0 for f in
               ("1-home.png", "2-op.png", "3-facet.png", "4-check-paste.png", "5-check-upload.png"))
