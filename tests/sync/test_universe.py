"""The op universe a sync uses: the installed torch's native_functions.yaml, read as a file."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time

import pytest

from opcheck.scrapers.pytorch import parse_native_functions
from opcheck.scrapers.rows import Origin
from opcheck.sync.universe import (
    UNIVERSE_PATH,
    installed_torch_files,
    installed_torch_version,
    installed_universe,
)

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
        "import sys; from opcheck.sync.universe import installed_universe;"
        "u = installed_universe(); print(len(u.operators), u.torch_version, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3114", "2.13.0", "False"]


@needs_torch
@pytest.mark.torch
def test_installed_universe_provenance() -> None:
    u = installed_universe()
    assert u is not None
    assert u.origin == Origin(path=UNIVERSE_PATH, ref="torch-2.13.0")


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
    # every row's line is the line of its "- func:" item
    lines = text.splitlines()
    assert all(lines[r.line - 1].startswith("- func:") for r in real)
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


# Asked of torch in a child process, so the test process never imports torch either.
_PROBE = r"""
import json, sys
import torch
req = json.load(sys.stdin)
out = {}
for op in req["ops"]:
    got = []
    for key in req["keys"]:
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(op, key):
                got.append(key)
        except Exception:
            pass
    out[op] = got
json.dump(out, sys.stdout)
"""


@needs_torch
@pytest.mark.torch
def test_yaml_kinds_agree_with_the_runtime_dispatcher() -> None:
    """The runtime dispatcher confirms every CompositeImplicit op the YAML rule finds."""
    files = installed_torch_files()
    assert files is not None
    rows = parse_native_functions(files[0].read_text(encoding="utf-8"), origin=Origin("nf"))
    cia = [r.op for r in rows if r.kernel_kind == "CompositeImplicitAutograd"]
    backend = [r.op for r in rows if r.kernel_kind == "backend"]
    req = {"ops": [*cia, *backend, "aten::no_such_op"], "keys": ["CompositeImplicitAutograd", "CPU"]}
    proc = subprocess.run([sys.executable, "-c", _PROBE], input=json.dumps(req),
                          capture_output=True, text=True, timeout=300, check=True)
    facts = {op: set(keys) for op, keys in json.loads(proc.stdout).items()}
    assert all("CompositeImplicitAutograd" in facts[o] for o in cia)
    assert not any("CompositeImplicitAutograd" in facts[o] for o in backend)
    assert "CPU" in facts["aten::relu"] and facts["aten::no_such_op"] == set()
