"""Model files are untrusted code: nothing in them runs without --trust.

Each malicious file's payload creates a marker file. Without --trust the marker must not exist;
with --trust (which runs the loader in the sandbox) it does, proving the file really is
malicious and that --trust is the only gate.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.core.errors import TraceError
from opcheck.tracers import api
from opcheck.tracers.sniff import sniff

FIX = TESTS / "fixtures" / "tracers"


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))


def _torch_zip(member_pickle: bytes) -> bytes:
    """A torch.save-style zip archive whose data.pkl is the given pickle."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", member_pickle)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/version", "3\n")
    return buf.getvalue()


def _evil_pt2(tmp_path: Path, marker: Path) -> Path:
    """The real export fixture with its sample inputs replaced by a malicious torch.save file."""
    out = tmp_path / "evil.pt2"
    payload = _torch_zip(pickle.dumps(((_Payload(marker),), {}), protocol=2))
    with zipfile.ZipFile(FIX / "export_small.pt2") as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("data/sample_inputs/model.pt"):
                data = payload
            dst.writestr(info, data)
    return out


def test_malicious_pickle_never_loads_without_trust(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "model.pt"
    evil.write_bytes(_torch_zip(pickle.dumps(_Payload(marker), protocol=2)))
    raw = tmp_path / "model.pkl"
    raw.write_bytes(pickle.dumps(_Payload(marker), protocol=4))
    for f in (evil, raw):
        s = sniff(f)
        assert s.kind == "pickled_module"
        assert any("open" in g for g in s.globals)
        with pytest.raises(TraceError, match="--trust"):
            api.trace(f)
        with pytest.raises(TraceError):
            api.trace(f, static_only=True)
    assert not marker.exists()


def test_malicious_pickle_runs_only_in_the_sandbox_with_trust(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "model.pt"
    evil.write_bytes(_torch_zip(pickle.dumps(_Payload(marker), protocol=2)))
    with pytest.raises(TraceError, match=r"not an nn\.Module"):
        api.trace(evil, trust=True, timeout=120)
    assert marker.exists()  # the payload is real: only --trust let it run


def test_malicious_pt2_sample_inputs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = _evil_pt2(tmp_path, marker)
    assert sniff(evil).kind == "export_pt2"
    ol = api.trace(evil)  # static listing: JSON only
    assert ol.method == "static-export"
    assert "aten::linear" in ol.by_op()
    assert not marker.exists()
    # torch.export.load falls back to an unsafe unpickle of the sample inputs: --trust runs it
    api.trace(evil, trust=True, timeout=120)
    assert marker.exists()
