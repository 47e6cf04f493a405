"""Forgiving names: an op without overload lists its overloads, Python API names resolve
through the API → ATen link, a miss suggests close names, a release prefix names the newest
release of its line (with a note) and a leading ``v`` is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from typer.testing import CliRunner, Result

from opcheck.checker.names import Names
from opcheck.cli.app import app, route
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.versions import expand_release
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import ApiOpRec
from opcheck.db.engine import open_catalog

RELEASES = ["1.11.0.post8", "2.1.0.post10", "2.1.0.post17", "2.6.0.post5"]


@pytest.fixture(scope="module")
def cat_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = small_catalog()
    data.api_ops += [ApiOpRec("torch.isin", "aten::isin.Tensor_Tensor"),
                     ApiOpRec("torch.isin", "aten::isin.Tensor_Tensor_out"),
                     ApiOpRec("torch.nn.functional.relu", "aten::relu")]
    return write_catalog(data, tmp_path_factory.mktemp("names") / "c.sqlite")


@pytest.fixture(scope="module")
def names(cat_path: Path) -> Names:
    return Names(Catalog.load(open_catalog(cat_path)))


def run(*args: str) -> Result:
    return CliRunner().invoke(app, route(list(args)), env={"OPCHECK_WIDTH": "0"})


@pytest.mark.parametrize("query, kind, ops", [
    ("aten::relu", "op", ["aten::relu"]),
    ("relu", "op", ["aten::relu"]),
    ("isin", "overloads", ["aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"]),
    ("aten::add", "overloads", ["aten::add.Tensor", "aten::add.out"]),
    ("torch.isin", "api", ["aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"]),
    ("Tensor.isin", "api", ["aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"]),
    ("torch.Tensor.isin", "api", ["aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"]),
    ("F.relu", "api", ["aten::relu"]),
    ("aclnnisin", "aclnn", ["aten::isin.Tensor_Tensor_out", "npu::npu_gelu"]),
    ("npu_gelu", "overloads", ["npu::npu_gelu"]),
])
def test_a_name_stands_for_its_ops(names: Names, query: str, kind: str, ops: list[str]) -> None:
    m = names.match(query)
    assert (m.kind, m.ops) == (kind, ops)


def test_a_miss_suggests_close_names(names: Names) -> None:
    m = names.match("isni")
    assert m.kind == "none" and "aten::isin" in m.suggestions
    assert names.match("torch.nn.functional.rleu").suggestions == ["torch.nn.functional.relu"]


def test_op_lists_the_overloads_of_a_bare_name(cat_path: Path) -> None:
    r = run("op", "isin", "--catalog", str(cat_path))
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1:] == ["aten::isin.Tensor_Tensor\tcomposite\taclnn",
                                         "aten::isin.Tensor_Tensor_out\tnpu\taclnn"]
    assert "has 2 overloads" in r.stderr


def test_op_with_a_python_api_name(cat_path: Path) -> None:
    doc = json.loads(run("op", "torch.isin", "--catalog", str(cat_path), "-f", "json").stdout)
    assert doc["kind"] == "api" and [o["op"] for o in doc["ops"]] == [
        "aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"]
    one = run("op", "F.relu", "--catalog", str(cat_path), "-f", "json")
    assert json.loads(one.stdout)["op"] == "aten::relu"
    assert "torch.nn.functional.relu calls 1 ATen op(s): aten::relu" in one.stderr


def test_op_miss_is_one_line_with_suggestions(cat_path: Path) -> None:
    r = run("op", "isni", "--catalog", str(cat_path))
    assert r.exit_code == 2 and "did you mean aten::isin?" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("typed, release, noted", [
    ("2.6.0.post5", "2.6.0.post5", False), ("v2.6.0.post5", "2.6.0.post5", False),
    ("2.1", "2.1.0.post17", True), ("2.1.0", "2.1.0.post17", True), ("2", "2.6.0.post5", True),
    ("2.11", "2.11", False), ("9.9", "9.9", False),
])
def test_release_prefixes(typed: str, release: str, noted: bool) -> None:
    got, note = expand_release(typed, RELEASES)
    assert (got, bool(note)) == (release, noted)
    if noted:
        assert release in note and typed in note


def test_a_release_without_a_kernel_list_is_taken_as_typed(cat_path: Path, tmp_path: Path) -> None:
    # 2.4.0 is in the release matrix only: refused by name, never swapped for another release
    assert expand_release("2.4.0", RELEASES, exact=[*RELEASES, "2.4.0"]) == ("2.4.0", "")
    ol = OpList(model="m.py", method="runtime", ir="runtime-dispatch",
                ops=[OpUse("aten::relu", 1, ["float32"])])
    (tmp_path / "ops.json").write_text(ol.dumps())
    r = run(str(tmp_path / "ops.json"), "--catalog", str(cat_path), "--torch-npu", "2.4.0")
    assert r.exit_code == 2 and "2.4.0 has no kernel list" in r.output


def test_check_and_diff_take_release_prefixes(cat_path: Path, tmp_path: Path) -> None:
    ol = OpList(model="m.py", method="runtime", ir="runtime-dispatch",
                ops=[OpUse("aten::relu", 1, ["float32"])])
    (tmp_path / "ops.json").write_text(ol.dumps())
    r = run(str(tmp_path / "ops.json"), "--catalog", str(cat_path), "--torch-npu", "v2.6",
            "-f", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["target"]["torch_npu"] == "2.6.0.post5"
    # the report says how the prefix was read, as the web check page's does
    assert doc["notes"][0].startswith("torch_npu v2.6 → 2.6.0.post5")
    d = run("diff", "2.1", "2.6", "--catalog", str(cat_path), "-f", "json")
    doc = json.loads(d.stdout)
    assert (doc["old"], doc["new"]) == ("2.1.0.post17", "2.6.0.post5")


def test_diff_says_what_happens_to_a_removed_kernel(cat_path: Path) -> None:
    doc = json.loads(run("diff", "2.1.0.post17", "1.11.0.post8", "--catalog", str(cat_path),
                         "-f", "json").stdout)
    # npu_gelu has no kernel on 1.11 and no CPU kernel to fall back to
    assert doc["removed_instead"] == {"npu::npu_gelu": "unsupported"}
    table = run("diff", "2.1.0.post17", "1.11.0.post8", "--catalog", str(cat_path))
    assert "1 removed (1 unsupported)" in table.stdout
    assert "-\tnpu::npu_gelu\tkernel removed: now an error (unsupported)" in table.stdout
