"""The search box reads what people type as `opcheck op` does (checker/names.py): an API's last
name alone (`grid_sample`) finds the API and the ops the NPU receives for it."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("datasette")

from opcheck.web.app import make_datasette


def test_bare_api_name_on_the_bundled_catalog(bundled_catalog: Path) -> None:
    ds = make_datasette(bundled_catalog)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(ds.invoke_startup())
        r = loop.run_until_complete(ds.client.get("/-/search?q=grid_sample&_format=json"))
    finally:
        loop.close()
    assert r.status_code == 200
    doc = json.loads(r.text)
    assert doc["kind"] == "api" and doc["name"] == "torch.nn.functional.grid_sample"
    ops = {o["op"]: o["status"] for o in doc["ops"]}
    assert ops["aten::grid_sampler_2d"] == "npu"  # on the newest release
    assert "inferred" in doc["description"]
