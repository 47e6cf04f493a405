"""The catalog path never imports torch: importing the tracer front end must not either."""

from __future__ import annotations

import subprocess
import sys

import pytest
from testpaths import TESTS

from opcheck.tracers import sniff


@pytest.mark.parametrize(
    "module",
    ["opcheck.tracers.api", "opcheck.tracers.sniff", "opcheck.tracers.static",
     "opcheck.tracers.inputs", "opcheck.tracers.sandbox", "opcheck.contrib.logs"],
)  # fmt: skip
def test_import_does_not_import_torch(module: str) -> None:
    code = f"import sys, {module}; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_static_listing_and_sniffing_run_without_torch(fixtures: object) -> None:
    # the listing itself (not only the import) must stay torch-free
    code = (
        "import sys\n"
        "from opcheck.tracers import static, sniff\n"
        f"sniff.sniff({str(sniff.__file__)!r})\n"
        f"a = static.list_pt2({str(_fixture('export_small.pt2'))!r})\n"
        f"b = static.list_torchscript({str(_fixture('torchscript_small.pt'))!r})\n"
        "assert 'torch' not in sys.modules\n"
        "print(len(a.ops), len(b.ops))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    pt2_ops, script_ops = (int(n) for n in out.stdout.split())
    assert pt2_ops > 0 and script_ops > 0


def _fixture(name: str) -> object:

    return TESTS / "fixtures" / "tracers" / name
