"""Identify a model file with the standard library only, before anything is unpickled.

Model files are untrusted: ``torch.load``, ``torch.jit.load`` and ``torch.export.load`` can all
run attacker code. This module decides what a file is from magic bytes, zip member names, CRCs
and a *static* walk over pickle opcodes (``pickletools.genops`` never executes anything), so the
caller can pick a safe path or refuse with a useful one-line message.
"""

from __future__ import annotations

import io
import pickletools
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from opcheck.core import jsonio

Kind = Literal[
    "export_pt2", "torchscript", "pickled_module", "state_dict", "checkpoint",
    "legacy_torch", "onnx", "oplist_json", "unknown", "corrupt",
]  # fmt: skip

# torch.save's legacy (pre-1.6) format starts with a pickled LONG magic number.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_HEAD = b"\x80\x02\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little")
# Archives up to this size get every member CRC-checked; bigger ones only the members we read.
FULL_CRC_LIMIT = 256 * 1024 * 1024
# What checking CRCs may cost, whatever the archive declares: a 1 MB zip can expand to 20 GiB.
CRC_BYTES_BUDGET = 512 * 1024 * 1024
CRC_ENTRY_BUDGET = 20_000
CRC_SECONDS_BUDGET = 3.0
# Deflate reaches about 1:1032 at best; a higher overall ratio is a bomb, not a model.
MAX_RATIO = 1100
# Pickles bigger than this are not scanned completely (state dicts keep tensor data outside).
PICKLE_SCAN_LIMIT = 64 * 1024 * 1024

# What zipfile raises on a damaged archive besides BadZipFile: short reads, undecodable member
# names (UnicodeDecodeError), flag bits it does not implement, "encrypted" members, bad deflate.
ZIP_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, NotImplementedError,
    RuntimeError, zlib.error,
)  # fmt: skip

# Globals that weights-only loading accepts: tensors, storages and plain containers.
_SAFE_PREFIXES = ("torch._utils._rebuild_", "torch._tensor._rebuild_")
_SAFE_GLOBALS = frozenset(
    {
        "collections.OrderedDict", "builtins.set", "__builtin__.set", "builtins.frozenset", "builtins.slice",
        "builtins.complex", "builtins.bytearray", "torch.Size", "torch.device",
        "torch.storage.UntypedStorage", "torch.storage.TypedStorage", "_codecs.encode",
        "torch.nn.parameter.Parameter", "torch._utils._rebuild_parameter",
        "torch.serialization._get_layout",
    }
)  # fmt: skip
_CHECKPOINT_KEYS = frozenset(
    {
        "state_dict", "model_state_dict", "model_state", "model", "net", "module",
        "optimizer", "optimizer_state_dict", "optim", "scheduler", "lr_scheduler",
        "epoch", "global_step", "step", "iteration", "ema", "best_acc", "args", "config",
    }
)  # fmt: skip

_HINTS: dict[str, str] = {
    "state_dict": (
        "a state_dict holds weights but no graph: give the model code "
        "(--model pkg.module:Class or file.py:factory with --input-shape) or a torch.export .pt2"
    ),
    "checkpoint": (
        "a training checkpoint holds weights but no graph: give the model code "
        "(--model pkg.module:Class or file.py:factory with --input-shape) or a torch.export .pt2"
    ),
    "onnx": (
        "ONNX models are not supported yet: trace the PyTorch model instead "
        "(--model pkg.module:Class, or a torch.export .pt2)"
    ),
    "unknown": (
        "expected a torch.export .pt2, a TorchScript archive, a torch.save'd nn.Module, "
        "an opcheck op list (.json), or --model pkg.module:Class"
    ),
    "corrupt": "the file is damaged: re-export or re-download it",
    "pickled_module": (
        "loading a pickled nn.Module runs arbitrary code: pass --trust to load it in the sandbox, "
        "or hand over a torch.export .pt2 or the model code (--model)"
    ),
}


@dataclass
class Sniffed:
    kind: Kind
    detail: str
    path: str = ""
    prefix: str = ""  # the archive's top directory inside a zip ("" when not a zip)
    globals: list[str] = field(default_factory=list)  # non-tensor classes a pickle references
    content: str = ""  # for legacy_torch: what the pickle holds (state_dict, pickled_module...)

    @property
    def hint(self) -> str:
        return _HINTS.get(self.content or self.kind, "")

    def message(self) -> str:
        """One line: what the file is and, when it cannot be traced, what to give instead."""
        head = f"{self.path}: {self.detail}" if self.path else self.detail
        return f"{head}; {self.hint}" if self.hint else head


@dataclass
class PickleScan:
    globals: list[str]
    strings: set[str]
    has_tensors: bool
    complete: bool


def scan_pickle(data: bytes, start: int = 0) -> tuple[PickleScan, int]:
    """Walk one pickle's opcodes statically; return what it references and where it ends.

    Raises ValueError on a truncated or malformed pickle.
    """
    stream = io.BytesIO(data)
    stream.seek(start)
    found: list[str] = []
    strings: set[str] = set()
    recent: list[str] = []  # last pushed strings, for STACK_GLOBAL's module/name operands
    memo: dict[int, str] = {}
    has_tensors = False
    end = start
    try:
        for op, arg, pos in pickletools.genops(stream):
            end = (pos or 0) + 1
            name = op.name
            if name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8",
                        "SHORT_BINSTRING", "BINSTRING", "STRING"):  # fmt: skip
                s = arg if isinstance(arg, str) else str(arg)
                recent = [*recent[-1:], s]
                if len(s) <= 64:
                    strings.add(s)
            elif name in ("BINGET", "LONG_BINGET", "GET"):
                if isinstance(arg, int) and arg in memo:
                    recent = [*recent[-1:], memo[arg]]
            elif name in ("BINPUT", "LONG_BINPUT", "PUT") and recent:
                if isinstance(arg, int):
                    memo[arg] = recent[-1]
            elif name == "MEMOIZE" and recent:
                memo[len(memo)] = recent[-1]
            elif name in ("GLOBAL", "INST"):
                mod, _, qual = str(arg).partition(" ")
                found.append(f"{mod}.{qual}")
            elif name == "STACK_GLOBAL" and len(recent) == 2:
                found.append(f"{recent[0]}.{recent[1]}")
            if name == "STOP":
                break
    except ValueError:
        raise
    except Exception as exc:  # genops raises various errors on garbage
        raise ValueError(str(exc)) from None
    unsafe: list[str] = []
    for g in found:
        if g.startswith(_SAFE_PREFIXES) or g in _SAFE_GLOBALS:
            has_tensors = has_tensors or "_rebuild_" in g
            continue
        if g.startswith("torch.") and g.endswith("Storage"):
            has_tensors = True
            continue
        if g.startswith("torch.") and g.count(".") == 1 and g.split(".")[1] in _DTYPE_NAMES:
            continue
        if g not in unsafe:
            unsafe.append(g)
    return PickleScan(unsafe, strings, has_tensors, True), end


_DTYPE_NAMES = frozenset(
    {
        "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int64",
        "long", "int32", "int", "int16", "int8", "uint8", "bool", "complex64", "complex128",
    }
)  # fmt: skip


def _classify_pickle(scan: PickleScan) -> tuple[Kind, str]:
    if scan.globals:
        shown = ", ".join(scan.globals[:4]) + (" ..." if len(scan.globals) > 4 else "")
        modules = [g for g in scan.globals if ".nn.modules." in g or g.startswith("__main__.")]
        what = (
            "a pickled nn.Module" if modules or scan.has_tensors else "a pickle of Python objects"
        )
        return "pickled_module", f"{what} (references {shown})"
    if scan.strings & _CHECKPOINT_KEYS:
        keys = sorted(scan.strings & _CHECKPOINT_KEYS)[:4]
        return "checkpoint", f"a training checkpoint dict (keys include {', '.join(keys)})"
    if scan.has_tensors:
        return "state_dict", "a state_dict (tensors only, no graph)"
    return "unknown", "a torch.save'd object without tensors or model classes"


def sniff(path: str | Path) -> Sniffed:
    """What ``path`` is. Never raises for bad content: damaged files are ``corrupt``."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(64)
        size = p.stat().st_size
    except OSError as exc:
        return Sniffed("corrupt", f"cannot read file ({exc.strerror})", str(p))
    if size == 0:
        return Sniffed("corrupt", "empty file", str(p))
    if head.startswith(b"PK"):
        return _sniff_zip(p, size)
    if head.startswith(_LEGACY_HEAD):
        return _sniff_legacy(p, size)
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        data = _read_capped(p, PICKLE_SCAN_LIMIT)
        try:
            scan, _ = scan_pickle(data)
        except ValueError as exc:
            return Sniffed("corrupt", f"truncated or damaged pickle ({exc})", str(p))
        kind, detail = _classify_pickle(scan)
        return Sniffed(kind, "plain pickle: " + detail, str(p), globals=scan.globals)
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return _sniff_json(p)
    if p.suffix.lower() == ".onnx" or _looks_like_onnx(p, head):
        return Sniffed("onnx", "an ONNX model", str(p))
    return Sniffed("unknown", "not a recognised model file", str(p))


def _read_capped(p: Path, limit: int) -> bytes:
    with p.open("rb") as fh:
        return fh.read(limit)


def _looks_like_onnx(p: Path, head: bytes) -> bool:
    # ModelProto starts with field 1 (ir_version, varint): tag byte 0x08 and a small version;
    # the producer/domain strings follow within the first few hundred bytes.
    if len(head) < 2 or head[0] != 0x08 or head[1] > 20:
        return False
    first = _read_capped(p, 4096)
    return b"onnx" in first.lower() or b"pytorch" in first.lower()


def _sniff_json(p: Path) -> Sniffed:
    try:
        with p.open("rb") as fh:
            doc: Any = jsonio.loads(fh.read(256 * 1024 * 1024))
    except jsonio.JsonInputError as exc:
        return Sniffed("unknown", f"JSON-like but not valid JSON ({exc})", str(p))
    if isinstance(doc, dict) and doc.get("kind") == "opcheck.oplist":
        return Sniffed("oplist_json", "an opcheck op list", str(p))
    return Sniffed("unknown", "a JSON file that is not an opcheck op list", str(p))


def _sniff_zip(p: Path, size: int) -> Sniffed:
    try:
        zf = zipfile.ZipFile(p)
    except zipfile.BadZipFile as exc:
        return Sniffed("corrupt", f"truncated or damaged zip archive ({exc})", str(p))
    except OSError as exc:
        return Sniffed("corrupt", f"cannot read zip archive ({exc})", str(p))
    except ZIP_ERRORS as exc:
        return Sniffed("corrupt", f"damaged zip archive ({exc})", str(p))
    with zf:
        names = zf.namelist()
        if not names:
            return Sniffed("corrupt", "empty zip archive", str(p))
        prefix = names[0].split("/", 1)[0] + "/" if "/" in names[0] else ""
        rel = {n[len(prefix) :] if n.startswith(prefix) else n for n in names}
        bomb = _bomb(zf.infolist(), size)
        if bomb:
            return Sniffed("corrupt", bomb, str(p), prefix)
        try:
            bad = _bounded_testzip(zf) if size <= FULL_CRC_LIMIT else None
        except ZIP_ERRORS as exc:
            return Sniffed("corrupt", f"damaged zip archive ({exc})", str(p), prefix)
        if bad is not None:
            return Sniffed("corrupt", f"damaged zip archive (bad CRC in {bad!r})", str(p), prefix)
        try:
            return _classify_zip(zf, p, prefix, rel)
        except ZIP_ERRORS as exc:
            return Sniffed("corrupt", f"damaged zip archive ({exc})", str(p), prefix)


def _bomb(infos: list[zipfile.ZipInfo], size: int) -> str:
    declared = sum(i.file_size for i in infos)
    if declared > CRC_BYTES_BUDGET and declared > MAX_RATIO * max(size, 1):
        return (f"a zip archive of {size:,} bytes declaring {declared:,} bytes uncompressed "
                f"({len(infos):,} entries): a decompression bomb, not a model; not opened")
    return ""


def _bounded_testzip(zf: zipfile.ZipFile) -> str | None:
    """``ZipFile.testzip`` within a byte, entry and time budget: the first entry whose CRC
    fails, else None (entries past the budget are not checked: a CRC is only a hint)."""
    deadline = time.monotonic() + CRC_SECONDS_BUDGET
    left = CRC_BYTES_BUDGET
    for n, info in enumerate(zf.infolist()):
        if n >= CRC_ENTRY_BUDGET or info.file_size > left or time.monotonic() > deadline:
            return None
        left -= info.file_size
        try:
            with zf.open(info) as fh:
                while fh.read(1 << 20):
                    if time.monotonic() > deadline:
                        return None
        except zipfile.BadZipFile:
            return info.filename
    return None


def _read_member(zf: zipfile.ZipFile, name: str, limit: int = 4096) -> bytes:
    with zf.open(name) as fh:
        return fh.read(limit)


def _classify_zip(zf: zipfile.ZipFile, p: Path, prefix: str, rel: set[str]) -> Sniffed:
    if "archive_format" in rel or any(r.startswith("models/") and r.endswith(".json") for r in rel):
        fmt = (
            _read_member(zf, prefix + "archive_format").decode(errors="replace").strip()
            if ("archive_format" in rel)
            else "pt2"
        )
        if any(r.startswith("data/aotinductor/") for r in rel) and not any(
            r.startswith("models/") for r in rel
        ):
            return Sniffed(
                "unknown",
                "an AOTInductor compiled package (no exported graph to list); "
                "give the torch.export .pt2 or the model code",
                str(p),
                prefix,
            )
        return Sniffed("export_pt2", f"a torch.export archive (format {fmt})", str(p), prefix)
    if "serialized_exported_program.json" in rel:
        return Sniffed("export_pt2", "a torch.export archive (torch<2.5 layout)", str(p), prefix)
    if any(r.startswith("code/") for r in rel) and "data.pkl" in rel:
        return Sniffed("torchscript", "a TorchScript archive", str(p), prefix)
    if "data.pkl" in rel:
        info = zf.getinfo(prefix + "data.pkl")
        if info.file_size > PICKLE_SCAN_LIMIT:
            return Sniffed(
                "pickled_module", "a torch.save'd object too big to inspect", str(p), prefix
            )
        try:
            scan, _ = scan_pickle(zf.read(prefix + "data.pkl"))
        except ValueError as exc:
            return Sniffed("corrupt", f"damaged data.pkl in torch archive ({exc})", str(p), prefix)
        kind, detail = _classify_pickle(scan)
        return Sniffed(kind, "torch.save archive: " + detail, str(p), prefix, scan.globals)
    if any(r.endswith(".onnx") for r in rel):
        return Sniffed("onnx", "a zip holding ONNX models", str(p), prefix)
    return Sniffed("unknown", "a zip archive that is not a PyTorch model", str(p), prefix)


def _sniff_legacy(p: Path, size: int) -> Sniffed:
    data = _read_capped(p, PICKLE_SCAN_LIMIT)
    pos = 0
    scans: list[PickleScan] = []
    try:
        # magic number, protocol version, sys_info, then the object itself
        for _ in range(4):
            scan, pos = scan_pickle(data, pos)
            scans.append(scan)
    except ValueError as exc:
        return Sniffed("corrupt", f"truncated legacy torch file ({exc})", str(p))
    kind, detail = _classify_pickle(scans[3])
    return Sniffed(
        "legacy_torch",
        f"a legacy (pre-1.6) torch.save file: {detail}",
        str(p),
        globals=scans[3].globals,
        content=kind,
    )
