"""Sniffing identifies every model-file kind with the standard library only."""

from __future__ import annotations

import pickle
import shutil
import zipfile
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.core.errors import TraceError
from opcheck.tracers import api
from opcheck.tracers.sniff import sniff

FIX = TESTS / "fixtures" / "tracers"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("export_small.pt2", "export_pt2"),
        ("export_named.pt", "export_pt2"),  # a .pt2 named .pt is still a .pt2
        ("torchscript_small.pt", "torchscript"),
        ("module_pickled.pt", "pickled_module"),
        ("state_dict.pt", "state_dict"),
        ("checkpoint.pt", "checkpoint"),
        ("legacy_state_dict.pt", "legacy_torch"),
        ("legacy_module.pt", "legacy_torch"),
    ],
)
def test_fixture_kinds(name: str, kind: str) -> None:
    assert sniff(FIX / name).kind == kind


def test_legacy_content_is_classified() -> None:
    assert sniff(FIX / "legacy_state_dict.pt").content == "state_dict"
    assert sniff(FIX / "legacy_module.pt").content == "pickled_module"


def _onnx_bytes() -> bytes:
    # ModelProto: ir_version=8, producer_name="pytorch", opset_import{domain="ai.onnx"}
    return b"\x08\x08\x12\x07pytorch\x1a\x032.1" + b"\x42\x09\x0a\x07ai.onnx"


def test_other_kinds(tmp_path: Path) -> None:
    onnx = tmp_path / "model.bin"
    onnx.write_bytes(_onnx_bytes())
    assert sniff(onnx).kind == "onnx"
    ol = tmp_path / "ops.json"
    ol.write_text('{"kind": "opcheck.oplist", "schema_version": 1, "method": "log", "ops": []}')
    assert sniff(ol).kind == "oplist_json"
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    assert sniff(txt).kind == "unknown"
    raw = tmp_path / "obj.pkl"
    raw.write_bytes(pickle.dumps({"a": 1}))
    assert sniff(raw).kind == "unknown"
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    assert sniff(empty).kind == "corrupt"


def test_truncated_and_crc_damaged_archives(tmp_path: Path) -> None:
    data = (FIX / "export_small.pt2").read_bytes()
    cut = tmp_path / "cut.pt2"
    cut.write_bytes(data[: len(data) // 2])
    assert sniff(cut).kind == "corrupt"
    # flip bytes inside a stored member: the CRC check must catch it
    bad = tmp_path / "bad.pt2"
    shutil.copy(FIX / "export_small.pt2", bad)
    with zipfile.ZipFile(bad) as zf:
        info = next(i for i in zf.infolist() if i.filename.endswith("models/model.json"))
    raw = bytearray(bad.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 100
    raw[start : start + 4] = b"ZZZZ"
    bad.write_bytes(bytes(raw))
    s = sniff(bad)
    assert s.kind == "corrupt" and "CRC" in s.detail
    trunc_pickle = tmp_path / "t.pkl"
    trunc_pickle.write_bytes(pickle.dumps(list(range(1000)))[:50])
    assert sniff(trunc_pickle).kind == "corrupt"
    legacy = (FIX / "legacy_state_dict.pt").read_bytes()
    tl = tmp_path / "legacy_cut.pt"
    tl.write_bytes(legacy[:40])
    assert sniff(tl).kind == "corrupt"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("state_dict.pt", ["state_dict", "no graph", "--model", ".pt2"]),
        ("checkpoint.pt", ["checkpoint", "--model"]),
        ("legacy_state_dict.pt", ["legacy", "state_dict", "--model"]),
        ("module_pickled.pt", ["pickled nn.Module", "--trust"]),
    ],
)
def test_untraceable_files_get_one_line_errors(name: str, words: list[str]) -> None:
    with pytest.raises(TraceError) as err:
        api.trace(FIX / name)
    msg = str(err.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_onnx_and_corrupt_errors(tmp_path: Path) -> None:
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(_onnx_bytes())
    with pytest.raises(TraceError, match="ONNX models are not supported yet"):
        api.trace(onnx)
    cut = tmp_path / "cut.pt2"
    cut.write_bytes((FIX / "export_small.pt2").read_bytes()[:500])
    with pytest.raises(TraceError, match="damaged"):
        api.trace(cut)
    with pytest.raises(TraceError, match="no such file"):
        api.trace(tmp_path / "missing.pt")


def _zeros_zip(path: Path, entries: int, mib: int) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("m/archive_format", "pt2")
        z.writestr("m/models/model.json", "{}")
        for i in range(entries):
            z.writestr(f"m/data/w{i}", b"\0" * (mib << 20))


def test_a_decompression_bomb_is_refused_without_expanding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32: the type check decompressed every entry of a 1 MB zip declaring 20 GiB."""
    from opcheck.tracers import sniff as sniff_mod

    bomb = tmp_path / "bomb.pt2"
    _zeros_zip(bomb, 8, 2)  # 16 MiB of zeros in ~16 kB
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def counting_open(self: zipfile.ZipFile, name: object, *a: object, **k: object) -> object:
        opened.append(str(getattr(name, "filename", name)))
        return real_open(self, name, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "open", counting_open)
    monkeypatch.setattr(sniff_mod, "CRC_BYTES_BUDGET", 1 << 20)
    # One deflate layer stops near 1:1032; real bombs overlap entries to reach 1:20,000. A
    # lower ratio makes this small archive one without building the overlap by hand.
    monkeypatch.setattr(sniff_mod, "MAX_RATIO", 500)
    got = sniff(bomb)
    assert got.kind == "corrupt" and "decompression bomb" in got.detail
    assert opened == []  # refused from the directory alone
    with pytest.raises(TraceError, match="decompression bomb"):
        api.trace(bomb)
    # Within the ratio a model may have, the CRC check stops at its byte budget.
    monkeypatch.setattr(sniff_mod, "MAX_RATIO", 10**9)
    assert sniff(bomb).kind == "export_pt2"
    assert not any(n.startswith("m/data/") for n in opened)  # 2 MiB entries exceed the 1 MiB budget
