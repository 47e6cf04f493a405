"""Property tests: every parser of untrusted input either returns or raises our own one-line error.

Inputs are random text/bytes and structured mutations of the small valid fixtures (keys dropped
or renamed, values of the wrong type, truncation at every byte offset, flipped bytes of model
archives). Anything but an ``OpcheckError`` escaping a parser is a bug; so is a message that
spans several lines (the CLI prints it as one line).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from testpaths import TESTS

from opcheck.contrib.explain.reader import iter_lines
from opcheck.contrib.explain.scan import Explainer, explain_file
from opcheck.contrib.explain.signatures import load_dir
from opcheck.contrib.logs import parse_log
from opcheck.core.errors import OpcheckError, ScrapeError, TraceError, UsageError
from opcheck.core.oplist import OpList
from opcheck.core.opname import OpName, canonical
from opcheck.scrapers import (
    apidocs,
    npu_native,
    opplugin,
    pytorch,
    releases,
    wheel,
)
from opcheck.scrapers.rows import Origin
from opcheck.tracers.inputs import parse_input_spec
from opcheck.tracers.sniff import Sniffed, sniff
from opcheck.tracers.static import list_pt2, list_torchscript

FIX = TESTS / "fixtures"
MIRROR = FIX / "mirror"

# OPCHECK_FUZZ_SCALE=20 runs 20x the examples (a longer local fuzzing session); default: CI-sized.
SCALE = max(1, int(os.environ.get("OPCHECK_FUZZ_SCALE", "1")))
FAST = settings(
    max_examples=40 * SCALE,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
FEW = settings(FAST, max_examples=15 * SCALE)


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn``; it may return or raise an OpcheckError with a one-line, non-empty message."""
    try:
        return fn(*args, **kwargs)
    except OpcheckError as exc:
        msg = str(exc)
        assert msg.strip(), f"{type(exc).__name__} with an empty message"
        assert "\n" not in msg and "\r" not in msg, f"multi-line message: {msg!r}"
        return exc


# ------------------------------------------------------------------------------ strategies

YAML_CHARS = "abcxyz_:-[]{}|>#'\",.!&*?%@ \n\n\n\t0123456789vV()=\\"
MD_CHARS = "|-: \n\n\t#*`<>/[]()abcAPI名称是否支持限制与说明✔✘Yv0123456789.CANN版本"
yaml_like = st.text(alphabet=YAML_CHARS, max_size=200)
md_like = st.text(alphabet=MD_CHARS, max_size=300)
any_text = st.one_of(st.text(max_size=200), yaml_like)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False, width=32),
    st.text(max_size=12), st.sampled_from(["all_version", "newest", "v2.1", "[v2.1, newest]",
                                           "acl_op, op_api", "op_api", "1,11", "aclnnFoo"]),
)  # fmt: skip
yaml_values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=6,
)


def _containers(doc: Any, out: list[Any]) -> list[Any]:
    if isinstance(doc, dict | list):
        out.append(doc)
        for v in doc.values() if isinstance(doc, dict) else doc:
            _containers(v, out)
    return out


@st.composite
def yaml_mutation(draw: st.DrawFn, text: str) -> str:
    """A structured change of a valid YAML document: drop/rename/add a key, retype a value."""
    doc = yaml.safe_load(text)
    for _ in range(draw(st.integers(1, 3))):
        nodes = _containers(doc, [])
        if not nodes:
            doc = draw(yaml_values)
            break
        node = draw(st.sampled_from(nodes))
        how = draw(st.sampled_from(["drop", "rename", "retype", "add", "dup"]))
        if isinstance(node, dict):
            if not node:
                node[draw(st.text(max_size=8))] = draw(yaml_values)
                continue
            key = draw(st.sampled_from(sorted(node, key=str)))
            if how == "drop":
                del node[key]
            elif how == "rename":
                new = draw(st.sampled_from(["new_key", "func ", "Func", "version", "impl_ns", "tags"])
                           | st.text(max_size=8))
                node[new] = node.pop(key)
            elif how == "add":
                node[draw(st.text(min_size=1, max_size=10))] = draw(yaml_values)
            else:
                node[key] = draw(yaml_values)
        else:
            if not node:
                node.append(draw(yaml_values))
                continue
            i = draw(st.integers(0, len(node) - 1))
            if how == "drop":
                del node[i]
            elif how == "dup":
                node.insert(i, node[i])
            else:
                node[i] = draw(yaml_values)
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


@st.composite
def text_mutation(draw: st.DrawFn, text: str) -> str:
    """Line-level edits of a text file: delete/duplicate/swap/replace lines, cut, splice."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["delete", "dup", "swap", "replace", "cut", "splice", "cell"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if how == "delete" and lines:
            del lines[i]
        elif how == "dup" and lines:
            lines.insert(i, lines[i])
        elif how == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "replace" and lines:
            lines[i] = draw(st.one_of(md_like, yaml_like))
        elif how == "cut":
            joined = "\n".join(lines)
            lines = joined[: draw(st.integers(0, len(joined)))].split("\n")
        elif how == "cell" and lines and "|" in lines[i]:
            cells = lines[i].split("|")
            k = draw(st.integers(0, len(cells) - 1))
            cells[k] = draw(st.sampled_from(["", " - ", " x ", " 是 ", " Y ", "`a|b`", " 8.0.RC1 "])
                            | st.text(max_size=6))
            lines[i] = "|".join(cells)
        else:
            lines.insert(i, draw(st.one_of(md_like, yaml_like, st.text(max_size=40))))
    return "\n".join(lines)


def _read(rel: str, base: Path = FIX) -> str:
    return (base / rel).read_text(encoding="utf-8")


def truncations(text: str) -> list[str]:
    """The text cut at every byte offset (decoded as the mirror source would, bad tails dropped)."""
    data = text.encode("utf-8")
    return [data[:i].decode("utf-8", "ignore") for i in range(len(data) + 1)]


# ------------------------------------------------------------------------------ op names


@FAST
@given(st.one_of(st.text(max_size=40), st.text(alphabet="ab_:.9 \n", max_size=20)),
       st.sampled_from([None, "aten", "npu"]))
@example("aten::add.Tensor", None)
@example("aten::relu.default", None)
@example("add.Tensor\n", "aten")
@example("aten::add.Tensor.out", "aten")
def test_opname_parse_only_raises_usage_error(text: str, ns: str | None) -> None:
    got = call(OpName.parse, text, default_namespace=ns)
    if isinstance(got, OpcheckError):
        assert isinstance(got, UsageError)
        return
    # whatever was accepted prints canonically and parses back to itself
    assert OpName.parse(str(got)) == got
    assert canonical(str(got)) == str(got)
    assert got.overload != "default"


IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@FAST
@given(IDENT, IDENT, st.one_of(st.just(""), IDENT.filter(lambda s: s != "default")))
def test_opname_round_trips_valid_names(ns: str, name: str, overload: str) -> None:
    text = f"{ns}::{name}.{overload}" if overload else f"{ns}::{name}"
    assert str(OpName.parse(text)) == text == canonical(text)
    assert canonical(OpName.parse(text).base, default_namespace=ns) == text


# ------------------------------------------------------------------------------ model files

MODEL_FIXTURES = sorted(p.name for p in (FIX / "tracers").iterdir() if p.suffix in (".pt", ".pt2"))


def _check_sniffed(s: Any) -> Sniffed:
    assert isinstance(s, Sniffed), f"sniff raised or returned {s!r}"
    assert "\n" not in s.message(), s.message()
    return s


@FAST
@given(data=st.binary(max_size=600), suffix=st.sampled_from(["", ".pt", ".pt2", ".onnx", ".json"]))
@example(data=b"{" * 100_000, suffix=".json")
@example(data=b"PK\x03\x04" + b"\x00" * 40, suffix=".pt2")
@example(data=b"\x80\x02" + b"\xff" * 20, suffix=".pt")
@example(data=b"\x08\x07onnx", suffix="")
def test_sniff_never_raises_on_random_bytes(tmp_path: Path, data: bytes, suffix: str) -> None:
    f = tmp_path / f"model{suffix}"
    f.write_bytes(data)
    _check_sniffed(sniff(f))  # sniff promises no exception at all, not even ours


@FAST
@given(name=st.sampled_from(MODEL_FIXTURES), data=st.data())
def test_sniff_and_list_on_damaged_real_model_files(tmp_path: Path, name: str,
                                                    data: st.DataObject) -> None:
    raw = bytearray((FIX / "tracers" / name).read_bytes())
    how = data.draw(st.sampled_from(["truncate", "flip", "zero"]))
    if how == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif how == "flip":
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= data.draw(st.integers(1, 255))
    else:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i : i + data.draw(st.integers(1, 64))] = b"\x00" * 64
    f = tmp_path / name
    f.write_bytes(bytes(raw))
    s = _check_sniffed(sniff(f))
    call(list_pt2, f)
    call(list_torchscript, f)
    if how == "truncate" and len(raw) < 22:
        assert s.kind in ("corrupt", "unknown")


def _rezip(src: Path, dest: Path, member: str, content: bytes) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, content if info.filename == member else zin.read(info.filename))


def _graph_member(src: Path) -> str:
    with zipfile.ZipFile(src) as zf:
        return next(n for n in zf.namelist() if "/models/" in n and n.endswith(".json"))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=5,
)


def _json_mutation(draw: st.DrawFn, doc: Any) -> Any:
    json_values = JSON_VALUES
    for _ in range(draw(st.integers(1, 4))):
        nodes = _containers(doc, [])
        node = draw(st.sampled_from(nodes))
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
            if draw(st.booleans()):
                node[key] = draw(json_values)
            else:
                del node[key]
        elif isinstance(node, list) and node:
            node[draw(st.integers(0, len(node) - 1))] = draw(json_values)
    return doc


@FAST
@given(fixture=st.sampled_from(["export_small.pt2", "export_cond.pt2"]), data=st.data())
def test_list_pt2_on_mutated_graph_json(tmp_path: Path, fixture: str, data: st.DataObject) -> None:
    """A well-formed archive whose graph JSON is valid JSON of an unexpected shape."""
    src = FIX / "tracers" / fixture
    member = _graph_member(src)
    with zipfile.ZipFile(src) as zf:
        doc = json.loads(zf.read(member))
    doc = _json_mutation(data.draw, doc)
    dest = tmp_path / fixture
    _rezip(src, dest, member, json.dumps(doc).encode())
    _check_sniffed(sniff(dest))
    got = call(list_pt2, dest)
    if isinstance(got, OpcheckError):
        assert isinstance(got, TraceError)
    else:
        assert isinstance(got, OpList)
        assert all(u.count >= 1 for u in got.ops)


@FEW
@given(content=st.one_of(st.binary(max_size=200), st.just(b"{" * 50_000), st.just(b"[1, 2")))
def test_list_pt2_on_garbage_graph_member(tmp_path: Path, content: bytes) -> None:
    src = FIX / "tracers" / "export_small.pt2"
    dest = tmp_path / "m.pt2"
    _rezip(src, dest, _graph_member(src), content)
    got = call(list_pt2, dest)
    assert isinstance(got, OpList | TraceError)


# ------------------------------------------------------------------------------ logs


@FAST
@given(lines=st.lists(st.one_of(
    st.binary(max_size=120),
    st.text(max_size=120).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.sampled_from([
        b"[W] The operator 'aten::isin.Tensor_Tensor_out' is not currently supported on the NPU "
        b"backend and will fall back to run on the CPU",
        b"aclnnIsin is not found in libopapi.so", b"\"isin\" not implemented for 'Double'",
        b"EZ1001 ERR01007", b"File \"/x/model.py\", line 3, in forward", b"\x00\x01\x02\xff",
        b"The operator '" + b"a" * 300 + b"' is not currently supported on the NPU backend",
    ])), max_size=12))
def test_parse_log_on_random_and_binary_lines(tmp_path: Path, lines: list[bytes]) -> None:
    f = tmp_path / "run.log"
    f.write_bytes(b"\n".join(lines))
    got = call(parse_log, f)
    assert isinstance(got, OpList)
    for use in got.ops:
        assert canonical(use.op, default_namespace=None) == use.op or use.op.startswith("aclnn::")
    assert all("\n" not in n for n in got.notes)


def test_parse_log_on_a_very_long_line(tmp_path: Path) -> None:
    f = tmp_path / "long.log"
    f.write_bytes(b"x" * 200_000 + b"\nThe operator 'aten::relu' is not currently supported on "
                  b"the NPU backend\n" + b"\xff" * 70_000)
    got = parse_log(f)
    assert [u.op for u in got.ops] == ["aten::relu"]


# ------------------------------------------------------------------------------ troubleshoot

EXPLAINER = Explainer(load_dir())


@FAST
@given(data=st.binary(max_size=800), chunk=st.integers(1, 64))
@example(data=b"\x1b[31mImportError: libhccl.so: cannot open shared object file\x1b[0m\r\n", chunk=7)
def test_explain_on_random_bytes(data: bytes, chunk: int) -> None:
    result = call(EXPLAINER.explain, iter_lines(io.BytesIO(data), chunk_size=chunk))
    assert not isinstance(result, OpcheckError)
    assert result.lines == len(list(iter_lines(io.BytesIO(data), chunk_size=chunk)))
    for op in result.ops:
        assert canonical(op, default_namespace=None) == op


@FEW
@given(lines=st.lists(st.text(max_size=200), max_size=10))
def test_explain_on_random_text_lines(tmp_path: Path, lines: list[str]) -> None:
    call(EXPLAINER.explain, lines)
    f = tmp_path / "x.log"
    f.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    call(explain_file, f)


# ------------------------------------------------------------------------------ YAML parsers

OP = "github/Ascend/op-plugin/abc/op_plugin/config"
PT = "github/Ascend/pytorch/v7.2.0-pytorch2.1.0/torch_npu/csrc/aten"
WHL = "pypi/torch-npu/2.6.0.post5"
TAGS = _read("pytorch/tags.yaml")

# (id, parser(text) -> Any, fixture text): every YAML-ish parser with the small valid documents
# it reads in tests/fixtures.
YAML_CASES: list[tuple[str, Callable[[str], Any], str]] = [
    ("functions-combined", lambda t: opplugin.parse_functions(
        t, origin=Origin(f"{OP}/op_plugin_functions.yaml")), _read("opplugin/combined.yaml")),
    ("functions-transitional", lambda t: opplugin.parse_functions(
        t, origin=Origin(f"{OP}/op_plugin_functions.yaml")), _read("opplugin/transitional.yaml")),
    ("functions-v1r11", lambda t: opplugin.parse_functions(
        t, origin=Origin(f"{OP}/v1r11/op_plugin_functions.yaml")),
     _read("opplugin/v1r11/op_plugin_functions.yaml")),
    ("functions-v2r1", lambda t: opplugin.parse_functions(
        t, origin=Origin(f"{OP}/v2r1/op_plugin_functions.yaml"), torch="2.1"),
     _read("opplugin/v2r1/op_plugin_functions.yaml")),
    ("functions-mirror", lambda t: opplugin.parse_functions(
        t, origin=Origin(f"{OP}/op_plugin_functions.yaml"), torch="2.1"),
     _read("github/Ascend/op-plugin/c210c210/op_plugin/config/op_plugin_functions.yaml", MIRROR)),
    ("deprecated", lambda t: opplugin.parse_deprecated(t, origin=Origin(f"{OP}/deprecated.yaml")),
     _read("opplugin/deprecated.yaml")),
    ("native", lambda t: npu_native.parse_native(
        t, origin=Origin(f"{PT}/npu_native_functions.yaml")),
     _read("wheel/npu_native_functions.yaml")),
    ("codegen", lambda t: wheel.parse_codegen(
        t, origin=Origin(f"{WHL}/torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml")),
     _read("wheel/codegen.yaml")),
    ("native_functions", lambda t: pytorch.parse_native_functions(
        t, origin=Origin("torchgen/packaged/ATen/native/native_functions.yaml"), tags_text=TAGS),
     _read("pytorch/native_functions.yaml")),
    ("tags", lambda t: pytorch.parse_native_functions(
        _read("pytorch/native_functions.yaml"), origin=Origin("native_functions.yaml"),
        tags_text=t), TAGS),
]
TEXT_CASES: list[tuple[str, Callable[[str], Any], str]] = [
    ("wheel_facts", lambda t: wheel.parse_wheel_facts(t, origin=Origin(f"{WHL}/WHEEL-FACTS.txt")),
     _read("wheel/facts_space.txt")),
    ("version_py", lambda t: wheel.parse_version_py(
        t, origin=Origin(f"{WHL}/torch_npu/version.py")), _read("wheel/version.py")),
    ("releases_tsv", lambda t: releases.parse_releases_tsv(t, origin=Origin("releases.tsv")),
     _read("releases/releases.tsv")),
    ("compat", lambda t: releases.parse_compat(
        t, origin=Origin("github/Ascend/pytorch/master/COMPATIBILITY.md")),
     _read("releases/compatibility.md")),
    ("compat-readme-v5", lambda t: releases.parse_compat(
        t, origin=Origin("github/Ascend/pytorch/v5.0.0-pytorch1.11.0/README.md")),
     _read("releases/readme_v5.md")),
    ("compat-readme-v3", lambda t: releases.parse_compat(
        t, origin=Origin("github/Ascend/pytorch/v3.0.0/README.md")), _read("releases/readme_v3.md")),
    ("apidoc-sections", lambda t: apidocs.parse_markdown(t, origin=Origin(
        "github/Ascend/pytorch/master/docs/zh/api/native_api/pytorch_2-7-1/torch-Tensor.md")),
     _read("apidocs/sections.md")),
    ("apidoc-pipe", lambda t: apidocs.parse_markdown(t, origin=Origin(
        "github/Ascend/pytorch/v2.7.1-7.3.0/docs/zh/native_apis/pytorch_2-8-0/torch-nn-functional.md")),
     _read("apidocs/pipe.md")),
    ("apidoc-html-table", lambda t: apidocs.parse_markdown(t, origin=Origin(
        "github/Ascend/pytorch/v2.1.0-7.2.0/docs/api/torch_npu_apis.md")),
     _read("apidocs/html_table.md")),
    ("apidoc-list", lambda t: apidocs.parse_markdown(t, origin=Origin(
        "github/Ascend/pytorch/master/docs/zh/api/native_api/graph_supported_apis.md")),
     _read("apidocs/graph_supported_apis.md")),
]
ALL_CASES = YAML_CASES + TEXT_CASES
IDS = [c[0] for c in ALL_CASES]


@pytest.mark.parametrize(("name", "parse", "valid"), ALL_CASES, ids=IDS)
def test_valid_fixture_parses(name: str, parse: Callable[[str], Any], valid: str) -> None:
    """The base documents the mutations start from are valid (else the fuzzing proves little)."""
    got = parse(valid)
    assert got, name


@pytest.mark.parametrize(("name", "parse", "valid"), ALL_CASES, ids=IDS)
def test_parser_on_random_text(name: str, parse: Callable[[str], Any], valid: str) -> None:
    @FAST
    @given(text=st.one_of(any_text, md_like))
    @example(text="")
    @example(text="[" * 3000 + "]" * 3000)
    @example(text="{a: " * 2000)
    @example(text="\ufeff- func: x\n")
    @example(text="- !!python/object:os.system x\n")
    def run(text: str) -> None:
        call(parse, text)

    run()


@pytest.mark.parametrize(("name", "parse", "valid"), YAML_CASES, ids=[c[0] for c in YAML_CASES])
def test_yaml_parser_on_structured_mutations(name: str, parse: Callable[[str], Any],
                                             valid: str) -> None:
    @settings(FAST, max_examples=60 * SCALE)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        call(parse, data.draw(yaml_mutation(valid)))

    run()


@pytest.mark.parametrize(("name", "parse", "valid"), ALL_CASES, ids=IDS)
def test_parser_on_line_mutations(name: str, parse: Callable[[str], Any], valid: str) -> None:
    @settings(FAST, max_examples=50 * SCALE)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        call(parse, data.draw(text_mutation(valid)))

    run()


# Truncation at every byte offset: the small documents (mirror-sized), all parsers.
SMALL = [c for c in ALL_CASES if len(c[2].encode()) <= 1300]


@pytest.mark.parametrize(("name", "parse", "valid"), SMALL, ids=[c[0] for c in SMALL])
def test_parser_on_every_truncation(name: str, parse: Callable[[str], Any], valid: str) -> None:
    outcomes = [call(parse, t) for t in truncations(valid)]
    # the full text parses; cutting it must not always succeed silently with the same rows
    assert not isinstance(outcomes[-1], OpcheckError)
    assert any(isinstance(o, OpcheckError) or o != outcomes[-1] for o in outcomes[:-1])


def test_scrape_errors_name_the_file_and_line() -> None:
    text = _read("opplugin/combined.yaml").replace("op_api:", "op_apx:", 1)
    with pytest.raises(ScrapeError) as exc:
        opplugin.parse_functions(text, origin=Origin(f"{OP}/op_plugin_functions.yaml"))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "op_apx" in ln)
    assert str(exc.value).startswith(f"{OP}/op_plugin_functions.yaml:{line}: ")


# ------------------------------------------------------------------------------ inputs, op lists


@FAST
@given(st.one_of(
    st.text(max_size=60),
    st.text(alphabet="x:;,0123456789 []{}\"float16boolscalar", max_size=60),
    st.recursive(st.none() | st.booleans() | st.integers(-2, 5) | st.text(max_size=6),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(
                     st.sampled_from(["args", "kwargs", "shape", "dtype", "x"]), c, max_size=3),
                 max_leaves=6).map(json.dumps),
))
@example("@")
@example("@\x00")
@example("@/proc/self/nonexistent")
@example("[" * 100_000)
@example("x:1,2:half;2,3")
def test_parse_input_spec_only_raises_usage_error(text: str) -> None:
    got = call(parse_input_spec, text)
    if isinstance(got, OpcheckError):
        assert isinstance(got, UsageError)
    else:
        assert parse_input_spec(json.dumps(got.to_json())) == got


def test_parse_input_spec_from_a_binary_file(tmp_path: Path) -> None:
    f = tmp_path / "spec.json"
    f.write_bytes(b"\xff\xfe{\x00")
    got = call(parse_input_spec, f"@{f}")
    assert isinstance(got, UsageError)


json_docs = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
oplist_docs = st.fixed_dictionaries(
    {"kind": st.just("opcheck.oplist"), "schema_version": st.sampled_from([1, 1, 2, "1"])},
    optional={
        "model": json_docs, "method": json_docs, "ir": json_docs, "notes": json_docs,
        "ops": st.lists(st.one_of(json_docs, st.fixed_dictionaries(
            {"op": st.one_of(st.sampled_from(["aten::add.Tensor", "relu", "x y", ""]), json_docs)},
            optional={"count": json_docs, "dtypes": json_docs, "shapes": json_docs,
                      "modules": json_docs, "locations": json_docs})), max_size=4),
    },
)


@FAST
@given(st.one_of(json_docs, oplist_docs))
def test_oplist_from_json_on_random_json(doc: Any) -> None:
    got = call(OpList.from_json, doc, source="ops.json")
    if isinstance(got, OpcheckError):
        assert isinstance(got, TraceError)
        assert str(got).startswith("ops.json: ")
    else:
        again = OpList.from_json(json.loads(got.dumps()))
        assert again.to_json() == got.to_json()


@FEW
@given(st.one_of(st.binary(max_size=200), st.just(b"[" * 100_000),
                 json_docs.map(lambda d: json.dumps(d).encode())))
def test_oplist_load_on_random_files(tmp_path: Path, data: bytes) -> None:
    f = tmp_path / "ops.json"
    f.write_bytes(data)
    got = call(OpList.load, f)
    assert isinstance(got, OpList | TraceError)
