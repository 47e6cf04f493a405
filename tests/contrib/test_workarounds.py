from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from opcheck.contrib import workaround_catalog as wc
from opcheck.contrib import workaround_lint as wl
from opcheck.contrib import workarounds as wa
from opcheck.core.errors import CatalogError, UsageError

DATA = wa.default_workarounds_dir()
# A few real releases (from releases.tsv) so the release checks run without the upstream mirror.
RELEASES = [
    "1.11.0.post8", "2.0.1.post4", "2.1.0", "2.1.0.post4", "2.1.0.post10", "2.1.0.post17",
    "2.6.0.post3", "2.8.0", "2.12.0",
]


def _entry(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": "demo-entry",
        "title": "demo entry",
        "ops": ["aten::isin.Tensor_Tensor"],
        "kind": "configuration",
        "problem": "something slow happens here",
        "fix": "do the other thing instead",
        "sources": ["https://github.com/Ascend/pytorch/issues/40"],
        "author": "me",
        "last_verified": "2026-11-01",
    }
    base.update(over)
    return base


def _write(folder: Path, data: dict[str, object], name: str | None = None) -> Path:
    p = folder / f"{name or data['id']}.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return p


def test_shipped_entries_load_and_lint_clean(bundled_catalog: Path) -> None:
    import sqlite3

    entries = wa.load_dir(DATA)
    assert len(entries) >= 30
    assert len({e.id for e in entries}) == len(entries)
    # Ranges may name any release of the matrix (tags and compatibility-table releases).
    with sqlite3.connect(bundled_catalog) as conn:
        known = [r[0] for r in conn.execute("SELECT torch_npu FROM release")]
    assert set(RELEASES) <= set(known)
    assert wl.lint(DATA, known_releases=known) == []
    kinds = {e.kind for e in entries}
    assert {wa.Kind.rewrite, wa.Kind.dtype_cast, wa.Kind.env_var, wa.Kind.upgrade,
            wa.Kind.configuration, wa.Kind.custom_kernel} <= kinds
    assert all(e.sources for e in entries)


def test_lint_flags_a_range_outside_the_matrix() -> None:
    problems = wl.lint(DATA, known_releases=RELEASES)
    # torchvision-nms-rewrite names 1.11.0.post4, a release only the compatibility tables know.
    assert any(p.code == "unknown-release" and "1.11.0.post4" in p.message for p in problems)


def test_shipped_aten_ops_exist_in_torch() -> None:
    torch = pytest.importorskip("torch")
    known = {wa.canonical(n, default_namespace=None) for n in torch._C._dispatch_get_all_op_names()}
    assert "aten::isin.Tensor_Tensor_out" in known
    # npu:: and third-party namespaces are not in torch: lint must not flag them.
    problems = wl.lint(DATA, known_ops=known)
    assert problems == [], [str(p) for p in problems]


def test_lint_flags_unknown_ops_and_releases(tmp_path: Path) -> None:
    _write(tmp_path, _entry(ops=["aten::isin.Tensor_Tensor", "aten::no_such_op", "torchvision::nms"],
                            applies_to={"releases": [{"min": "2.1.0", "max": "2.1.0.post99"}]}))
    problems = wl.lint(tmp_path, known_ops={"aten::isin.Tensor_Tensor", "aten::add.Tensor"},
                       known_releases=RELEASES)
    assert {(p.code, p.message) for p in problems} == {
        ("unknown-op", "aten::no_such_op is not in the catalog"),
        ("unknown-release", "2.1.0.post99 is not a torch_npu release"),
    }


def test_lint_range_matching_no_release(tmp_path: Path) -> None:
    _write(tmp_path, _entry(applies_to={"releases": [{"min": "3.0.0"}]}))
    problems = wl.lint(tmp_path, known_releases=RELEASES)
    assert [p.code for p in problems] == ["unknown-release", "unknown-release"]


def test_lint_duplicate_ids_and_file_name(tmp_path: Path) -> None:
    _write(tmp_path, _entry())
    _write(tmp_path, _entry(), name="other-name")
    codes = sorted(p.code for p in wl.lint(tmp_path))
    assert codes == ["duplicate-id", "file-name"]


def test_lint_schema_errors_name_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad-entry.yaml"
    p.write_text(
        "id: bad-entry\ntitle: bad entry\nops:\n  - isin\nkind: rewrite\n"
        "problem: something slow happens\nfix: do the other thing\nsources: [not-a-link]\n"
        "author: me\nlast_verified: 2026-11-01\n",
        encoding="utf-8",
    )
    problems = wl.lint(tmp_path)
    by_field = {p.message.split(":", 1)[0]: p for p in problems}
    assert by_field["ops.0"].line == 4
    assert "'isin' is not canonical; write 'aten::isin'" in by_field["ops.0"].message
    assert by_field["sources.0"].line == 8
    assert "source is not a link" in by_field["sources.0"].message
    assert str(by_field["ops.0"]).startswith(f"{p}:4: [schema]")


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("id: broken\ntitle: [unclosed\nkind: rewrite\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"broken\.yaml:\d+: YAML error"):
        wa.load_file(p)
    problems = wl.lint(tmp_path)
    assert [(x.code, x.line) for x in problems] == [("yaml", 3)]
    assert str(problems[0]).startswith(f"{p}:3: [yaml] YAML error")


def test_model_rules() -> None:
    with pytest.raises(ValueError, match="kind upgrade needs fixed_in"):
        wa.Workaround.model_validate(_entry(kind="upgrade"))
    with pytest.raises(ValueError, match="kind rewrite needs a rewrite"):
        wa.Workaround.model_validate(_entry(kind="rewrite"))
    with pytest.raises(ValueError, match="kind env-var needs env"):
        wa.Workaround.model_validate(_entry(kind="env-var"))
    with pytest.raises(ValueError, match=r"min 2\.2\.0 is after max 2\.1\.0"):
        wa.Workaround.model_validate(_entry(applies_to={"releases": [{"min": "2.2.0", "max": "2.1.0"}]}))
    with pytest.raises(ValueError, match=r"hardware\.0|Input should be"):
        wa.Workaround.model_validate(_entry(applies_to={"hardware": ["gpu"]}))
    with pytest.raises(ValueError, match="must define inputs"):
        wa.Workaround.model_validate(_entry(kind="rewrite", rewrite={"api": "torch.isin", "code": "def replacement(): pass"}))
    with pytest.raises(ValueError, match="listed twice"):
        wa.Workaround.model_validate(_entry(ops=["aten::relu", "aten::relu"]))


def test_release_range_semantics() -> None:
    w = wa.Workaround.model_validate(_entry(applies_to={"releases": [
        {"min": "2.1.0", "max": "2.1.0.post4"}, {"min": "2.8.0"}]}))
    assert [r for r in RELEASES if w.applies(r)] == ["2.1.0", "2.1.0.post4", "2.8.0", "2.12.0"]
    assert wa.Workaround.model_validate(_entry()).applies("1.11.0.post8")


def test_scaffold_loads_but_lint_rejects_its_placeholders(tmp_path: Path) -> None:
    text = wl.scaffold("isin.Tensor_Tensor_out")
    data = yaml.safe_load(text)
    w = wa.Workaround.model_validate(data)  # the schema holds: editors can validate it
    assert w.ops == ["aten::isin.Tensor_Tensor_out"]
    assert w.id == "isin-tensor-tensor-out-rewrite"
    (tmp_path / f"{w.id}.yaml").write_text(text, encoding="utf-8")
    found = {(p.code, p.message.split(" ", 1)[0]) for p in wl.lint(tmp_path)}
    assert found == {("placeholder", f) for f in (
        "title", "problem", "fix", "author", "sources.0", "applies_to.releases.0",
        "rewrite.api", "rewrite.code")}
    # every placeholder points at its line in the file
    lines = text.splitlines()
    author = next(p for p in wl.lint(tmp_path) if p.message.startswith("author"))
    assert author.line is not None and lines[author.line - 1].startswith("author:")
    with pytest.raises(UsageError):
        wl.scaffold("not an op!")


def test_filled_in_scaffold_passes_lint(tmp_path: Path) -> None:
    data = yaml.safe_load(wl.scaffold("isin.Tensor_Tensor_out", author="someone"))
    data.update(title="isin_out falls back", problem="CPU fallback on every call",
                fix="Compare and reduce with eq and any.",
                sources=["https://gitcode.com/Ascend/pytorch/issues/40"],
                applies_to={"releases": [{"min": "2.1.0", "max": "2.1.0.post4"}]})
    data["rewrite"] = {"api": "torch.isin", "code": data["rewrite"]["code"].replace("TODO", "note")}
    _write(tmp_path, data)
    assert wl.lint(tmp_path) == []


def test_scaffold_never_proposes_a_taken_id() -> None:
    ids = {"isin-tensor-tensor-rewrite", "isin-tensor-tensor-rewrite-2"}
    w = wa.Workaround.model_validate(yaml.safe_load(wl.scaffold("aten::isin.Tensor_Tensor",
                                                                taken=ids)))
    assert w.id == "isin-tensor-tensor-rewrite-3"
    shipped = wl.existing_ids(DATA)
    assert "isin-tensor-tensor-rewrite" in shipped
    again = yaml.safe_load(wl.scaffold("aten::isin.Tensor_Tensor", taken=shipped))
    assert again["id"] not in shipped


def _history(rows: dict[str, list[tuple[str, str]]]) -> wl.OpHistory:
    return lambda op: rows.get(op, [])


ISIN_HISTORY = {"aten::isin.Tensor_Tensor": [
    ("2.1.0", "cpu_fallback"), ("2.1.0.post4", "cpu_fallback"), ("2.1.0.post6", "cpu_fallback"),
    ("2.1.0.post8", "npu"), ("2.1.0.post10", "npu"), ("2.2.0", "cpu_fallback"),
    ("2.2.0.post2", "cpu_fallback"), ("2.3.1", "cpu_fallback"), ("2.3.1.post2", "npu")]}


def _isin(**over: Any) -> wa.Workaround:
    return wa.Workaround.model_validate(_entry(ops=["aten::isin.Tensor_Tensor"], **over))


def test_lint_wants_every_fallback_release_covered_or_a_reason() -> None:
    short = _isin(id="short", applies_to={"releases": [{"min": "2.1.0", "max": "2.1.0.post4"}]})
    [p] = wl.lint([short], op_history=_history(ISIN_HISTORY))
    assert p.code == "uncovered-fallback"
    assert "falls back to the CPU on 2.1.0.post6, 2.2.0–2.3.1" in p.message
    covering = _isin(id="covering", applies_to={"releases": [
        {"min": "2.1.0", "max": "2.1.0.post6"}, {"min": "2.2.0", "max": "2.3.1"}]})
    explained = _isin(id="explained", uncovered_reason="torch 2.2 has its own entry",
                      applies_to={"releases": [{"min": "2.1.0", "max": "2.1.0.post6"}]})
    everywhere = _isin(id="everywhere")  # no ranges: every release
    assert wl.lint([covering, explained, everywhere], op_history=_history(ISIN_HISTORY)) == []


def test_lint_holds_fixed_in_to_the_first_npu_release() -> None:
    def upgrade(fixed: str) -> wa.Workaround:
        return _isin(id=f"up-{fixed.replace('.', '-')}", kind="upgrade", fixed_in=fixed)

    [p] = wl.lint([upgrade("2.1.0.post10")], op_history=_history(ISIN_HISTORY))
    assert (p.code, p.message) == ("fixed-in", "fixed_in is 2.1.0.post10 but the catalog's "
                                   "first NPU release of aten::isin.Tensor_Tensor is 2.1.0.post8")
    assert wl.lint([upgrade("2.1.0.post8")], op_history=_history(ISIN_HISTORY)) == []
    never = {"aten::isin.Tensor_Tensor": [("2.1.0", "cpu_fallback")]}
    [p] = wl.lint([upgrade("2.1.0.post8")], op_history=_history(never))
    assert "no release where aten::isin.Tensor_Tensor runs on the NPU" in p.message


def test_schema_file_is_current() -> None:
    on_disk = json.loads((DATA / "schema.json").read_text(encoding="utf-8"))
    assert on_disk == wl.json_schema()
    assert set(on_disk["required"]) >= {"id", "kind", "problem", "fix", "sources", "author", "last_verified"}


def test_entries_from_deprecated_rows() -> None:
    rows = [("npu_silu", "torch.nn.functional.silu"), ("npu_min.dim", "torch.min"),
            ("npu_min.names_dim", "torch.min"), ("npu_nms_rotated", ""),
            ("npu_conv2d", "torch.nn.functional.conv2d"), ("npu_conv2d", "dup")]
    out = wl.entries_from_deprecated(rows)
    assert [e.id for e in out] == ["deprecated-npu-silu", "deprecated-npu-min-dim",
                                   "deprecated-npu-min-names-dim", "deprecated-npu-nms-rotated",
                                   "deprecated-npu-conv2d"]
    assert out[0].ops == ["npu::npu_silu"] and "`torch.nn.functional.silu`" in out[0].fix
    assert "No replacement" in out[3].fix
    assert wl.lint(out) == []


def test_entries_from_real_deprecated_yaml(upstream: Path) -> None:
    data = yaml.safe_load((upstream / "github/Ascend/op-plugin/master/op_plugin/config/deprecated.yaml").read_text())
    rows = [(d["name"], d.get("replace", "")) for d in data["deprecated"]]
    out = wl.entries_from_deprecated(rows)
    assert len(out) == len({r[0] for r in rows})
    assert all(e.ops[0].startswith("npu::") for e in out)


def test_import_does_not_pull_torch() -> None:
    code = ("import sys, opcheck.contrib.workarounds, opcheck.contrib.explain.render, opcheck.contrib.verify; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_workaround_lookup_exact_op_within_release_ranges(tmp_path: Path) -> None:
    from catalog_fixture import small_catalog

    from opcheck.db.build import write_catalog
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    folder = tmp_path / "entries"
    folder.mkdir()
    _write(folder, _entry(id="ranged", applies_to={"releases": [
        {"min": "2.1.0.post10", "max": "2.1.0.post17"}, {"min": "2.6.0.post5"}]}))
    _write(folder, _entry(id="always", ops=["aten::isin.Tensor_Tensor", "aten::roll"]))
    _write(folder, _entry(id="packet", ops=["aten::isin"]))
    data = small_catalog()
    data.deprecations = []
    wc.attach(data, folder)
    cat = Catalog.load(open_catalog(write_catalog(data, tmp_path / "c.sqlite")))
    lookup = wc.workaround_lookup(cat)
    found = {r.torch_npu: [w.id for w in lookup("aten::isin.Tensor_Tensor", r)]
             for r in cat.releases}
    assert found == {"1.11.0.post8": ["always"], "2.1.0.post10": ["always", "ranged"],
                     "2.1.0.post17": ["always", "ranged"], "2.4.0": ["always"],
                     "2.6.0.post5": ["always", "ranged"]}
    # The same rule as the entry itself applies.
    entry = wa.load_file(folder / "ranged.yaml")
    assert [r for r in found if "ranged" in found[r]] == [
        r.torch_npu for r in cat.releases if entry.applies(r.torch_npu)]
    # Exact op: the packet's entry is not an overload's, and the ref says where the entry is.
    release = cat.releases[0]
    assert [w.id for w in lookup("aten::isin", release)] == ["packet"]
    assert lookup("aten::relu", release) == []
    [ref] = lookup("aten::roll", release)
    assert (ref.id, ref.kind, ref.url) == ("always", "configuration",
                                          "data/workarounds/always.yaml")
