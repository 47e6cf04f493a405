"""The search box's page and forgiving op pages (the names `opcheck op` takes), the default
target stated on the op-list page, and how workaround text is shown: release ranges in words,
fenced code highlighted, nothing unsafe let through."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from catalog_fixture import small_catalog

if not os.environ.get("CI"):
    pytest.importorskip("datasette")

from opcheck.db.build import write_catalog
from opcheck.db.data import ApiOpRec
from opcheck.web.app import make_datasette
from opcheck.web.pages.base import markdown_html, release_ranges


class Client:
    def __init__(self, ds: Any) -> None:
        self.ds = ds
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(ds.invoke_startup())

    def get(self, path: str) -> Any:
        return self.loop.run_until_complete(self.ds.client.get(path))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    data = small_catalog()
    data.api_ops += [ApiOpRec("torch.isin", "aten::isin.Tensor_Tensor"),
                     ApiOpRec("torch.isin", "aten::isin.Tensor_Tensor_out"),
                     ApiOpRec("torch.nn.functional.relu", "aten::relu")]
    path = write_catalog(data, tmp_path_factory.mktemp("search") / "catalog.sqlite")
    c = Client(make_datasette(path))
    yield c
    c.loop.close()


def test_every_page_has_the_search_box(client: Client) -> None:
    for path in ("/", "/-/op/aten::relu", "/-/check", "/-/search", "/catalog/release"):
        html = client.get(path).text
        assert 'class="opcheck-search"' in html and 'name="q"' in html, path


def test_one_op_goes_to_its_page(client: Client) -> None:
    r = client.get("/-/search?q=F.relu")
    assert r.status_code == 302 and r.headers["location"].endswith("/-/op/aten::relu")


def test_several_ops_are_listed_with_their_status(client: Client) -> None:
    r = client.get("/-/search?q=torch.isin")
    assert r.status_code == 200
    assert "torch.isin calls 2 ATen op(s)" in r.text
    assert r.text.count('href="/-/op/aten::isin.Tensor_Tensor') == 2
    doc = client.get("/-/search?q=isin&_format=json").json()
    assert doc["kind"] == "overloads" and doc["release"] == "2.6.0.post5"
    assert [(o["op"], o["status"]) for o in doc["ops"]] == [
        ("aten::isin.Tensor_Tensor", "composite"), ("aten::isin.Tensor_Tensor_out", "npu")]


def test_a_miss_suggests(client: Client) -> None:
    r = client.get("/-/search?q=isni")
    assert r.status_code == 404 and "aten::isin" in r.text and 'id="suggestions"' in r.text


def test_op_page_reads_api_names(client: Client) -> None:
    r = client.get("/-/op/F.relu")
    assert r.status_code == 200 and 'id="read-as"' in r.text and 'id="strip"' in r.text
    listed = client.get("/-/op/torch.isin")
    assert listed.status_code == 200 and 'id="matches"' in listed.text


def test_op_page_leads_with_the_release_strip(client: Client) -> None:
    html = client.get("/-/op/aten::isin.Tensor_Tensor_out").text
    strip = html[html.index('id="strip"'):html.index("By PyTorch line")]
    assert strip.count("strip-cell") == 4  # the four releases with a kernel list
    assert 'title="2.6.0.post5: npu"' in strip and 'title="1.11.0.post8: cpu_fallback"' in strip


def test_check_page_states_the_default_target(client: Client) -> None:
    html = client.get("/-/check").text
    assert 'id="default-target"' in html
    assert "target torch_npu 2.6.0.post5: the newest release with a kernel list" in html
    assert '<option value="2.6.0.post5" selected>' in html


def test_release_ranges_in_words() -> None:
    text = '[{"min": "2.1.0.rc1", "max": "2.1.0.post6"}, {"min": "2.2.0"}, {"max": "1.11.0"}]'
    assert release_ranges(text) == "2.1.0.rc1 – 2.1.0.post6, 2.2.0 and later, up to 1.11.0"
    assert release_ranges("[]") == "" and release_ranges("not json") == "not json"


def test_fenced_code_is_highlighted_and_html_escaped() -> None:
    html = str(markdown_html("Do this:\n\n```python\nmask = (a == b).any(-1)\n```\n\n"
                             "<script>alert(1)</script>"))
    assert '<div class="codehilite">' in html and '<span class="n">mask</span>' in html
    assert "python mask" not in html and "<script>" not in html
