from __future__ import annotations

import hashlib
import subprocess
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.releases import parse_releases_tsv
from opcheck.sync import http_source, pip_source, sources
from opcheck.sync.http_source import HttpSource
from opcheck.sync.pip_source import PipWheelSource
from opcheck.sync.sources import ChainSource, MirrorSource, SavingSource

OP_YAML = "github/Ascend/op-plugin/7.2.0/op_plugin/config/op_plugin_functions.yaml"
RAW = "https://raw.githubusercontent.com/Ascend/op-plugin/7.2.0/op_plugin/config/op_plugin_functions.yaml"


# --- mirror ---------------------------------------------------------------------------------


def _mirror(tmp_path: Path) -> Path:
    f = tmp_path / OP_YAML
    f.parent.mkdir(parents=True)
    f.write_text("all_version: [v2.1]\n", encoding="utf-8")
    digest = hashlib.sha256(b"all_version: [v2.1]\n").hexdigest()
    (tmp_path / "MANIFEST.tsv").write_text(
        f"path\trepo\tref\tcommit\tsha256\n{OP_YAML}\tAscend/op-plugin\t7.2.0\tabc123\t{digest}\n",
        encoding="utf-8",
    )
    return tmp_path


def test_mirror_fetch(tmp_path: Path) -> None:
    src = MirrorSource(_mirror(tmp_path))
    got = src.fetch(OP_YAML)
    assert got.text == "all_version: [v2.1]\n"
    assert got.origin.path == OP_YAML and got.origin.url == ""
    assert got.origin.ref == "7.2.0" and got.origin.commit == "abc123"
    assert got.origin.sha256 == hashlib.sha256(b"all_version: [v2.1]\n").hexdigest()
    assert src.exists(OP_YAML) and not src.exists("github/x/y/z/w.yaml")
    assert src.list_dir("github/Ascend/op-plugin") == ["7.2.0"]


def test_mirror_missing_file_names_path_and_mirror(tmp_path: Path) -> None:
    src = MirrorSource(_mirror(tmp_path))
    with pytest.raises(ScrapeError) as e:
        src.fetch("github/Ascend/op-plugin/9.9.9/op_plugin/config/op_plugin_functions.yaml")
    msg = str(e.value)
    assert msg.startswith("github/Ascend/op-plugin/9.9.9/") and str(tmp_path) in msg
    assert "\n" not in msg


def test_mirror_rejects_non_utf8_and_escaping_paths(tmp_path: Path) -> None:
    root = _mirror(tmp_path)
    (root / "bad.md").write_bytes(b"caf\xe9\n")
    src = MirrorSource(root)
    with pytest.raises(ScrapeError, match=r"bad\.md: not UTF-8 text \(byte 3\)"):
        src.fetch("bad.md")
    with pytest.raises(ScrapeError, match="not a mirror-relative path"):
        src.fetch("../etc/passwd")
    with pytest.raises(ScrapeError, match="directory not in mirror"):
        src.list_dir("github/nope")


@pytest.mark.upstream
def test_mirror_on_real_snapshot(upstream: Path) -> None:
    src = MirrorSource(upstream)
    got = src.fetch("github/Ascend/pytorch/master/COMPATIBILITY.md")
    # MANIFEST.tsv records the commit of every github/ file
    assert len(got.origin.commit) == 40
    assert "v2.1.0-7.2.0" in src.list_dir("github/Ascend/pytorch")
    assert src.fetch("releases.tsv").text.startswith("tag\ttrain\t")


# --- HTTP -----------------------------------------------------------------------------------


class Server:
    """A scripted MockTransport: each URL answers from a queue, the last answer repeats."""

    def __init__(self, script: dict[str, list[httpx.Response | Exception]]) -> None:
        self.script = script
        self.calls: list[httpx.Request] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.calls.append(req)
        queue = self.script.get(str(req.url))
        if not queue:
            return httpx.Response(404)
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item


def _http(
    server: Server, tmp_path: Path | None = None, **kw: object
) -> tuple[HttpSource, list[float]]:
    sleeps: list[float] = []
    src = HttpSource(
        transport=httpx.MockTransport(server),
        cache_dir=tmp_path,
        sleep=sleeps.append,
        **kw,  # type: ignore[arg-type]
    )
    return src, sleeps


def test_http_urls() -> None:
    assert HttpSource().url_for(OP_YAML) == RAW
    assert (
        HttpSource(host="gitcode").url_for(OP_YAML)
        == "https://gitcode.com/Ascend/op-plugin/raw/7.2.0/op_plugin/config/op_plugin_functions.yaml"
    )
    with pytest.raises(ScrapeError, match="unknown host"):
        HttpSource(host="example")


def test_http_fetch_ok(tmp_path: Path) -> None:
    server = Server({RAW: [httpx.Response(200, content=b"all_version: [v2.1]\n")]})
    src, _ = _http(server, tmp_path)
    got = src.fetch(OP_YAML)
    assert got.text == "all_version: [v2.1]\n"
    assert got.origin.url == RAW and got.origin.path == OP_YAML and got.origin.ref == "7.2.0"


def test_http_404_is_not_retried() -> None:
    server = Server({})
    src, sleeps = _http(server)
    with pytest.raises(ScrapeError) as e:
        src.fetch(OP_YAML)
    assert str(e.value) == f"{RAW}: not found (HTTP 404)"
    assert len(server.calls) == 1 and sleeps == []
    assert not src.exists(OP_YAML)


def test_http_500_then_200_retries_with_backoff() -> None:
    server = Server(
        {RAW: [httpx.Response(500), httpx.Response(503), httpx.Response(200, content=b"ok")]}
    )
    src, sleeps = _http(server, backoff=0.5)
    assert src.fetch(OP_YAML).text == "ok"
    assert len(server.calls) == 3 and sleeps == [0.5, 1.0]


def test_http_500_forever_gives_up() -> None:
    server = Server({RAW: [httpx.Response(502)]})
    src, sleeps = _http(server, retries=2)
    with pytest.raises(ScrapeError, match=r"op_plugin_functions\.yaml: HTTP 502$"):
        src.fetch(OP_YAML)
    assert len(server.calls) == 3 and len(sleeps) == 2


def test_http_timeout_retries_then_fails() -> None:
    server = Server({RAW: [httpx.ReadTimeout("slow")]})
    src, sleeps = _http(server, retries=3)
    with pytest.raises(ScrapeError) as e:
        src.fetch(OP_YAML)
    assert str(e.value) == f"{RAW}: timed out after 4 attempts"
    assert sleeps == [0.5, 1.0, 2.0]


def test_http_timeout_then_success() -> None:
    server = Server({RAW: [httpx.ConnectTimeout("slow"), httpx.Response(200, content=b"ok")]})
    src, sleeps = _http(server)
    assert src.fetch(OP_YAML).text == "ok" and sleeps == [0.5]


def test_http_truncated_body() -> None:
    server = Server({RAW: [httpx.Response(200, content=b"abc", headers={"Content-Length": "10"})]})
    src, _ = _http(server)
    with pytest.raises(ScrapeError, match=r"truncated download: 3 of 10 bytes$"):
        src.fetch(OP_YAML)


def test_http_broken_connection_is_reported_as_truncated() -> None:
    server = Server({RAW: [httpx.RemoteProtocolError("peer closed connection")]})
    src, _ = _http(server)
    with pytest.raises(ScrapeError, match="truncated or broken response"):
        src.fetch(OP_YAML)


def test_http_etag_304_serves_cached_body(tmp_path: Path) -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        if req.headers.get("If-None-Match") == '"v1"':
            return httpx.Response(304)
        return httpx.Response(200, content=b"body v1", headers={"ETag": '"v1"'})

    calls: list[httpx.Request] = []

    def recording(req: httpx.Request) -> httpx.Response:
        calls.append(req)
        return handler(req)

    first = HttpSource(transport=httpx.MockTransport(recording), cache_dir=tmp_path)
    assert first.fetch(OP_YAML).text == "body v1"
    # a new process (new source) with the same cache directory revalidates
    second = HttpSource(transport=httpx.MockTransport(recording), cache_dir=tmp_path)
    got = second.fetch(OP_YAML)
    assert got.text == "body v1"
    assert got.origin.sha256 == hashlib.sha256(b"body v1").hexdigest()
    assert "If-None-Match" not in calls[0].headers
    assert calls[1].headers["If-None-Match"] == '"v1"'


def test_http_changed_etag_replaces_cache(tmp_path: Path) -> None:
    versions = iter([(b"one", '"1"'), (b"two", '"2"')])

    def handler(req: httpx.Request) -> httpx.Response:
        body, tag = next(versions)
        return httpx.Response(200, content=body, headers={"ETag": tag})

    src = HttpSource(transport=httpx.MockTransport(handler), cache_dir=tmp_path)
    assert src.fetch(OP_YAML).text == "one"
    assert src.fetch(OP_YAML).text == "two"


def test_http_concurrency_limit() -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def handler(req: httpx.Request) -> httpx.Response:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return httpx.Response(200, content=b"x")

    src = HttpSource(transport=httpx.MockTransport(handler), max_concurrency=2)
    threads = [
        threading.Thread(target=src.fetch, args=(f"github/o/r/main/f{i}.yaml",)) for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2


def test_http_list_dir() -> None:
    api = "https://api.github.com/repos/Ascend/op-plugin/contents/op_plugin/config?ref=7.2.0"
    listing = [{"name": "op_plugin_functions.yaml"}, {"name": "derivatives.yaml"}]
    server = Server({api: [httpx.Response(200, json=listing)]})
    src, _ = _http(server)
    assert src.list_dir("github/Ascend/op-plugin/7.2.0/op_plugin/config") == [
        "derivatives.yaml",
        "op_plugin_functions.yaml",
    ]
    with pytest.raises(ScrapeError, match="listing not supported by http gitcode"):
        HttpSource(host="gitcode").list_dir("github/Ascend/op-plugin/7.2.0/op_plugin")


def test_http_releases_tsv_from_github_api() -> None:
    api = "https://api.github.com/repos/Ascend/pytorch"
    raw = "https://raw.githubusercontent.com/Ascend/pytorch"
    gitmodules = (
        '[submodule "third_party/googletest"]\n\tpath = third_party/googletest\n\tbranch = main\n'
        '[submodule "third_party/op-plugin"]\n\tpath = third_party/op-plugin\n'
        "\turl = https://gitcode.com/ascend/op-plugin.git\n\tbranch = 7.2.0\n"
    )
    server = Server(
        {
            f"{api}/tags?per_page=100&page=1": [
                httpx.Response(
                    200,
                    json=[
                        {"name": "v7.2.0-pytorch2.1.0", "commit": {"sha": "c1"}},
                        {"name": "v3.0.0-pytorch1.8.1", "commit": {"sha": "c2"}},
                        {"name": "not-a-release", "commit": {"sha": "c3"}},
                    ],
                )
            ],
            f"{raw}/v7.2.0-pytorch2.1.0/version.txt": [
                httpx.Response(200, content=b"2.1.0.post17\n")
            ],
            f"{api}/contents/third_party/op-plugin?ref=v7.2.0-pytorch2.1.0": [
                httpx.Response(200, json={"type": "submodule", "sha": "8286bfa4"})
            ],
            f"{raw}/v7.2.0-pytorch2.1.0/.gitmodules": [httpx.Response(200, text=gitmodules)],
            f"{api}/commits/c1": [
                httpx.Response(
                    200, json={"commit": {"committer": {"date": "2025-10-23T10:00:00Z"}}}
                )
            ],
            # the old tag: no version.txt, VERSION in setup.py, no submodule
            f"{raw}/v3.0.0-pytorch1.8.1/setup.py": [
                httpx.Response(200, text="VERSION = '1.8.1'\n")
            ],
            f"{api}/commits/c2": [
                httpx.Response(
                    200, json={"commit": {"committer": {"date": "2023-01-19T01:00:00Z"}}}
                )
            ],
        }
    )
    src, _ = _http(server)
    got = src.fetch("releases.tsv")
    rows = parse_releases_tsv(got.text, origin=got.origin)
    assert [
        (
            r.tag,
            r.train,
            r.torch_version,
            r.torch_npu_version,
            r.op_plugin_commit,
            r.op_plugin_branch,
            r.date,
        )
        for r in rows
    ] == [
        ("v3.0.0-pytorch1.8.1", "3.0.0", "1.8.1", "1.8.1", "", "", "2023-01-19"),
        (
            "v7.2.0-pytorch2.1.0",
            "7.2.0",
            "2.1.0",
            "2.1.0.post17",
            "8286bfa4",
            "7.2.0",
            "2025-10-23",
        ),
    ]
    with pytest.raises(
        ScrapeError, match=r"releases\.tsv cannot be built from gitcode; use a mirror"
    ):
        HttpSource(host="gitcode").fetch("releases.tsv")


def test_http_pypi_paths_need_wheels() -> None:
    with pytest.raises(ScrapeError, match="need a PipWheelSource"):
        HttpSource().fetch("pypi/torch-npu/2.6.0.post5/torch_npu/version.py")


def test_no_package_index_is_hard_coded() -> None:
    import re

    text = "".join(Path(m.__file__).read_text(encoding="utf-8")
                   for m in (sources, http_source, pip_source))
    for needle in ("--index-url", "--extra-index-url", "--find-links", "/simple"):
        assert needle not in text
    # The only hosts these modules name are the two git forges it reads raw files from.
    hosts = set(re.findall(r"https?://([A-Za-z0-9.-]+)", text))
    assert hosts <= {"raw.githubusercontent.com", "gitcode.com", "api.github.com"}, hosts


# --- pip wheel ------------------------------------------------------------------------------

CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"


def _wheel_bytes(version: str, requires: str = "Requires-Dist: torch==2.6.0+cpu") -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(CODEGEN, "official:\n  - func: abs\n    impl_ns: op_api\n")
        z.writestr(
            "torch_npu/version.py", f"__version__ = '{version}'\ngit_version = 'deadbeef01'\n"
        )
        z.writestr(
            f"torch_npu-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {version}\n{requires}\n"
            "Requires-Dist: torch-something>=1\nRequires-Dist: numpy\n\nRequires-Dist: torch (==9)\n",
        )
    return buf.getvalue()


class FakePip:
    def __init__(self, *, fail_first: int = 0, fail_all: bool = False) -> None:
        self.cmds: list[list[str]] = []
        self.fail_first = fail_first
        self.fail_all = fail_all

    def __call__(self, cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
        cmd = list(cmd)
        self.cmds.append(cmd)
        if self.fail_all or len(self.cmds) <= self.fail_first:
            return subprocess.CompletedProcess(
                cmd, 1, "", "ERROR: No matching distribution found for torch-npu==X\n"
            )
        spec = cmd[-1]
        version = spec.split("==", 1)[1]
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / f"torch_npu-{version}-cp311-cp311-manylinux_2_17_aarch64.whl").write_bytes(
            _wheel_bytes(version)
        )
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_wheel_fetch_reads_members(tmp_path: Path) -> None:
    pip = FakePip()
    src = PipWheelSource(tmp_path, runner=pip)
    got = src.fetch(f"pypi/torch-npu/2.6.0.post5/{CODEGEN}")
    assert got.text.startswith("official:")
    assert got.origin.path == f"pypi/torch-npu/2.6.0.post5/{CODEGEN}"
    assert got.origin.ref == "2.6.0.post5" and len(got.origin.sha256) == 64
    cmd = pip.cmds[0]
    assert cmd[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in cmd and "--only-binary=:all:" in cmd
    assert cmd[cmd.index("--platform") + 1] == "manylinux2014_aarch64"
    assert cmd[-1] == "torch-npu==2.6.0.post5"
    assert not any("http" in c or "index" in c for c in cmd)
    # the wheel is cached: a second member costs no second download
    assert (
        "git_version = 'deadbeef01'"
        in src.fetch("pypi/torch-npu/2.6.0.post5/torch_npu/version.py").text
    )
    assert len(pip.cmds) == 1
    assert src.exists(f"pypi/torch-npu/2.6.0.post5/{CODEGEN}")
    assert not src.exists("pypi/torch-npu/2.6.0.post5/nope.txt")
    assert src.list_dir("pypi/torch-npu/2.6.0.post5/torch_npu") == ["csrc", "version.py"]


def test_wheel_facts_from_metadata(tmp_path: Path) -> None:
    src = PipWheelSource(tmp_path, runner=FakePip())
    text = src.fetch("pypi/torch-npu/2.6.0.post5/WHEEL-FACTS.txt").text
    # only the header block's Version and torch lines (not torch-something, not the body)
    assert text == "Version: 2.6.0.post5\nRequires-Dist: torch==2.6.0+cpu\n"
    facts = src.wheel_facts("2.6.0.post5")
    assert (
        facts.torch_npu_version,
        facts.torch_requirement,
        facts.torch_version,
        facts.git_commit,
    ) == (
        "2.6.0.post5",
        "==2.6.0+cpu",
        "2.6.0",
        "deadbeef01",
    )


def test_wheel_falls_back_to_other_platform_or_python(tmp_path: Path) -> None:
    pip = FakePip(fail_first=2)
    src = PipWheelSource(tmp_path, runner=pip, python_versions=("3.11", "3.10"))
    src.fetch(f"pypi/torch-npu/2.1.0.post17/{CODEGEN}")
    tried = [(c[c.index("--platform") + 1], c[c.index("--python-version") + 1]) for c in pip.cmds]
    assert tried == [
        ("manylinux2014_aarch64", "3.11"),
        ("manylinux2014_aarch64", "3.10"),
        ("manylinux2014_x86_64", "3.11"),
    ]


def test_wheel_errors(tmp_path: Path) -> None:
    src = PipWheelSource(tmp_path, runner=FakePip(fail_all=True), python_versions=("3.11",))
    with pytest.raises(ScrapeError) as e:
        src.fetch(f"pypi/torch-npu/9.9.9/{CODEGEN}")
    assert str(e.value) == (
        "pypi/torch-npu/9.9.9: pip download torch-npu==9.9.9 failed: "
        "ERROR: No matching distribution found for torch-npu==X"
    )
    ok = PipWheelSource(tmp_path / "ok", runner=FakePip())
    with pytest.raises(
        ScrapeError, match=r"no member torch_npu/missing\.yaml in torch_npu-2\.6\.0"
    ):
        ok.fetch("pypi/torch-npu/2.6.0/torch_npu/missing.yaml")
    with pytest.raises(ScrapeError, match="not a pypi/torch-npu/<version>/<member> path"):
        ok.fetch("pypi/torch/2.6.0/x")


def test_http_delegates_pypi_to_wheels(tmp_path: Path) -> None:
    src = HttpSource(
        transport=httpx.MockTransport(Server({})), wheels=PipWheelSource(tmp_path, runner=FakePip())
    )
    assert src.fetch(f"pypi/torch-npu/2.6.0.post5/{CODEGEN}").text.startswith("official:")


# --- wrappers -------------------------------------------------------------------------------


def test_saving_source_writes_mirror_layout(tmp_path: Path) -> None:
    server = Server({RAW: [httpx.Response(200, content="名称: ä\n".encode())]})
    http, _ = _http(server)
    dest = tmp_path / "saved"
    saving = SavingSource(http, dest)
    got = saving.fetch(OP_YAML)
    again = MirrorSource(dest).fetch(OP_YAML)
    assert again.text == got.text == "名称: ä\n"
    assert again.origin.sha256 == got.origin.sha256


def test_chain_source_falls_back(tmp_path: Path) -> None:
    server = Server({RAW: [httpx.Response(200, content=b"from http")]})
    http, _ = _http(server)
    empty = MirrorSource(tmp_path)
    chain = ChainSource(empty, http)
    assert chain.fetch(OP_YAML).text == "from http"
    with pytest.raises(ScrapeError) as e:
        chain.fetch("github/o/r/main/missing.yaml")
    assert "file not in mirror" in str(e.value) and "HTTP 404" in str(e.value)
    assert chain.name.startswith("mirror ") and chain.name.endswith("http github")
