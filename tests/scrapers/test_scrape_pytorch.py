from __future__ import annotations

import collections
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import pytorch
from opcheck.scrapers.pytorch import (
    KNOWN_KEYS,
    dispatcher_facts,
    fetch_torch_files,
    installed_torch_files,
    installed_torch_version,
    operators_for,
    parse_native_functions,
    parse_tags,
    torch_tag,
)
from opcheck.scrapers.rows import Origin
from opcheck.sync.sources import HttpSource, MirrorSource

ORIGIN = Origin("github/pytorch/pytorch/v2.6.0/aten/src/ATen/native/native_functions.yaml")


def _fixture(fixtures: Path, name: str) -> str:
    return (fixtures / "pytorch" / name).read_text(encoding="utf-8")


def _rows(fixtures: Path, **kw: object) -> dict[str, pytorch.OperatorRow]:
    rows = parse_native_functions(
        _fixture(fixtures, "native_functions.yaml"),
        origin=ORIGIN,
        tags_text=_fixture(fixtures, "tags.yaml"),
        **kw,  # type: ignore[arg-type]
    )
    ops = [r.op for r in rows]
    assert len(ops) == len(set(ops))
    return {r.op: r for r in rows}


def test_fixture_rows(fixtures: Path) -> None:
    by = _rows(fixtures)
    add = by["aten::add.Tensor"]
    assert add.structured_delegate == "aten::add.out"
    assert add.kernel_kind == "backend" and add.line == 3
    assert add.dispatch == ("SparseCPU", "SparseCUDA", "MkldnnCPU")
    assert add.tags == ("core", "pointwise")
    assert add.schema == "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert by["aten::add.out"].tags == ("pointwise",)  # a bare string tag
    assert by["aten::add.out"].kernel_kind == "backend"  # structured, ufunc kernels
    assert by["aten::linear"].kernel_kind == "CompositeImplicitAutograd"  # named explicitly
    assert by["aten::dropout"].kernel_kind == "CompositeImplicitAutograd"  # no dispatch at all
    assert by["aten::relu"].kernel_kind == "backend"
    assert by["aten::relu_"].kernel_kind == "CompositeExplicitAutograd"
    assert by["aten::sgn"].kernel_kind == "CompositeExplicitAutogradNonFunctional"
    assert by["aten::_nested_get_values"].kernel_kind == "backend"  # dispatch: {} → no kernel
    assert by["aten::empty.memory_format"].line == 54  # namespaced func: accepted


def test_autogen_rows(fixtures: Path) -> None:
    by = _rows(fixtures)
    gen = by["aten::relu.out"]
    assert (gen.schema, gen.tags, gen.kernel_kind, gen.line) == (
        "",
        ("generated",),
        "CompositeExplicitAutograd",
        37,
    )
    assert {"aten::sgn.out", "aten::sgn.alt_out"} <= set(by)
    # generated from a CompositeImplicit op: torchgen registers no kernel for it
    assert by["aten::prelu.out"].kernel_kind == "backend" and by["aten::prelu.out"].dispatch == ()
    assert len(by) == 10 + 4
    assert len(_rows(fixtures, include_autogen=False)) == 10


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        (
            "- func: a(Tensor x) -> Tensor\n\n- func: b(Tensor x) -> Tensor\n  fancy: 1\n",
            ":3: unknown key(s) fancy",
        ),
        ("- func: a(Tensor x) -> Tensor\n  tags: [shiny]\n", ":1: tag(s) not in tags.yaml: shiny"),
        ("- variants: function\n", ":1: entry has no func: string"),
        ("- func: a b(Tensor x) -> Tensor\n", ":1: not an operator name"),
        ("- func: a(Tensor x) -> Tensor\n  dispatch: [CPU]\n", ":1: dispatch: is not a mapping"),
        ("func: a\n", ":1: expected a YAML list"),
        ("- func: a(Tensor x) -> Tensor\n  dispatch: {CPU: a\n", "YAML error"),
    ],
)
def test_strict_errors_name_file_and_line(fixtures: Path, yaml_text: str, needle: str) -> None:
    with pytest.raises(ScrapeError) as e:
        parse_native_functions(yaml_text, origin=ORIGIN, tags_text=_fixture(fixtures, "tags.yaml"))
    msg = str(e.value)
    assert msg.startswith(ORIGIN.path) and needle in msg and "\n" not in msg


def test_legacy_keys_of_old_torch_are_accepted() -> None:
    text = (
        "- func: a(Tensor x) -> Tensor\n  use_c10_dispatcher: full\n  matches_jit_signature: True\n"
    )
    (row,) = parse_native_functions(text, origin=ORIGIN)
    assert row.kernel_kind == "CompositeImplicitAutograd"


def test_parse_tags(fixtures: Path) -> None:
    assert parse_tags(_fixture(fixtures, "tags.yaml"), origin=Origin("tags.yaml")) == {
        "core", "pointwise", "inplace_view", "nondeterministic_seeded",
    }  # fmt: skip
    with pytest.raises(ScrapeError, match="entry 1 has no tag"):
        parse_tags("- desc: x\n", origin=Origin("tags.yaml"))


def test_torch_tag() -> None:
    assert torch_tag("2.6.0+cpu") == "v2.6.0"
    assert torch_tag("v2.1.0") == "v2.1.0"


# --- live mode through a source (mocked HTTP) -------------------------------------------------


def test_live_fetch_from_pytorch_repo(fixtures: Path, tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(str(req.url))
        m = re.fullmatch(
            r"https://raw\.githubusercontent\.com/pytorch/pytorch/v2\.6\.0/aten/src/ATen/native/(\w+\.yaml)",
            str(req.url),
        )
        if not m:
            return httpx.Response(404)
        return httpx.Response(200, content=(fixtures / "pytorch" / m[1]).read_bytes())

    src = HttpSource(transport=httpx.MockTransport(handler), cache_dir=tmp_path)
    rows, origin = operators_for(src, "2.6.0+cpu")
    assert origin.url.endswith("/v2.6.0/aten/src/ATen/native/native_functions.yaml")
    assert origin.path == "github/pytorch/pytorch/v2.6.0/aten/src/ATen/native/native_functions.yaml"
    assert origin.ref == "v2.6.0" and len(origin.sha256) == 64
    assert len(rows) == 14 and len(seen) == 2
    with pytest.raises(
        ScrapeError,
        match=r"v9\.9\.9/aten/src/ATen/native/native_functions\.yaml: not found \(HTTP 404\)",
    ):
        fetch_torch_files(src, "9.9.9")


def test_mirror_fetch_of_pytorch_files(fixtures: Path, tmp_path: Path) -> None:
    d = tmp_path / "github/pytorch/pytorch/v2.6.0/aten/src/ATen/native"
    d.mkdir(parents=True)
    for n in ("native_functions.yaml", "tags.yaml"):
        (d / n).write_bytes((fixtures / "pytorch" / n).read_bytes())
    rows, origin = operators_for(MirrorSource(tmp_path), "2.6.0")
    assert len(rows) == 14 and origin.url == ""


# --- the installed torch (2.13.0 in the venv) ------------------------------------------------

needs_torch = pytest.mark.skipif(installed_torch_files() is None, reason="torch not installed")


@needs_torch
@pytest.mark.torch
def test_installed_files_without_importing_torch() -> None:
    files = installed_torch_files()
    assert files is not None
    nf, tags = files
    assert nf.name == "native_functions.yaml" and tags.name == "tags.yaml"
    assert nf.parent.parts[-4:] == ("torchgen", "packaged", "ATen", "native")
    assert (installed_torch_version() or "").startswith("2.13.0")
    probe = (
        "import sys; from opcheck.scrapers.pytorch import installed_operators;"
        "rows, _ = installed_operators(); print(len(rows), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3114", "False"]


@needs_torch
@pytest.mark.torch
def test_installed_torch_universe() -> None:
    files = installed_torch_files()
    assert files is not None
    nf, tags = files
    text = nf.read_text(encoding="utf-8")
    t0 = time.perf_counter()
    rows = parse_native_functions(
        text, origin=Origin(str(nf)), tags_text=tags.read_text(encoding="utf-8")
    )
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, elapsed  # ~0.2 s with CSafeLoader
    real = [r for r in rows if "generated" not in r.tags]
    # grep -c '^- func:' native_functions.yaml → 2584 (torch 2.13.0)
    assert len(real) == text.count("\n- func:") + text.startswith("- func:") == 2584
    assert len(rows) == 3114  # + 530 distinct autogen ops (495 autogen: lines, some list several)
    by = {r.op: r for r in rows}
    assert by["aten::add.Tensor"].structured_delegate == "aten::add.out"
    assert by["aten::add.Tensor"].kernel_kind == "backend"
    assert by["aten::linear"].kernel_kind == "CompositeImplicitAutograd"
    assert by["aten::conv2d"].kernel_kind == "CompositeImplicitAutograd"
    assert by["aten::relu"].kernel_kind == "backend"
    kinds = collections.Counter(r.kernel_kind for r in real)
    assert (
        kinds
        == {
            "backend": 1240,  # 1231 + 9 with an explicit empty `dispatch: {}`
            "CompositeImplicitAutograd": 743,
            "CompositeExplicitAutograd": 544,  # grep: 538 "    CompositeExplicitAutograd:" + 6 in key lists
            "CompositeExplicitAutogradNonFunctional": 57,
        }
    )
    assert set().union(*(r.tags for r in real)) >= {"core", "pointwise", "view_copy"}


def test_known_keys_match_installed_torchgen() -> None:
    """Our key list is torchgen's: every e.pop("key") in NativeFunction.from_yaml."""
    files = installed_torch_files()
    if files is None:
        pytest.skip("torch not installed")
    model = files[0].parents[3] / "model.py"
    src = model.read_text(encoding="utf-8")
    popped = set(re.findall(r'\be\.pop\(\s*"(\w+)"', src)) - {"__line__"}
    assert popped == set(KNOWN_KEYS)


@needs_torch
@pytest.mark.torch
def test_dispatcher_facts_agree_with_yaml_kinds() -> None:
    """The runtime dispatcher (asked in a child process) confirms every CompositeImplicit op."""
    files = installed_torch_files()
    assert files is not None
    rows = parse_native_functions(files[0].read_text(encoding="utf-8"), origin=Origin("nf"))
    cia = [r.op for r in rows if r.kernel_kind == "CompositeImplicitAutograd"]
    backend = [r.op for r in rows if r.kernel_kind == "backend"]
    facts = dispatcher_facts(
        [*cia, *backend, "aten::no_such_op"], keys=["CompositeImplicitAutograd", "CPU"]
    )
    assert all("CompositeImplicitAutograd" in facts[o] for o in cia)
    assert not any("CompositeImplicitAutograd" in facts[o] for o in backend)
    assert "CPU" in facts["aten::relu"] and facts["aten::no_such_op"] == set()


def test_dispatcher_facts_reports_a_failing_child() -> None:
    with pytest.raises(ScrapeError, match="dispatcher probe failed"):
        dispatcher_facts(["aten::relu"], python="/nonexistent/python")
