"""`opcheck zoo` forks every model's sandbox from one template that imported torch once;
a model that crashes, exhausts memory or hangs still takes only its own child down."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opcheck.checker.zoo import ERROR, run_zoo
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog

MODELS = '''
import os, signal, time
import torch
from torch import nn


def good():
    return nn.Linear(4, 2), (torch.zeros(1, 4),)


def segfault():
    os.kill(os.getpid(), signal.SIGSEGV)


def hog():
    return bytearray(64 * 1024 ** 3)  # past the address-space limit: fails at once


def hang():
    time.sleep(120)


def pid():
    # the factory runs in the sandbox: its pid says whose child it is
    with open(os.environ["OPCHECK_TEST_PIDS"], "a") as f:
        f.write(f"{os.getpid()} {os.getppid()}\\n")
    return nn.ReLU(), (torch.zeros(2),)


pid2 = pid
'''


@pytest.mark.torch
def test_forked_children_are_isolated(small_catalog_path: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    models = tmp_path / "zoo_models.py"
    models.write_text(MODELS)
    pids = tmp_path / "pids.txt"
    monkeypatch.setenv("OPCHECK_TEST_PIDS", str(pids))
    specs = [f"{models}:{f}" for f in ("segfault", "hog", "hang", "good", "pid", "pid2")]
    cat = Catalog.load(open_catalog(small_catalog_path))
    result = run_zoo(cat, specs, jobs=2, timeout=5.0, memory_mb=4096)
    by = {r.model.rsplit(":", 1)[1]: r for r in result.rows}
    assert by["segfault"].verdict == ERROR and "SIGSEGV" in by["segfault"].error
    assert by["hog"].verdict == ERROR and "out of memory" in by["hog"].error
    assert by["hang"].verdict == ERROR and "timed out" in by["hang"].error
    # the models after the crashes were traced by the same template
    assert all(by[m].verdict != ERROR for m in ("good", "pid", "pid2"))
    # both `pid` traces ran in distinct children of one process, not of this one
    seen = [line.split() for line in pids.read_text().splitlines()]
    assert len(seen) == 2 and seen[0][0] != seen[1][0] and seen[0][1] == seen[1][1]
    assert int(seen[0][1]) != os.getpid()
