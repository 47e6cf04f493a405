from __future__ import annotations

import re
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import pytorch
from opcheck.scrapers.pytorch import KNOWN_KEYS, parse_native_functions, parse_tags
from opcheck.scrapers.rows import Origin

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
        ("- func: a(Tensor x) -> Tensor\n  dispatch: {CPU: a\n", "malformed YAML"),
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


def test_known_keys_match_installed_torchgen() -> None:
    """Our key list is torchgen's: every e.pop("key") in NativeFunction.from_yaml."""
    from opcheck.sync.universe import installed_torch_files

    files = installed_torch_files()
    if files is None:
        pytest.skip("torch not installed")
    model = files[0].parents[3] / "model.py"
    src = model.read_text(encoding="utf-8")
    popped = set(re.findall(r'\be\.pop\(\s*"(\w+)"', src)) - {"__line__"}
    assert popped == set(KNOWN_KEYS)
