"""Data truth (issue 26): the catalog synced from ../shared/upstream against facts derived here
again, independently of the catalog's code paths: the files are read with PyYAML, ``csv`` and
a few regular expressions of this module, never with opcheck's parsers.

Releases: every tag of releases.tsv is a release row on that tag with its exact pin, and every
row says where its kernel facts come from. Links: for every release whose pinned op-plugin
sources are mirrored, the op → aclnn links from the YAML's ``gen_opapi`` entries and from the
C++ ``EXEC_NPU_CMD``/``DO_COMPATIBILITY`` calls, counted here and compared with the catalog
(counts within a stated tolerance, samples of names exactly). The per-release counts are
printed (``pytest -s``) and written to ``$OPCHECK_LINK_COUNTS`` when set.
"""

from __future__ import annotations

import csv
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from opcheck.db.data import OpAclnnRec
from opcheck.sync.pipeline import SyncResult

pytestmark = pytest.mark.upstream

OP_PLUGIN = "github/Ascend/op-plugin"
PYTORCH = "github/Ascend/pytorch"

# The ten releases issue 26 found missing (nine hotfixes and 2.1.0.post18) and the one that
# sat on another train's pin.
HOTFIXES = ("1.11.0.post5", "1.11.0.post6", "1.11.0.post13", "1.11.0.post15", "2.1.0.post3",
            "2.1.0.post5", "2.1.0.post7", "2.2.0.post3", "2.3.1.post1", "2.1.0.post18")


@pytest.fixture(scope="module")
def synced(upstream_synced: SyncResult) -> SyncResult:
    return upstream_synced


@cache
def _tags(root: str) -> tuple[dict[str, str], ...]:
    with (Path(root) / "releases.tsv").open(encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh, delimiter="\t"))


def _norm(version: str) -> str:
    """setup.py spellings of old tags (1.8.1rc1, 1.11.rc1) as the tables write them."""
    v = re.sub(r"^(\d+\.\d+)\.rc", r"\1.0.rc", version)
    return re.sub(r"(\d)rc(\d)", r"\1.rc\2", v)


# --------------------------------------------------------------------------- releases


def test_every_tag_is_a_release_on_its_own_tag_and_pin(synced: SyncResult,
                                                       upstream: Path) -> None:
    by_tag = {r.tag: r for r in synced.data.releases if r.tag}
    missing = [t["tag"] for t in _tags(str(upstream)) if t["tag"] not in by_tag]
    assert missing == []  # the v3.0.*-pytorch1.5.0 tags too, joined on their table branch
    for t in _tags(str(upstream)):
        rel = by_tag[t["tag"]]
        assert (rel.train, rel.torch, rel.op_plugin_commit) == (
            t["train"], t["torch_version"], t["op_plugin_commit"]), t["tag"]
        if t["torch_npu_version"]:
            assert rel.torch_npu == _norm(t["torch_npu_version"]), t["tag"]


def test_no_release_is_approximated_where_its_tag_has_facts(synced: SyncResult,
                                                            upstream: Path) -> None:
    pins = {p.name for p in (upstream / OP_PLUGIN).iterdir()}
    for rel in synced.data.releases:
        if not rel.tag:
            continue
        native = (upstream / PYTORCH / rel.tag / "torch_npu/csrc/aten/npu_native_functions.yaml")
        if rel.kernel_source == "wheel":
            continue
        if rel.op_plugin_commit in pins:
            assert rel.kernel_source == "op_plugin", rel.torch_npu
        elif not rel.op_plugin_commit and native.is_file():
            assert rel.kernel_source == "npu_native", rel.torch_npu
        else:  # the 1.5.0 adapter tags: no pin, no registry file: no kernel list, and why
            assert rel.kernel_source == "none", rel.torch_npu
            assert "no npu_native_functions.yaml" in rel.kernel_source_note
    assert not [r.torch_npu for r in synced.data.releases
                if r.kernel_source == "op_plugin_branch"]


def test_every_release_says_where_its_facts_come_from(synced: SyncResult) -> None:
    prefix = {"wheel": "exact:", "op_plugin": "exact:", "npu_native": "exact:",
              "op_plugin_branch": "approximate:", "none": "no kernel list:"}
    for rel in synced.data.releases:
        assert rel.kernel_source_note.startswith(prefix[rel.kernel_source]), rel.torch_npu
        if rel.kernel_source == "op_plugin":
            assert rel.op_plugin_commit[:12] in rel.kernel_source_note
            assert rel.tag in rel.kernel_source_note


def test_hotfix_releases_have_their_exact_pins(synced: SyncResult, upstream: Path) -> None:
    rels = {r.torch_npu: r for r in synced.data.releases}
    tsv = {_norm(t["torch_npu_version"]): t for t in _tags(str(upstream))}
    for v in HOTFIXES:
        assert rels[v].kernel_source == "op_plugin", v
        assert (rels[v].tag, rels[v].op_plugin_commit) == (tsv[v]["tag"],
                                                           tsv[v]["op_plugin_commit"])


def _load(text: str) -> Any:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _entries(doc: Any, sections: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for section in sections:
        for e in (doc or {}).get(section) or []:
            out.append((section, e if isinstance(e, dict) else {"func": e}))
    return out


def _name(func: str) -> str:
    return str(func).split("(", 1)[0].strip()


def test_1_11_0_post7_is_its_own_tag(synced: SyncResult, upstream: Path) -> None:
    """v5.0.rc3.3-pytorch1.11.0: the aten kernels of op-plugin's v1r11 file at its pin plus
    the tag's own npu_native_functions.yaml, nothing of train 5.0.0."""
    rel = next(r for r in synced.data.releases if r.torch_npu == "1.11.0.post7")
    assert (rel.tag, rel.train) == ("v5.0.rc3.3-pytorch1.11.0", "5.0.rc3.3")
    base = upstream / OP_PLUGIN / rel.op_plugin_commit / "op_plugin/config/v1r11"
    plugin = _load((base / "op_plugin_functions.yaml").read_text(encoding="utf-8"))
    native = _load((upstream / PYTORCH / rel.tag /
                             "torch_npu/csrc/aten/npu_native_functions.yaml").read_text("utf-8"))
    want = {f"aten::{_name(e['func'])}" for _, e in _entries(plugin, ("official", "symint"))}
    want |= {f"aten::{_name(e['func'])}" for _, e in _entries(native, ("supported",))}
    got = {k.op for k in synced.data.kernels
           if k.release == "1.11.0.post7" and k.facts.status == "kernel"}
    assert {op for op in got if op.startswith("aten::")} <= want
    # torch_npu's own ops the tag lists under supported: (empty_with_format, ...) are npu::
    assert {op.split("::", 1)[1] for op in want} <= {op.split("::", 1)[1] for op in got}
    assert len(want) > 900


# --------------------------------------------------------------------------- links


def _minor(torch: str) -> tuple[int, ...]:
    return tuple(int(x) for x in torch.split(".")[:2])


def _versions(spec: Any, all_versions: list[str]) -> set[tuple[int, ...]]:
    """op-plugin's version spec: ``all_version``, ``[lo, hi]`` (a range, ``newest`` open),
    ``v2.1, v2.2`` or ``v2.1``."""
    every = [_minor(v.strip().lstrip("v")) for v in all_versions]
    if spec is None or spec is False:
        return set()
    if isinstance(spec, str) and spec.strip() == "all_version":
        return set(every)
    if isinstance(spec, list):
        lo = _minor(str(spec[0]).strip().lstrip("v"))
        hi_s = str(spec[1]).strip()
        hi = max(every) if hi_s == "newest" else _minor(hi_s.lstrip("v"))
        return {v for v in every if lo <= v <= hi}
    return {_minor(p.strip().lstrip("v")) for p in str(spec).split(",") if p.strip()}


@dataclass
class PinFacts:
    gen: dict[tuple[int, ...], dict[str, str]]  # torch minor → op → aclnn (gen_opapi exec)
    written: dict[tuple[int, ...], set[str]]  # torch minor → op_api ops without gen_opapi
    cpp_names: set[str]  # functions defined (column 0) in files that call an aclnn function
    cpp_aclnn: set[str]  # aclnn functions the C++ sources launch or fall back from


_LAUNCH = re.compile(r"\b(?:EXEC_\w*|DO_\w*COMPATIBILITY)\s*\(\s*(aclnn\w+)")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEFINED = re.compile(r"^(?!static\b|namespace\b|using\b|#|}|return\b)[A-Za-z_][^\n;(]*?\b(\w+)\(",
                      re.M)


@cache
def _pin(root: str, pin: str) -> PinFacts | None:
    base = Path(root) / OP_PLUGIN / pin / "op_plugin"
    opapi = base / "ops/opapi"
    config = base / "config/op_plugin_functions.yaml"
    if not (opapi.is_dir() and config.is_file()):
        return None
    doc = _load(config.read_text(encoding="utf-8"))
    every = list(doc.get("all_version") or [])
    sections = ("official", "custom", "symint", "quant", "autograd")
    execs: dict[str, str] = {}
    for _, e in _entries(doc, sections):
        gen = e.get("gen_opapi") or {}
        if isinstance(gen, dict) and gen.get("exec"):
            execs.setdefault(_name(e["func"]), str(gen["exec"]).split(",")[0].strip())
    gen_at: dict[tuple[int, ...], dict[str, str]] = defaultdict(dict)
    written: dict[tuple[int, ...], set[str]] = defaultdict(set)
    for section, e in _entries(doc, sections):
        name = _name(e["func"])
        op = f"{'aten' if section in ('official', 'symint') else 'npu'}::{name}"
        gen = e.get("gen_opapi") or {}
        aclnn = ""
        if isinstance(gen, dict):
            if gen.get("exec"):
                aclnn = str(gen["exec"]).split(",")[0].strip()
            elif gen.get("structured_inherit"):
                aclnn = execs.get(str(gen["structured_inherit"]).strip(), "")
        for v in _versions(e.get("op_api"), every):
            if aclnn:
                gen_at[v][op] = aclnn
            else:
                written[v].add(op)
    names: set[str] = set()
    launched: set[str] = set()
    for cpp in opapi.glob("*.cpp"):
        text = _COMMENT.sub("", cpp.read_text(encoding="utf-8", errors="replace"))
        calls = set(_LAUNCH.findall(text))
        launched |= calls
        if calls:
            names |= set(_DEFINED.findall(text))
    return PinFacts(dict(gen_at), dict(written), names, launched)


def _cpp_name(op: str) -> str:
    """The C++ kernel name of an op (torchgen's rule, simplified: base name, ``_out`` for an
    out overload); the ``_symint`` spelling is tried besides."""
    name, _, overload = op.split("::", 1)[1].partition(".")
    return name + ("_out" if "out" in overload.split("_") or overload == "out" else "")


@dataclass
class Counts:
    release: str
    pin: str
    yaml_gen: int  # ops with a gen_opapi exec (derived here)
    cat_gen: int  # ops the catalog links through gen_opapi
    cpp_ops: int  # op_api ops with a hand-written kernel in a launching file (derived here)
    cat_written: int  # ops the catalog links to hand-written sources
    cpp_aclnn: int  # aclnn functions the sources launch (derived here)
    cat_aclnn: int  # aclnn functions the catalog links (hand-written)


def _links(op_aclnn: list[OpAclnnRec]) -> dict[str, list[OpAclnnRec]]:
    by_release: dict[str, list[OpAclnnRec]] = defaultdict(list)
    for r in op_aclnn:
        if r.kind in ("exec", "compat"):
            for rel in r.releases.split(","):
                by_release[rel].append(r)
    return by_release


@pytest.fixture(scope="module")
def counts(synced: SyncResult, upstream: Path) -> list[Counts]:
    links = _links(synced.data.op_aclnn)
    out: list[Counts] = []
    for rel in synced.data.releases:
        if not rel.op_plugin_commit:
            continue
        facts = _pin(str(upstream), rel.op_plugin_commit)
        mine = links.get(rel.torch_npu, [])
        if facts is None:
            # no kernel sources mirrored at this pin: no link claimed for it
            assert mine == [], rel.torch_npu
            out.append(Counts(rel.torch_npu, rel.op_plugin_commit[:8], 0, 0, 0, 0, 0, 0))
            continue
        v = _minor(rel.torch)
        gen = facts.gen.get(v, {})
        cpp_ops = {op for op in facts.written.get(v, set())
                   if {_cpp_name(op), _cpp_name(op) + "_symint"} & facts.cpp_names}
        written = [r for r in mine if r.via != "gen_opapi"]
        out.append(Counts(
            rel.torch_npu, rel.op_plugin_commit[:8], len(gen),
            len({r.op for r in mine if r.via == "gen_opapi"}), len(cpp_ops),
            len({r.op for r in written}), len(facts.cpp_aclnn), len({r.aclnn for r in written})))
    table = "\n".join(
        ["release\tpin\tyaml_gen\tcatalog_gen\tcpp_ops\tcatalog_cpp_ops\tcpp_aclnn\tcatalog_aclnn"]
        + [f"{c.release}\t{c.pin}\t{c.yaml_gen}\t{c.cat_gen}\t{c.cpp_ops}\t{c.cat_written}\t"
           f"{c.cpp_aclnn}\t{c.cat_aclnn}" for c in out])
    print("\nop → aclnn links per release (derived here | catalog)\n" + table)
    if os.environ.get("OPCHECK_LINK_COUNTS"):
        Path(os.environ["OPCHECK_LINK_COUNTS"]).write_text(table + "\n", encoding="utf-8")
    return out


def test_gen_opapi_link_counts_match_exactly(counts: list[Counts]) -> None:
    linked = [c for c in counts if c.cpp_aclnn]  # releases whose pin's sources are mirrored
    assert len(linked) >= 50 and all(c.yaml_gen > 300 for c in linked)
    assert [(c.release, c.yaml_gen, c.cat_gen) for c in linked
            if c.yaml_gen != c.cat_gen] == []


def test_hand_written_link_counts_agree(counts: list[Counts]) -> None:
    """The C++ side derived here is an estimate (a function named as the op's kernel is
    defined in a file that launches aclnn functions), the catalog matches signatures and
    follows helpers and delegates: counts agree within 10%; the aclnn functions the catalog
    links are all launched by the sources, and cover at least 90% of them (the rest are
    called only for other torch versions or by kernels the YAML does not register)."""
    for c in counts:
        if not c.cpp_aclnn:
            continue
        assert abs(c.cat_written - c.cpp_ops) <= 0.10 * c.cpp_ops, c
        assert c.cat_aclnn >= 0.90 * c.cpp_aclnn, c


def test_link_names_sample_exactly(synced: SyncResult, upstream: Path) -> None:
    links = _links(synced.data.op_aclnn)
    rels = {r.torch_npu: r for r in synced.data.releases}
    checked = 0
    for release in ("2.1.0.post10", "2.5.1", "2.7.1.post2", "2.9.0.post2", "2.12.0"):
        rel = rels[release]
        facts = _pin(str(upstream), rel.op_plugin_commit)
        assert facts is not None
        mine: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for r in links[release]:
            mine[r.op].add((r.aclnn, "gen" if r.via == "gen_opapi" else "cpp"))
        gen = facts.gen.get(_minor(rel.torch), {})
        for op in sorted(gen)[::17]:  # a spread sample of the generated kernels
            assert mine[op] == {(gen[op], "gen")}, (release, op)
            checked += 1
        for op, found in mine.items():  # every hand-written link names a launched function
            assert {a for a, how in found if how == "cpp"} <= facts.cpp_aclnn, (release, op)
    assert checked >= 100
    post2 = defaultdict(set)
    for r in links["2.7.1.post2"]:
        post2[r.op].add(r.aclnn)
    assert post2["aten::cosh"] == {"aclnnCosh"}
    assert post2["aten::abs"] == {"aclnnAbs"}
    assert post2["aten::min.names_dim"] == {"aclnnMinDim"}  # not aclnnMin ("[any of N]")
    assert {"aclnnAdd", "aclnnAdds"} <= post2["aten::add.Tensor"]


def test_delegations_left_unresolved_are_few(synced: SyncResult) -> None:
    """A delegate call the argument count and types cannot tie to one overload still credits
    every candidate ("[any of N]"); issue 26 counted 121 such links at 2.7.1.post2."""
    loose = [r for r in synced.data.op_aclnn if "[any of" in r.via
             and "2.7.1.post2" in r.releases.split(",")]
    assert len(loose) < 80
    assert not [r for r in loose if r.op == "aten::min.names_dim"]


# --------------------------------------------------------------------------- the checker


@pytest.fixture(scope="module")
def catalog_path(synced: SyncResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opcheck.db.build import write_catalog

    return write_catalog(synced.data, tmp_path_factory.mktemp("truth") / "catalog.sqlite")


@pytest.mark.torch
def test_abs_bf16_on_910a_is_restricted_by_its_gen_opapi_link(catalog_path: Path) -> None:
    """aclnnAbs's page: 910A (Atlas 训练系列产品) does not take BFLOAT16; torch.abs links to it
    only through gen_opapi, so before the gen_opapi links the answer was YES."""
    pytest.importorskip("torch")
    import torch

    from opcheck.checker.check import check
    from opcheck.checker.restrictions import all_restrictions
    from opcheck.core.vocab import Verdict
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import make_engine
    from opcheck.tracers.composites import composites_with_kernels
    from opcheck.tracers.inputs import InputSpec
    from opcheck.tracers.runtime import trace_module

    class Abs(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.abs(x)

    cat = Catalog.load(make_engine(catalog_path))
    ol = trace_module(Abs(), InputSpec(), example_args=(torch.randn(4, dtype=torch.bfloat16),),
                      composites=composites_with_kernels(cat), label="abs_bf16")
    rep = check(cat, ol, cat.release("2.7.1.post2"), restrictions=all_restrictions(cat, "910A"))
    f = next(f for f in rep.ops if f.op == "aten::abs")
    hits = [r for r in f.restrictions if r.source == "cann" and r.violated]
    assert hits and {r.api for r in hits} == {"aclnnAbs"}
    assert all("BFLOAT16" in r.dtypes_seen_outside for r in hits)
    assert rep.verdict is not Verdict.YES
    fine = check(cat, ol, cat.release("2.7.1.post2"), restrictions=all_restrictions(cat, "A2"))
    assert not any(r.violated for f in fine.ops for r in f.restrictions if r.source == "cann")
