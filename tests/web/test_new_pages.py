"""The pages issue 31 added or changed, through Datasette's in-process client on the bundled
catalog: the check page's ops × releases grid, the op page's strip (range labels per run of one
status, each cell naming its release) with its workarounds first, the aclnn function page, the
home page's three actions and the log page."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

if not os.environ.get("CI"):
    pytest.importorskip("datasette")

from opcheck.contrib.workaround_catalog import workaround_lookup
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.vocab import Status
from opcheck.db import contract
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.web.app import make_datasette
from opcheck.web.state import state_for

TARGET = "2.6.0.post5"
FIXTURES = Path(__file__).parents[1] / "fixtures"


class Client:
    def __init__(self, ds: Any) -> None:
        self.ds = ds
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(ds.invoke_startup())

    def get(self, path: str) -> Any:
        return self.loop.run_until_complete(self.ds.client.get(path))

    def post(self, path: str, **kw: Any) -> Any:
        return self.loop.run_until_complete(self.ds.client.post(path, **kw))


@pytest.fixture(scope="module")
def client(bundled_catalog: Path) -> Iterator[Client]:
    c = Client(make_datasette(bundled_catalog))
    yield c
    c.loop.close()


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


def oplist_doc() -> dict[str, Any]:
    return OpList(model="tiny.py", method="runtime", ir="runtime-dispatch",
                  torch_version="2.6.0",
                  ops=[OpUse("aten::add.Tensor", 2, ["float32"], locations=["model.py:12"]),
                       OpUse("aten::isin.Tensor_Tensor", 3, ["int64"],
                             locations=["gen.py:88", "gen.py:120"]),
                       OpUse("aten::_native_multi_head_attention", 1),
                       OpUse("aten::linalg_lstsq", 1, ["float32"]),
                       OpUse("mylib::custom", 1, locations=["ext.py:7"])]).to_json()


def _report(cat: Catalog, release: str) -> Any:
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded

    request = CheckRequest(Recorded(OpList.from_json(oplist_doc())), torch_npu=release,
                           all_releases=True)
    return CheckUseCase(cat, workarounds=workaround_lookup(cat)).run(request).report


def _soup(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "lxml")


# --- the check page's grid ----------------------------------------------------------------


@pytest.mark.parametrize("release", [TARGET, "2.1.0.post3"])
def test_grid_is_the_matrix_with_the_target_cut_out(client: Client, cat: Catalog,
                                                    release: str) -> None:
    r = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": release})
    assert r.status_code == 200, r.text[:2000]
    soup = _soup(r.text)
    grid = soup.select_one("#grid")
    assert grid is not None
    report = _report(cat, release)
    matrix = report.matrix
    # every release with a kernel list in exactly one column, oldest first; the target alone
    order = matrix["releases"]
    heads = grid.select("thead th.rel")
    covered: list[str] = []
    for th in heads:
        first, last = th["data-first"], th["data-last"]
        covered += order[order.index(first):order.index(last) + 1]
    assert covered == order
    target = grid.select("thead th.target")
    assert len(target) == 1 and target[0]["data-first"] == target[0]["data-last"] == release
    t = heads.index(target[0])
    # each cell says what the matrix says for every release of its column
    rows = grid.select("tbody tr")
    assert {tr["data-op"] for tr in rows} == set(matrix["ops"])
    words = {s.value: s.cell for s in Status}
    for tr in rows:
        cells = tr.select("td.cell")
        assert len(cells) == len(heads)
        for th, td in zip(heads, cells, strict=True):
            rels = order[order.index(th["data-first"]):order.index(th["data-last"]) + 1]
            states = {str(matrix["ops"][tr["data-op"]].get(x, "")) for x in rels}
            assert len(states) == 1, (tr["data-op"], rels, states)
            (state,) = states
            assert td.get_text(" ", strip=True).split(" ")[0] == (words[state] if state else "–")
        assert "target" in cells[t]["class"]
    # problems on the target first, as the report counts them
    problems = {f.op for f in report.problems}
    flags = ["problem" in tr["class"] for tr in rows]
    assert flags == sorted(flags, reverse=True)
    assert {tr["data-op"] for tr in rows if "problem" in tr["class"]} == problems
    assert soup.select_one("#problem-count").get_text() == str(len(problems))
    # the call sites the op list has, under the op
    isin = grid.select_one('tr[data-op="aten::isin.Tensor_Tensor"]')
    if isin is not None:
        assert "gen.py:88" in isin.get_text() and "gen.py:120" in isin.get_text()


def test_problems_only_starts_from_the_query_and_the_report_keeps_its_options(
        client: Client) -> None:
    body = {"oplist": json.dumps(oplist_doc()), "release": TARGET}
    plain = _soup(client.post("/-/check", data=body).text)
    assert not plain.select_one("#problems-only").has_attr("checked")
    # the matrix the grid needs is not added to the report the visitor did not ask for
    assert "Every release" not in plain.select_one("details pre").get_text()
    chosen = _soup(client.post("/-/check?problems=1", data={**body, "all_releases": "1"}).text)
    assert chosen.select_one("#problems-only").has_attr("checked")
    assert "Every release" in chosen.select_one("details pre").get_text()
    api = client.post(f"/-/check?release={TARGET}", content=json.dumps(oplist_doc()),
                      headers={"content-type": "application/json"}).json()
    assert "matrix" not in api
    asked = client.post(f"/-/check?release={TARGET}&all_releases=1",
                        content=json.dumps(oplist_doc()),
                        headers={"content-type": "application/json"}).json()
    assert asked["matrix"]["releases"]


# --- the op page ----------------------------------------------------------------------------


def test_strip_labels_each_run_and_names_each_release(client: Client,
                                                      bundled_catalog: Path) -> None:
    from opcheck.web.pages.op import op_page

    state = state_for(str(bundled_catalog))
    op = "aten::isin.Tensor_Tensor"
    page = op_page(state, op)
    statuses = {h.release.torch_npu: str(h.resolution.status)
                for h in page.history.rows if h.resolution is not None}
    mixed = 0
    for line in page.strip_lines:
        # the runs cover the line's releases in order, each with the status of every release in it
        expanded: list[str] = []
        for first, last, n, st in line.runs:
            rels = [c.release for c in line.cells]
            part = rels[rels.index(first):rels.index(last) + 1]
            assert len(part) == n and {statuses[x] for x in part} == {st}
            expanded += part
        assert expanded == [c.release for c in line.cells]
        mixed += len(line.runs) > 1
        for c in line.cells:  # a visible label that, with the line's torch, names the release
            assert c.label and (c.release == c.label or c.release.endswith(c.label))
    assert mixed, "isin changes status within a torch line in the bundled catalog"
    html = client.get("/-/op/" + op).text
    soup = _soup(html)
    ranges = [s.get_text() for s in soup.select("#strip .strip-range")]
    assert any(";" in t for t in ranges)  # a mixed line states each of its runs
    cells = soup.select("#strip .strip-cell")
    assert cells and all(c.get_text().strip() for c in cells)
    # the verdict, then the workarounds, then the strip and the tables
    assert html.index('id="op-verdict"') < html.index('id="workarounds"') < html.index(
        'id="strip"') < html.index("By PyTorch line")


def test_op_page_links_its_aclnn_functions(client: Client, cat: Catalog) -> None:
    op = "aten::abs"
    fns = contract.op_functions(cat.engine, op)
    assert fns
    html = client.get("/-/op/" + op).text
    for fn in fns:
        assert f'href="/-/aclnn/{fn}"' in html


# --- the aclnn function page ----------------------------------------------------------------


def test_aclnn_page(client: Client, cat: Catalog) -> None:
    fn = "aclnnAbs"
    r = client.get("/-/aclnn/" + fn)
    assert r.status_code == 200
    soup = _soup(r.text)
    docs = contract.function_docs(cat.engine, fn)
    heads = [th.get_text() for th in soup.select("#params-table thead th")][1:]
    assert sorted(heads) == sorted(f"CANN {v}" for v in docs)
    newest = max(docs.values(), key=lambda d: [int(x) for x in d.cann.split(".") if x.isdigit()])
    link = soup.select_one("#doc-link")
    assert link is not None and link["href"] == newest.url(newest.line)
    params = {p.param for d in docs.values() for p in d.params}
    assert {tr.select_one("code").get_text() for tr in soup.select("#params-table tbody tr")} == params
    ops = contract.function_ops(cat.engine, fn)
    assert {a.get_text() for a in soup.select("#ops-table td[data-column=op] a")} == set(ops)
    # engine facts: every launch row, each linked to its source line
    launches = soup.select("#launches tbody tr")
    assert launches and all(tr.select_one("a[href*='#L']") for tr in launches)
    # the name as people type it; an unknown one is a 404; the JSON form
    assert client.get("/-/aclnn/ACLNNABS").status_code == 200
    assert client.get("/-/aclnn/aclnnNoSuchThing").status_code == 404
    doc = client.get(f"/-/aclnn/{fn}?_format=json").json()
    assert doc["function"] == fn and [o["op"] for o in doc["ops"]] == list(ops)


def test_search_goes_to_the_aclnn_page(client: Client) -> None:
    r = client.get("/-/search?q=aclnnabs")
    assert r.status_code == 302 and r.headers["location"].endswith("/-/aclnn/aclnnabs")


# --- home and the log page ------------------------------------------------------------------


def test_home_leads_with_three_actions(client: Client) -> None:
    html = client.get("/").text
    soup = _soup(html)
    forms = [f["action"] for f in soup.select("#actions form")]
    assert forms == ["/-/check", "/-/search", "/-/explain"]
    assert html.index('id="actions"') < html.index("How to read this")


def test_log_page_explains_as_the_cli_does(client: Client, cat: Catalog) -> None:
    from opcheck.contrib.explain.report import report_log
    from opcheck.contrib.explain.scan import explain_file

    log = FIXTURES / "logs" / "bf16_cast_910a.log"
    want = report_log(explain_file(log), cat)
    r = client.post("/-/explain", data={"log": log.read_text()})
    assert r.status_code == 200
    soup = _soup(r.text)
    shown = soup.select_one("#explained").get_text(" ")
    assert want.problems or want.signatures
    for p in want.problems:
        assert f"line {p.anchor.line}" in shown
        if p.rule is not None:
            assert p.rule.fix.split("\n")[0][:60] in " ".join(shown.split())
    assert {a.get_text() for a in soup.select("#log-ops td[data-column=op] a")} == {
        o.op for o in want.ops}
    assert client.post("/-/explain", data={"log": ""}).status_code == 400


def test_large_op_lists_get_the_grid_only_when_asked(client: Client,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from opcheck.web.pages import check

    monkeypatch.setattr(check, "GRID_MAX_OPS", len(oplist_doc()["ops"]) - 1)
    body = {"oplist": json.dumps(oplist_doc()), "release": TARGET}
    soup = _soup(client.post("/-/check", data=body).text)
    assert soup.select_one("#grid") is None and soup.select_one("#grid-note") is not None
    soup = _soup(client.post("/-/check", data={**body, "all_releases": "1"}).text)
    assert soup.select_one("#grid") is not None
