"""The fix within reach (issue 31): `opcheck workaround show ID` and `opcheck fix OP` print an
entry whole, reports name each fix with its first paragraph and the command, the markdown
report carries the fix, `opcheck op` lists an op's entries, names people type resolve, and
`--all-releases` fits an 80-column terminal. On the bundled catalog and the shipped entries."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from opcheck.cli.app import app, route
from opcheck.contrib.workarounds import default_workarounds_dir
from opcheck.core.oplist import OpList, OpUse

# ops whose status changes often across releases: their group columns are far wider than 80
CHURN = ["aten::_foreach_add_.Scalar", "aten::_foreach_mul_.Scalar", "aten::_foreach_sqrt",
         "aten::isin.Tensor_Tensor", "aten::logcumsumexp", "aten::triu", "aten::index_put",
         "aten::_transformer_encoder_layer_fwd", "aten::prod.dim_int", "aten::relu"]
URL = re.compile(r"https?://\S+")


def run(*args: str, width: str = "0", env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, route(list(args)),
                              env={"OPCHECK_WIDTH": width, "OPCHECK_NO_CONFIG": "1", **(env or {})})


@pytest.fixture(scope="module")
def oplist_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ol = OpList(model="/work/proj/gen.py", method="runtime", ir="runtime-dispatch",
                torch_version="2.1.0",
                ops=[OpUse(op, 2, ["float32"], locations=[f"/work/proj/gen.py:{10 + i}"])
                     for i, op in enumerate(CHURN)])
    path = tmp_path_factory.mktemp("fixes") / "ops.json"
    path.write_text(ol.dumps())
    return path


def _entry(entry_id: str) -> dict[str, object]:
    loaded = yaml.safe_load((default_workarounds_dir() / f"{entry_id}.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_workaround_show_prints_the_fix_verification_and_sources(bundled_catalog: Path) -> None:
    r = run("workaround", "show", "isin-tensor-tensor-rewrite", "--catalog", str(bundled_catalog))
    assert r.exit_code == 0, r.output
    entry = _entry("isin-tensor-tensor-rewrite")
    fix_lines = [line for line in str(entry["fix"]).splitlines() if line.strip()]
    for line in fix_lines:  # the whole fix, as written
        assert line in r.stdout
    for source in entry["sources"]:  # type: ignore[attr-defined]
        assert source in r.stdout
    assert "def replacement(" in r.stdout  # the rewrite code, copyable
    flat = " ".join(r.stdout.split())  # the verification is wrapped
    assert "opcheck workaround verify isin-tensor-tensor-rewrite" in flat
    assert f"last verified {entry['last_verified']}" in flat
    doc = json.loads(run("workaround", "show", "isin-tensor-tensor-rewrite", "-f", "json",
                         "--catalog", str(bundled_catalog)).stdout)
    assert doc["fix"] == entry["fix"] and doc["ops"] == sorted(entry["ops"])  # type: ignore[call-overload]


def test_workaround_show_refuses_an_unknown_id_in_one_line(bundled_catalog: Path) -> None:
    r = run("workaround", "show", "isin-tensor-tensor-rewrit", "--catalog", str(bundled_catalog))
    assert r.exit_code == 2 and "did you mean isin-tensor-tensor-rewrite" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_fix_prints_the_entries_that_apply_on_the_target(bundled_catalog: Path) -> None:
    # isin's tensor/tensor overload falls back on 2.1.0.post4: the rewrite and the upgrade
    r = run("fix", "torch.isin", "--torch-npu", "2.1.0.post4", "--catalog", str(bundled_catalog))
    assert r.exit_code == 0, r.output
    assert "isin-tensor-tensor-rewrite:" in r.stdout and "isin-tensor-tensor-upgrade:" in r.stdout
    # on a release the rewrite's range leaves out, only what still applies
    later = run("fix", "aten::isin.Tensor_Tensor", "--torch-npu", "2.6.0.post5", "-f", "json",
                "--catalog", str(bundled_catalog))
    ids = [w["id"] for w in json.loads(later.stdout)["workarounds"]]
    assert "isin-tensor-tensor-rewrite" not in ids
    none = run("fix", "aten::relu", "--catalog", str(bundled_catalog))
    assert none.exit_code == 1 and "no workaround entry for aten::relu" in none.output


def test_op_lists_its_workarounds(bundled_catalog: Path) -> None:
    r = run("op", "aten::isin.Tensor_Tensor", "--catalog", str(bundled_catalog))
    assert r.exit_code == 0, r.output
    tail = r.stdout[r.stdout.index("workarounds ("):]
    assert "isin-tensor-tensor-rewrite (rewrite): Replace the call" in tail


def test_reports_name_each_fix_and_markdown_carries_it(bundled_catalog: Path,
                                                      oplist_path: Path) -> None:
    args = (str(oplist_path), "--torch-npu", "2.1.0.post4", "--catalog", str(bundled_catalog),
            "--fail-on", "never")
    table = run(*args).stdout
    hints = table[table.index("fixes ("):]
    assert "opcheck workaround show ID" in hints
    assert "isin-tensor-tensor-rewrite (aten::isin.Tensor_Tensor): Replace the call" in hints
    md = run(*args, "-f", "markdown").stdout
    fixes = md[md.index("### Fixes"):]
    fix = str(_entry("isin-tensor-tensor-rewrite")["fix"])
    assert fix.strip() in fixes  # whole, code block included
    assert "`opcheck workaround show isin-tensor-tensor-rewrite`" in fixes


def test_github_format_annotates_each_source_line(bundled_catalog: Path, oplist_path: Path) -> None:
    r = run(str(oplist_path), "--torch-npu", "2.1.0.post4", "-f", "github", "--catalog",
            str(bundled_catalog), "--fail-on", "never",
            env={"GITHUB_WORKSPACE": "/work/proj"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    isin = next(line for line in lines if "aten%3A%3Aisin.Tensor_Tensor" in line)
    # relative to the workspace, the line the trace saw, a title, the fix and its command
    assert isin.startswith("::warning file=gen.py,line=13,title=opcheck%3A aten%3A%3Aisin")
    assert "%0AFix (isin-tensor-tensor-rewrite): Replace the call" in isin
    assert "\n" not in isin and lines[-1].startswith("::notice title=opcheck::")


@pytest.mark.parametrize("width", [80, 70])
def test_all_releases_fits_the_terminal(bundled_catalog: Path, oplist_path: Path,
                                        width: int) -> None:
    r = run(str(oplist_path), "--all-releases", "--catalog", str(bundled_catalog),
            "--fail-on", "never", width=str(width))
    assert r.exit_code == 0, r.output
    too_wide = [line for line in r.stdout.splitlines() if len(URL.sub("", line)) > width]
    assert not too_wide, "\n".join(too_wide)
    # every op whose status changes is still there, with its runs of releases
    runs = r.stdout[r.stdout.index("every release, per op"):]
    assert "aten::isin.Tensor_Tensor\n" in runs and "◀ target" in runs
    # and the wide terminal still gets the ops × groups table
    wide = run(str(oplist_path), "--all-releases", "--catalog", str(bundled_catalog),
               "--fail-on", "never", width="400").stdout
    assert "G1" in wide and "every release, per op" not in wide


def test_columns_80_on_a_real_terminal(bundled_catalog: Path, oplist_path: Path) -> None:
    """`COLUMNS=80 opcheck check … --all-releases` in a terminal (a pseudo-terminal here)."""
    import pty

    env = {k: v for k, v in os.environ.items() if k != "OPCHECK_WIDTH"}
    env.update(COLUMNS="80", LINES="50", OPCHECK_NO_CONFIG="1", NO_COLOR="1")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "opcheck", "check", str(oplist_path), "--all-releases",
         "--catalog", str(bundled_catalog), "--fail-on", "never"],
        stdout=follower, stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8"))
    lines = text.replace("\r\n", "\n").split("\n")
    assert any("every release, per op" in line for line in lines), text
    too_wide = [line for line in lines if len(URL.sub("", line)) > 80]
    assert not too_wide, "\n".join(too_wide)


def test_an_op_only_entries_name_is_still_found(bundled_catalog: Path) -> None:
    """torchvision::nms (MinerU's 910B fallback warning) is no ATen op, but entries name it."""
    shown = run("op", "torchvision::nms", "--catalog", str(bundled_catalog))
    assert shown.exit_code == 0, shown.output
    assert "torchvision-nms-rewrite (rewrite)" in shown.stdout
    fixes = run("fix", "torchvision::nms", "-f", "json", "--catalog", str(bundled_catalog))
    assert {"torchvision-nms-rewrite", "nms-npu-custom-kernel"} <= {
        w["id"] for w in json.loads(fixes.stdout)["workarounds"]}
