"""The model atlas page (/-/atlas): the grid's view-model, the served page and its JSON, the
model report, the table's facets, a real browser (screenshot), and its p95 while attacked.

The catalog is the bundled snapshot's with an atlas of the size of transformers' (700
architectures, a few runs of releases each) made here, so the page renders what a real atlas
gives it and the test does not depend on a traced atlas being in the snapshot."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from opcheck.core.paths import snapshot_dir
from opcheck.db.data import CoverageRec
from opcheck.web.pages import atlas as page

TASKS = ("causal-lm", "image-classification", "seq2seq", "audio")


def _runs(i: int, lib: str, releases: list[str]) -> list[CoverageRec]:
    base = dict(library=lib, library_version="5.24.0", architecture=f"arch{i:03d}",
                model_class=f"Arch{i}Model", task=TASKS[(i // 4) % len(TASKS)], recorder="fake",
                traced_with="2.13.0", trace_ms=1200)
    if i % 50 == 7:
        return [CoverageRec(**base, verdict="ERROR", error="needs a tokenizer file")]  # type: ignore[arg-type]
    cut = releases[(i * 7) % len(releases)]
    k = releases.index(cut)
    out = []
    if k:
        out.append(CoverageRec(**base, first_release=releases[0], last_release=releases[k - 1],  # type: ignore[arg-type]
                               verdict="MAYBE", cpu_fallback=1, round_trips=3,
                               problem_ops="aten::isin.Tensor_Tensor=cpu_fallback"))
    out.append(CoverageRec(**base, first_release=cut, last_release=releases[-1], verdict="YES",  # type: ignore[arg-type]
                           npu=20))
    return out


def atlas_rows(releases: list[str]) -> list[CoverageRec]:
    rows = []
    for i in range(700):
        rows += _runs(i, ("transformers", "timm", "torchvision", "diffusers")[i % 4], releases)
    return rows


@functools.cache
def _releases() -> list[str]:
    from opcheck.core.versions import release_key
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(snapshot_dir())
    return sorted({k.release for k in data.kernels}, key=release_key)


# ------------------------------------------------------------------------ the view-model


def test_columns_are_runs_on_which_no_shown_model_changes() -> None:
    rels = ["a", "b", "c", "d", "e"]
    rows = [CoverageRec(library="t", library_version="1", architecture="x", first_release="a", last_release="b", verdict="NO"),
            CoverageRec(library="t", library_version="1", architecture="x", first_release="c", last_release="e", verdict="YES"),
            CoverageRec(library="t", library_version="1", architecture="y", first_release="a", last_release="d", verdict="MAYBE"),
            CoverageRec(library="t", library_version="1", architecture="y", first_release="e", last_release="e", verdict="YES"),
            CoverageRec(library="t", library_version="1", architecture="z", verdict="ERROR", error="needs weights")]
    vm = page.view_model(rows, rels, {})
    assert vm["columns"] == [("a", "b"), ("c", "d"), ("e", "e")]
    cells = {m.architecture: [c.verdict if c else "" for c in cs] for m, cs in vm["grid"]}
    assert cells == {"x": ["NO", "YES", "YES"], "y": ["MAYBE", "MAYBE", "YES"],
                     "z": ["ERROR", "ERROR", "ERROR"]}
    assert vm["traced"] == 2 and vm["count"] == 3
    only_x = page.view_model(rows, rels, {"q": "X"})  # the search box ignores case
    assert [m.architecture for m, _ in only_x["grid"]] == ["x"]
    assert only_x["columns"] == [("a", "b"), ("c", "e")]  # fewer models, wider columns
    assert [m.architecture for m, _ in page.view_model(rows, rels, {"verdict": "YES"})["grid"]] \
        == ["x", "y"]


def test_filters_and_pages() -> None:
    rels = _releases()
    rows = atlas_rows(rels)
    vm = page.view_model(rows, rels, {"library": "timm", "task": "causal-lm"})
    assert vm["count"] == len({r.architecture for r in rows
                               if r.library == "timm" and r.task == "causal-lm"}) > 0
    assert all(m.library == "timm" and m.task == "causal-lm" for m, _ in vm["grid"])
    everything = page.view_model(rows, rels, {"page": "99"})
    assert everything["pages"] == 5 and everything["page"] == 5  # clamped to the last page
    assert len(everything["grid"]) == 700 - 4 * page.PER_PAGE
    assert page.view_model(rows, rels, {"page": "x"})["page"] == 1


def test_a_models_report_lists_its_runs_in_release_order() -> None:
    def run(first: str, last: str, verdict: str) -> CoverageRec:
        return CoverageRec(library="transformers", library_version="5.25.0", architecture="x",
                           first_release=first, last_release=last, verdict=verdict)

    # as the catalog groups them: by fact, not by release
    rows = [run("2.1.0.post5", "2.1.0.post12", "YES"), run("2.1.0.post3", "2.1.0.post3", "YES"),
            run("2.1.0.post16", "2.1.0.post18", "YES"), run("2.0.1.rc1", "2.0.1.rc1", "MAYBE"),
            run("2.9.0.post2", "2.14.0", "YES"), run("2.0.1", "2.1.0.post2", "YES")]
    report = page.report_model(rows, "transformers", "x", {})
    assert report is not None
    assert [r["row"].first_release for r in report["runs"]] == [
        "2.0.1.rc1", "2.0.1", "2.1.0.post3", "2.1.0.post5", "2.1.0.post16", "2.9.0.post2"]


# ----------------------------------------------------------------------------- served


@pytest.fixture(scope="module")
def atlas_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(snapshot_dir())
    data.coverage = atlas_rows(_releases())
    return write_catalog(data, tmp_path_factory.mktemp("atlas") / "catalog.sqlite")


@pytest.fixture(scope="module")
def site(atlas_catalog: Path) -> Iterator[tuple[str, int]]:
    pytest.importorskip("datasette")
    from live_server import running_server

    with running_server(atlas_catalog, workers=1, allow_sql=True) as url:
        yield url, int(url.rsplit(":", 1)[1])


def _get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_page_the_model_report_json_and_facets(site: tuple[str, int]) -> None:
    base, _ = site
    status, html = _get(base + "/-/atlas?library=timm")
    assert status == 200 and 'id="atlas-grid"' in html and "arch001" in html
    assert "arch000" not in html  # transformers
    status, doc = _get(base + "/-/atlas?_format=json&q=arch01&library=transformers")
    data = json.loads(doc)
    assert {m["architecture"] for m in data["models"]} == {"arch012", "arch016"}
    assert all(len(m["cells"]) == len(data["columns"]) for m in data["models"])
    status, html = _get(base + "/-/atlas/transformers/arch012")
    assert status == 200 and "aten::isin.Tensor_Tensor" in html and "cpu_fallback" in html
    runs = html.split('id="model-runs"', 1)[1]
    assert runs.index('class="st v-YES"') < runs.index('class="st v-MAYBE"')  # newest first
    assert _get(base + "/-/atlas/transformers/nosuch")[0] == 404
    status, html = _get(base + "/-/atlas/timm/arch057")  # i % 50 == 7: an ERROR row
    assert status == 200 and "needs a tokenizer file" in html
    status, doc = _get(base + "/catalog/model_coverage.json?_facet=library&_facet=verdict&_size=0")
    facets = json.loads(doc)["facet_results"]
    facets = facets.get("results", facets)
    assert {f["value"] for f in facets["library"]["results"]} == {
        "transformers", "timm", "torchvision", "diffusers"}
    assert "ERROR" in {f["value"] for f in facets["verdict"]["results"]}


def test_its_p95_under_the_attack_tests_visitor(site: tuple[str, int]) -> None:
    from test_attacks import P95_LIMIT, Live, in_threads, p95, visitor

    base, port = site
    live = Live(base, port, 0, [], Path())
    path = "/-/atlas?library=transformers"
    assert live.request("GET", path)[0] == 200  # now in the page cache
    stop_at = time.monotonic() + 4

    def attacker(i: int) -> None:
        j = 0
        while time.monotonic() < stop_at:
            j += 1
            # cache busting (ignored by the key) and the model reports
            live.request("GET", f"{path}&x={j}", source=f"127.0.0.{40 + i}")
            live.request("GET", f"/-/atlas/timm/arch{(4 * j + 1) % 700:03d}",
                         source=f"127.0.0.{40 + i}")

    with visitor(live, path) as latencies:
        in_threads(4, attacker)
    assert p95(latencies) <= P95_LIMIT, f"atlas visitor p95 {p95(latencies) * 1000:.0f} ms"
    print(f"\natlas page p95 under attack: {p95(latencies) * 1000:.1f} ms "
          f"({len(latencies)} visits)")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_in_a_real_browser(site: tuple[str, int], tmp_path_factory: pytest.TempPathFactory,
                           capsys: pytest.CaptureFixture[str]) -> None:
    from test_browser import CHROMIUM, FLAGS, _need_browser

    sync_playwright = _need_browser()
    base, _ = site
    shots = Path(os.environ.get("OPCHECK_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with capsys.disabled():
        print(f"\nscreenshots: {shots}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        try:
            view = browser.new_page(viewport={"width": 1400, "height": 900})
            view.set_default_timeout(15_000)
            view.goto(base + "/-/atlas")
            assert view.locator("#atlas-grid tbody tr").count() == page.PER_PAGE
            view.select_option("#f-library", "torchvision")
            view.fill("#atlas-q", "arch0")
            view.click("#atlas-filters input[type=submit]")
            view.wait_for_url("**library=torchvision**")
            names = view.locator("#atlas-grid tbody td[data-column=architecture] a").all_inner_texts()
            assert names and all(n.startswith("arch0") for n in names)
            assert view.locator("#atlas-grid td.v-YES").count() > 0
            assert view.locator("#atlas-grid td.v-MAYBE").count() > 0
            view.screenshot(path=str(shots / "atlas-1-grid.png"), full_page=True)
            view.locator("#atlas-grid td.v-MAYBE a").first.click()
            view.wait_for_selector("#model-runs")
            assert "aten::isin.Tensor_Tensor" in view.inner_text("#model-runs")
            view.screenshot(path=str(shots / "atlas-2-model.png"), full_page=True)
            view.goto(base + "/catalog/model_coverage?verdict=ERROR")
            for col in ("library", "task", "verdict", "recorder"):  # the configured facets
                assert view.locator(f".facet-info[data-column={col}]").count() >= 1, col
            assert {c.strip() for c in view.locator("td.col-verdict").all_inner_texts()} == {
                "ERROR"}
            view.screenshot(path=str(shots / "atlas-3-table.png"), full_page=True)
        finally:
            browser.close()
    assert all((shots / f).stat().st_size > 0 for f in
               ("atlas-1-grid.png", "atlas-2-model.png", "atlas-3-table.png"))
