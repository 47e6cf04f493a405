"""torch_npu's HCCL process group: what each c10d collective does on the NPU, read from its own
sources at a release tag.

Four files, one reader each (picked by the file name):

- ``torch_npu/csrc/distributed/ProcessGroupHCCL.cpp``: one ``collective`` row per
  ``ProcessGroupHCCL::<method>`` returning a ``Work`` (the c10d op it serves), and inside each
  body: ``checks_dtype`` (calls ``checkSupportedDataType``: only the types of the
  ``dtype_checked`` set pass), ``refused`` (``ProcessGroupHCCL does not support …``, with the
  ``if`` condition that guards it), ``avg_divide`` (``ReduceOp.AVG`` summed then divided by the
  group size), ``bool_cast`` (bool/uint8 sent as int32), ``zero_dim`` (alltoall's scalar-tensor
  check), ``uneven`` (split sizes go to ``HcclAlltoAllV``), ``calls`` (the HCCL functions the
  body calls). Outside the bodies: the ``reduce_op`` map (native, refused, AVG's handling; a
  reduce op neither mapped nor refused falls to ``std::map::operator[]``'s zero,
  HCCL_REDUCE_SUM: ``unchecked``), the ``dtype_checked`` set and, in older trees, the
  ``dtype_map``.
- ``torch_npu/csrc/distributed/HCCLUtils.cpp``: the ``dtype_map`` (ScalarType → HcclDataType;
  a dtype outside it raises "Unsupported data type for HCCL process group").
- ``torch_npu/csrc/distributed/HcclCompile.h``: the ``symbol`` rows, HCCL functions looked up
  in ``libhccl`` at run time (a CANN without one fails only when a collective needs it).
- ``torch_npu/distributed/hccl_dtype_wraper.py`` (5.0-era trees): the ``dtype_wrap`` rows,
  one per wrapped API and dtype (``WRAP_DTYPE_DICT``: int64 sent as int32, float64 as
  float32 ... around ``all_reduce`` and ``reduce``).
- ``torch_npu/distributed/distributed_c10d.py``: the ``py_impl`` rows (torch_npu's own
  ``_gather``, ``_gather_object``, ``_batch_isend_irecv`` …, replacing torch's) and the
  ``emulated`` rows (``warnings.warn`` in them: "HCCL doesn't support gather at the moment.
  Implemented with allgather instead.", with the ``if`` condition that leads there).

Strict: a file of a known name without the construct it is read for raises a
:class:`ScrapeError` naming the file (and the line where one is known).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.cpp_text import string_literals
from opcheck.scrapers.rows import Origin

COLLECTIVE, CHECKS_DTYPE, REFUSED, AVG_DIVIDE = "collective", "checks_dtype", "refused", "avg_divide"
BOOL_CAST, ZERO_DIM, UNEVEN, CALLS = "bool_cast", "zero_dim", "uneven", "calls"
REDUCE_OP, DTYPE_CHECKED, DTYPE_MAP, SYMBOL = "reduce_op", "dtype_checked", "dtype_map", "symbol"
PY_IMPL, EMULATED, DTYPE_WRAP = "py_impl", "emulated", "dtype_wrap"
KINDS = (COLLECTIVE, CHECKS_DTYPE, REFUSED, AVG_DIVIDE, BOOL_CAST, ZERO_DIM, UNEVEN, CALLS,
         REDUCE_OP, DTYPE_CHECKED, DTYPE_MAP, SYMBOL, PY_IMPL, EMULATED, DTYPE_WRAP)  # fmt: skip

# the files read, relative to the tag's root (C++ first: the sync reads them in this order)
CPP_FILES = (
    "torch_npu/csrc/distributed/ProcessGroupHCCL.cpp",
    "torch_npu/csrc/distributed/HCCLUtils.cpp",
    "torch_npu/csrc/distributed/HcclCompile.h",
)
PY_FILES = ("torch_npu/distributed/distributed_c10d.py",
            "torch_npu/distributed/hccl_dtype_wraper.py")  # (sic: upstream's spelling)
FILES = CPP_FILES + PY_FILES
MAX_TEXT = 240

# reduce-op handling (REDUCE_OP rows' value)
NATIVE, REFUSED_OP, SUM_THEN_DIVIDE, UNCHECKED = "native", "refused", "sum_then_divide", "unchecked"
REDUCE_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM", "BAND", "BOR", "BXOR")

# at::ScalarType spellings → torch dtype names
_SCALAR = {
    "kByte": "uint8", "kChar": "int8", "kShort": "int16", "kInt": "int32", "kLong": "int64",
    "kHalf": "float16", "kFloat": "float32", "kDouble": "float64", "kBool": "bool",
    "kBFloat16": "bfloat16", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
    "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2",
    "kComplexFloat": "complex64", "kComplexDouble": "complex128",
}  # fmt: skip


@dataclass(frozen=True)
class HcclRow:
    kind: str  # one of KINDS
    subject: str  # the method / Python function / dtype / reduce op / symbol the row is about
    value: str  # kind-specific: HCCL type, handling, called symbol, guarding condition
    message: str  # the text torch_npu raises or warns, or what the line does
    line: int


_METHOD = re.compile(r"^c10::intrusive_ptr<[\w:]*Work>\s+ProcessGroupHCCL::(\w+)\s*\(")
_HCCL_CALL = re.compile(r"\b[hH]ccl([A-Z]\w*?)\s*\(")
_NOT_HCCL_FN = re.compile(r"^(Comm|Get|Group|DataType|Result|Reduce$|RootInfo)")


def _literal(args: str) -> str:
    return string_literals(args, MAX_TEXT)


def _statement(lines: list[str], i: int) -> str:
    """Line ``i`` and the lines after it up to the end of its statement (``;``), joined."""
    out = []
    for j in range(i, min(i + 12, len(lines))):
        out.append(lines[j].split("//", 1)[0].strip())
        if out[-1].endswith(";") or out[-1].endswith("{"):
            break
    return " ".join(out)


def _guard(lines: list[str], i: int, floor: int) -> str:
    """The condition of the ``if`` whose block holds line ``i`` (searched back to ``floor``)."""
    depth = 0
    for j in range(i - 1, floor, -1):
        code = lines[j].split("//", 1)[0]
        depth += code.count("}") - code.count("{")
        if depth < 0:
            m = re.search(r"\bif\s*\((.*)\)\s*\{", code)
            return re.sub(r"\s+", " ", m.group(1)).strip() if m else ""
    return ""


def _methods(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, first line, end line) of each ``ProcessGroupHCCL::`` method returning a Work
    (0-based; the body ends at the next ``}`` in column 0)."""
    out = []
    for i, line in enumerate(lines):
        m = _METHOD.match(line)
        if m is None:
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("}")), len(lines))
        out.append((m.group(1), i, end))
    return out


def _map_block(lines: list[str], head: re.Pattern[str]) -> list[tuple[int, str]]:
    """(0-based line, text) of the entries of the brace initialiser that opens at ``head``."""
    for i, line in enumerate(lines):
        if head.search(line):
            out: list[tuple[int, str]] = []
            for j in range(i + 1, min(i + 60, len(lines))):
                if lines[j].strip().startswith("}"):
                    return out
                if lines[j].strip():
                    out.append((j, lines[j].strip()))
            return out
    return []


def _dtype_map(lines: list[str], origin: Origin) -> list[HcclRow]:
    rows = []
    head = re.compile(r"map<at::ScalarType,\s*HcclDataType>\s+\w+\s*=\s*\{")
    for j, text in _map_block(lines, head):
        m = re.match(r"\{at::(?:ScalarType::)?(\w+),\s*(HCCL_DATA_TYPE_\w+)\}", text)
        if m is None:
            continue
        dtype = _SCALAR.get(m.group(1))
        if dtype is None:
            raise ScrapeError(f"unknown ScalarType {m.group(1)!r} in the HCCL dtype map",
                              source=origin.path, line=j + 1)
        rows.append(HcclRow(DTYPE_MAP, dtype, m.group(2), "mapped to an HCCL data type", j + 1))
    return rows


def _reduce_ops(lines: list[str], origin: Origin) -> list[HcclRow]:
    rows = []
    seen: set[str] = set()
    for kind, head in ((NATIVE, r"map<c10d::ReduceOp,\s*HcclReduceOp>\s+hcclOp\s*=\s*\{"),
                       (REFUSED_OP, r"map<c10d::ReduceOp,\s*std::string>\s+unsupportedOp\s*=\s*\{")):
        for j, text in _map_block(lines, re.compile(head)):
            m = re.match(r"\{c10d::ReduceOp::(\w+),\s*\"?(\w+)\"?\}", text)
            if m is None:
                continue
            op = m.group(1)
            msg = (f"HCCL reduces with {m.group(2)}" if kind == NATIVE
                   else f"Cannot use ReduceOp.{op} with HCCL")
            rows.append(HcclRow(REDUCE_OP, op, kind, msg, j + 1))
            seen.add(op)
    if not rows:
        raise ScrapeError("no hcclOp reduce-op map", source=origin.path)
    fn = next((i for i, line in enumerate(lines)
               if re.match(r"^HcclReduceOp\s+getHcclReduceOp\s*\(", line)), None)
    if fn is None:
        raise ScrapeError("no getHcclReduceOp", source=origin.path)
    end = next((j for j in range(fn + 1, len(lines)) if lines[j].startswith("}")), len(lines))
    for j in range(fn, end):
        m = re.search(r"reduceOp\s*==\s*c10d::ReduceOp::(AVG|PREMUL_SUM)\b", lines[j])
        if m and m.group(1) not in seen:
            body = " ".join(lines[j:j + 10])
            check = re.search(r"TORCH_CHECK\s*\((.*?)\"", body)
            msg = ("summed by HCCL, then divided by the group size on the NPU"
                   if m.group(1) == "AVG" else "scaled, then summed by HCCL")
            if check and m.group(1) == "PREMUL_SUM":
                msg += ": " + _literal(body[check.start():])
            rows.append(HcclRow(REDUCE_OP, m.group(1),
                                SUM_THEN_DIVIDE if m.group(1) == "AVG" else NATIVE, msg, j + 1))
            seen.add(m.group(1))
    for op in ("AVG", "BAND", "BOR", "BXOR"):
        if op not in seen:
            # std::map::operator[] inserts the enum's zero: HCCL_REDUCE_SUM, without a word
            rows.append(HcclRow(REDUCE_OP, op, UNCHECKED,
                                "neither mapped nor refused: getHcclReduceOp's hcclOp[op] "
                                "yields HCCL_REDUCE_SUM (inferred: the enum's zero)", fn + 1))
    return rows


def _checked_set(lines: list[str]) -> list[HcclRow]:
    head = re.compile(r"set<HcclDataType>\s+supportedDataTypes\s*=\s*\{")
    rows = []
    for i, line in enumerate(lines):
        if head.search(line):
            for j in range(i, min(i + 20, len(lines))):
                for m in re.finditer(r"HCCL_DATA_TYPE_\w+", lines[j]):
                    rows.append(HcclRow(DTYPE_CHECKED, "checkSupportedDataType", m.group(0),
                                        "accepted by checkSupportedDataType", j + 1))
                if "}" in lines[j]:
                    return rows
    return rows


def _method_rows(lines: list[str], name: str, start: int, end: int) -> list[HcclRow]:
    rows = [HcclRow(COLLECTIVE, name, "", "ProcessGroupHCCL method", start + 1)]
    called: dict[str, int] = {}
    for j in range(start, end):
        code = lines[j].split("//", 1)[0]
        if "checkSupportedDataType(" in code and not any(r.kind == CHECKS_DTYPE for r in rows):
            rows.append(HcclRow(CHECKS_DTYPE, name, "",
                                "checks the dtype against checkSupportedDataType", j + 1))
        if "does not support" in code and "ProcessGroupHCCL" in code:
            rows.append(HcclRow(REFUSED, name, _guard(lines, j, start),
                                _literal(_statement(lines, j)), j + 1))
        if re.search(r"reduceOp\s*==\s*c10d::ReduceOp::AVG", code):
            body = " ".join(lines[j:j + 10])
            how = ("divided by the group size after the HCCL sum"
                   + ("; integers truncated on Ascend950" if '"trunc"' in body else ""))
            rows.append(HcclRow(AVG_DIVIDE, name, "", how, j + 1))
        if "_npu_dtype_cast" in code and "at::kInt" in code and not any(
                r.kind == BOOL_CAST for r in rows):
            rows.append(HcclRow(BOOL_CAST, name, "int32",
                                "bool and uint8 tensors are sent as int32 and copied back", j + 1))
        if "0-dim" in code:
            rows.append(HcclRow(ZERO_DIM, name, _guard(lines, j, start),
                                _literal(_statement(lines, j - 1) if "TORCH_CHECK" not in code
                                         else _statement(lines, j)), j + 1))
        for m in _HCCL_CALL.finditer(code):
            fn = "Hccl" + m.group(1)
            if not _NOT_HCCL_FN.match(m.group(1)) and not fn.endswith("Exist"):
                called.setdefault(fn, j + 1)
    if any(fn == "HcclAlltoAllV" for fn in called) and any(
            "SplitSizes" in lines[j] for j in range(start, end)):
        rows.append(HcclRow(UNEVEN, name, "HcclAlltoAllV",
                            "split sizes given: sent with HcclAlltoAllV (counts per rank)",
                            called["HcclAlltoAllV"]))
    rows += [HcclRow(CALLS, name, fn, "calls the HCCL function", line)
             for fn, line in sorted(called.items(), key=lambda kv: kv[1])]
    return rows


def _process_group(lines: list[str], origin: Origin) -> list[HcclRow]:
    methods = _methods(lines)
    if not methods:
        raise ScrapeError("no ProcessGroupHCCL::<collective> returning a Work",
                          source=origin.path)
    rows = _reduce_ops(lines, origin) + _checked_set(lines) + _dtype_map(lines, origin)
    for name, start, end in methods:
        rows += _method_rows(lines, name, start, end)
    return rows


def _utils(lines: list[str], origin: Origin) -> list[HcclRow]:
    rows = _dtype_map(lines, origin)
    if not rows:
        raise ScrapeError("no ScalarType → HcclDataType map", source=origin.path)
    return rows


def _compile_header(lines: list[str], origin: Origin) -> list[HcclRow]:
    rows = []
    # the macro's name changed over the releases (LOAD_FUNCTION, TORCH_NPU_LOAD_FUNC, ...)
    pat = re.compile(r"^\s*\w*(?:LOAD_FUNC\w*|REGISTER_FUNCTION)\s*\(\s*(?:\w+\s*,\s*)?"
                     r"(Hccl\w+)\s*\)")
    for i, line in enumerate(lines):
        m = pat.match(line)
        if m:
            rows.append(HcclRow(SYMBOL, m.group(1), "libhccl",
                                "looked up in CANN's HCCL library at run time", i + 1))
    if not rows:
        raise ScrapeError("no HCCL function registered for run-time lookup", source=origin.path)
    return rows


def _py_condition(parents: list[ast.AST], node: ast.AST) -> str:
    """The tests of the ``if`` statements around ``node`` (innermost last), as source text;
    a branch taken on ``else`` shows as ``not (…)``."""
    out = []
    for parent in parents:
        if isinstance(parent, ast.If):
            inside_else = any(node is n or _contains(n, node) for n in parent.orelse)
            test = ast.unparse(parent.test)
            test = f"({test})" if " or " in test else test
            out.append(f"not {test}" if inside_else else test)
    return " and ".join(out)[:MAX_TEXT]


def _contains(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _c10d_py(text: str, origin: Origin) -> list[HcclRow]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None
    rows: list[HcclRow] = []
    for fn in tree.body:
        # `_gather` (patched over torch's) or, in 6.0-era trees, a public `gather`
        if not isinstance(fn, ast.FunctionDef):
            continue
        api = fn.name.lstrip("_")
        doc = (ast.get_docstring(fn) or "").strip()
        if api in _C10D_APIS:
            first = " ".join(ln.strip() for ln in doc.split("\n\n", 1)[0].splitlines())
            rows.append(HcclRow(PY_IMPL, api, fn.name,
                                (first or "torch_npu's own implementation")[:MAX_TEXT],
                                fn.lineno))
        parents: list[ast.AST] = []
        _walk_warns(fn, parents, rows, api, origin)
    return rows


def _walk_warns(node: ast.AST, parents: list[ast.AST], rows: list[HcclRow], api: str,
                origin: Origin) -> None:  # fmt: skip
    for child in ast.iter_child_nodes(node):
        if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                and child.func.attr == "warn" and isinstance(child.func.value, ast.Name)
                and child.func.value.id == "warnings"):
            # torch's own code copied in warns with f-strings: only literal messages are
            # torch_npu's statements about HCCL
            msg = (str(child.args[0].value) if child.args
                   and isinstance(child.args[0], ast.Constant) else "")
            if "HCCL" in msg and "support" in msg:
                rows.append(HcclRow(EMULATED, api, _py_condition(parents, child),
                                    msg[:MAX_TEXT], child.lineno))
        parents.append(child)
        _walk_warns(child, parents, rows, api, origin)
        parents.pop()


# the c10d Python APIs torch_npu may replace (its functions are named with a leading "_")
_C10D_APIS = frozenset({
    "gather", "gather_object", "scatter", "scatter_object_list", "all_gather_object",
    "broadcast_object_list", "batch_isend_irecv", "reduce_scatter_tensor_uneven",
    "all_gather_into_tensor_uneven", "all_to_all", "all_to_all_single", "reduce",
    "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "send", "recv", "isend", "irecv", "barrier",
})  # fmt: skip

_READERS: dict[str, Callable[[list[str], Origin], list[HcclRow]]] = {
    "ProcessGroupHCCL.cpp": _process_group,
    "HCCLUtils.cpp": _utils,
    "HcclCompile.h": _compile_header,
}


def _dtype_wrapper(text: str, origin: Origin) -> list[HcclRow]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None
    casts: list[tuple[str, str, int]] = []
    apis: list[str] = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name == "WRAP_DTYPE_DICT" and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values, strict=True):
                if not (isinstance(k, ast.Constant) and isinstance(v, ast.Attribute)):
                    raise ScrapeError("WRAP_DTYPE_DICT entry is not 'torch.x': torch.y",
                                      source=origin.path, line=node.lineno)
                casts.append((str(k.value).removeprefix("torch."), v.attr, k.lineno))
        elif name.startswith("WRAP_DTYPE_FNNAME_LIST") and isinstance(node.value, ast.List):
            apis += [str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)]
    if not casts or not apis:
        raise ScrapeError("no WRAP_DTYPE_DICT or wrapped function list", source=origin.path)
    return [HcclRow(DTYPE_WRAP, api, f"{src}->{dst}",
                    f"torch_npu casts {src} to {dst} around torch.distributed.{api} and back",
                    line) for api in apis for src, dst, line in casts]


def parse(text: str, origin: Origin) -> list[HcclRow]:
    """The HCCL facts one of :data:`FILES` states (chosen by the file name)."""
    name = origin.path.rsplit("/", 1)[-1]
    if name == "distributed_c10d.py":
        return _c10d_py(text, origin)
    if name == "hccl_dtype_wraper.py":
        return _dtype_wrapper(text, origin)
    reader = _READERS.get(name)
    if reader is None:
        raise ScrapeError(f"no HCCL reader for {name}", source=origin.path)
    return reader(text.splitlines(), origin)
