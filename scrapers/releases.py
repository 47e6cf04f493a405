"""torch_npu releases: the tag list (releases.tsv) and the compatibility tables.

The version map lives in many places that drifted over time: ``COMPATIBILITY*.md`` on master
and the README tables of every release tag, in five header layouts.  The parsers here read
one file each and stay pure (pipe tables via :mod:`opcheck.scrapers.tables`);
:func:`compat_paths` says which files to read and :func:`merge_matrix` joins tags and tables
into one row per torch_npu release and reports, instead of hiding, where the tables disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from opcheck.core.errors import ScrapeError
from opcheck.core.versions import clean_release, release_key
from opcheck.scrapers.rows import CompatRow, Origin, PythonCompatRow, ReleaseTagRow
from opcheck.scrapers.tables import PipeTable, pipe_tables

RELEASES_COLUMNS = (
    "tag",
    "train",
    "torch_version",
    "torch_npu_version",
    "op_plugin_commit",
    "op_plugin_branch",
    "date",
)


# A release tag names its Ascend train and torch version: v7.2.0-pytorch2.1.0, the rc trains
# v6.0.rc2-pytorch2.3.1 and their hotfixes v5.0.rc3.3-pytorch1.11.0, and once a capital V
# (V7.2.0.1-pytorch2.1.0, torch_npu 2.1.0.post18). Pre-release builds (…alpha001…, -beta.1,
# -0day) and the 2.0.x adapter tags are not releases.
_RELEASE_TAG = re.compile(
    r"^[vV](?P<train>\d+\.\d+\.(?:\d+|[rR][cC]\d+)(?:\.\d+)*)-pytorch(?P<torch>\d+\.\d+\.\d+)$"
)


def parse_tag_name(name: str) -> tuple[str, str] | None:
    """``v6.0.RC2-pytorch2.3.1`` → ``("6.0.rc2", "2.3.1")`` (train spelled as the branches
    spell it); None for a name that is not a release tag."""
    m = _RELEASE_TAG.match(name.strip())
    if not m:
        return None
    return m["train"].lower(), m["torch"]


def parse_releases_tsv(text: str, *, origin: Origin) -> list[ReleaseTagRow]:
    """One row per line of ``releases.tsv``; the header must name exactly the known columns."""
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise ScrapeError("empty file, expected a header line", source=origin.path, line=1)
    header = lines[0].rstrip("\r").split("\t")
    unknown = [c for c in header if c not in RELEASES_COLUMNS]
    missing = [c for c in RELEASES_COLUMNS if c not in header]
    if unknown or missing or len(set(header)) != len(header):
        parts = []
        if unknown:
            parts.append(f"unknown column(s) {', '.join(unknown)}")
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if not parts:
            parts.append("duplicate column")
        raise ScrapeError("releases.tsv header: " + "; ".join(parts), source=origin.path, line=1)
    rows: list[ReleaseTagRow] = []
    for lineno, raw in enumerate(lines[1:], start=2):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(header):
            raise ScrapeError(
                f"expected {len(header)} tab-separated cells, got {len(cells)}",
                source=origin.path,
                line=lineno,
            )
        rec = {h: c.strip() for h, c in zip(header, cells, strict=True)}
        if not rec["tag"]:
            raise ScrapeError("empty tag", source=origin.path, line=lineno)
        rows.append(
            ReleaseTagRow(
                tag=rec["tag"],
                train=rec["train"],
                torch_version=rec["torch_version"],
                torch_npu_version=rec["torch_npu_version"],
                op_plugin_commit=rec["op_plugin_commit"],
                op_plugin_branch=rec["op_plugin_branch"],
                date=rec["date"],
                line=lineno,
            )
        )
    return rows


# --- Markdown tables ---------------------------------------------------------------------

_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_PLACEHOLDERS = {"", "-", "\\", "/", "—", "N/A", "n/a"}


def _norm_header(cell: str) -> str:
    s = _LINK.sub(r"\1", cell).replace("*", "")
    return re.sub(r"\s+", "", s).lower()


# Column kinds of the torch_npu ↔ PyTorch ↔ CANN tables, by normalised header cell.
_COMPAT_COLUMNS: dict[str, str] = {
    # current COMPATIBILITY.md / .en.md
    "torchnpu安装包版本": "torch_npu",
    "torchnpuinstallationpackageversion": "torch_npu",
    "gitcode分支": "branch",
    "gitcodebranch": "branch",
    "pytorch版本": "torch",
    "pytorchversion": "torch",
    "cann版本": "cann",
    "cannversion": "cann",
    # README layouts of the 5.0.x … 26.x tags
    "支持的pytorch版本": "torch",
    "supportedpytorchversion": "torch",
    "支持的adapter版本": "torch_npu",
    "supportedadapterversion": "torch_npu",
    "支持的extension版本": "torch_npu",
    "supportedextensionversion": "torch_npu",
    "gitee分支": "branch",
    "github分支": "branch",
    "githubbranch": "branch",
    # 3.0.0 layout: "支持PyTorch版本" holds the adapter version there (see _classify)
    "ascendpytorch版本": "ascend_pytorch",
    "支持pytorch版本": "torch",
    "gitee分支名称": "branch",
}
_PYTHON_COLUMNS: dict[str, str] = {
    "pytorch版本": "torch",
    "pytorchversion": "torch",
    "python版本": "python",
    "pythonversion": "python",
}


def _classify_compat(header: Sequence[str]) -> list[str | None] | None:
    """Column kinds if ``header`` is a compat table, else None; unknown columns → None entry."""
    norm = [_norm_header(h) for h in header]
    if not any("cann" in n for n in norm):
        return None
    if not any(k in n for n in norm for k in ("pytorch", "torchnpu", "adapter", "extension")):
        return None
    kinds: list[str | None] = []
    for n in norm:
        if n.startswith("ascendhub"):
            kinds.append("ignore")  # container image names, not a version fact
        else:
            kinds.append(_COMPAT_COLUMNS.get(n))
    if "ascend_pytorch" in kinds:
        # In the 3.0.0 layout the "PyTorch" column lists adapter releases (1.5.0.post2 …).
        kinds = ["torch_npu" if k == "torch" else k for k in kinds]
    return kinds


def _classify_python(header: Sequence[str]) -> list[str | None] | None:
    norm = [_norm_header(h) for h in header]
    if not any(n in ("pytorch版本", "pytorchversion") for n in norm):
        return None
    if not any(n.startswith("python") for n in norm):
        return None
    return [_PYTHON_COLUMNS.get(n) for n in norm]


_CANN = re.compile(r"^(?:CANN\s*)?(?P<v>\d[\w.]*)$", re.IGNORECASE)
_TORCH_IN_CELL = re.compile(r"^(?:PyTorch\s*)?v?(?P<v>\d+\.\d+(?:\.\d+)?)$", re.IGNORECASE)
_PYTHON = re.compile(
    r"Python\s*(?P<v>\d+\.\d+)(?:\.x)?\s*(?:[（(](?P<note>[^)）]*)[)）])?", re.IGNORECASE
)
_TORCH_PREFIX = re.compile(r"^(\d+\.\d+\.\d+)")


def _value(cell: str) -> str:
    s = _LINK.sub(r"\1", cell).replace("*", "").strip()
    return "" if s in _PLACEHOLDERS else s


def _check_cells(
    cells: tuple[str, ...], width: int, *, origin: Origin, line: int
) -> tuple[str, ...]:
    if len(cells) < width:
        raise ScrapeError(
            f"table row has {len(cells)} cells, header has {width}", source=origin.path, line=line
        )
    # Some 3.0.0 READMEs carry a stray trailing "\" cell; anything with content is a real column.
    if any(_value(c) for c in cells[width:]):
        raise ScrapeError(
            f"table row has {len(cells)} cells, header has {width}", source=origin.path, line=line
        )
    return cells[:width]


def parse_compat(text: str, *, origin: Origin) -> tuple[list[CompatRow], list[PythonCompatRow]]:
    """The torch_npu ↔ PyTorch ↔ CANN rows and the PyTorch ↔ Python rows of one Markdown file.

    Tables are recognised by their header cells; tables that are neither (install links,
    branch maintenance, hardware) are skipped.  A recognised table with a column this parser
    does not know is an error: the layout changed upstream and silently dropping a column
    would lose a fact.
    """
    compat: list[CompatRow] = []
    pythons: list[PythonCompatRow] = []
    for table in pipe_tables(text):
        kinds = _classify_compat(table.header)
        if kinds is not None:
            compat.extend(_compat_rows(table, kinds, origin))
            continue
        pkinds = _classify_python(table.header)
        if pkinds is not None:
            pythons.extend(_python_rows(table, pkinds, origin))
    return compat, pythons


def _unknown_column(table: PipeTable, kinds: Sequence[str | None], origin: Origin, what: str) -> None:
    bad = [h for h, k in zip(table.header, kinds, strict=True) if k is None]
    if bad:
        raise ScrapeError(
            f"{what} table has unknown column(s) {', '.join(repr(b) for b in bad)}",
            source=origin.path,
            line=table.line,
        )


def _compat_rows(table: PipeTable, kinds: Sequence[str | None], origin: Origin) -> list[CompatRow]:
    _unknown_column(table, kinds, origin, "compatibility")
    if "torch_npu" not in kinds or "cann" not in kinds:
        raise ScrapeError(
            "compatibility table lacks a torch_npu or CANN column",
            source=origin.path,
            line=table.line,
        )
    out: list[CompatRow] = []
    cann_above = ""
    for lineno, raw in table.rows:
        cells = _check_cells(raw, len(kinds), origin=origin, line=lineno)
        rec: dict[str, str] = {}
        for kind, cell in zip(kinds, cells, strict=True):
            if kind and kind not in ("ignore", "ascend_pytorch"):
                rec[kind] = _value(cell)
        # The 3.0.rc1 README lists two adapters in one cell: "1.5.0.post5，1.8.1.rc1".
        npus = [clean_release(p) for p in re.split(r"[,，、]", rec.get("torch_npu", ""))]
        npus = [p for p in npus if p]
        if not npus:
            raise ScrapeError("row has no torch_npu version", source=origin.path, line=lineno)
        cann_cell = rec.get("cann", "")
        if cann_cell:
            m = _CANN.match(cann_cell)
            if not m:
                raise ScrapeError(
                    f"not a CANN version: {cann_cell!r}", source=origin.path, line=lineno
                )
            cann_above = m["v"]
        elif not cann_above:
            raise ScrapeError("first row has an empty CANN cell", source=origin.path, line=lineno)
        # An empty CANN cell continues the group above (Markdown has no rowspan).
        torch = ""
        if rec.get("torch"):
            tm = _TORCH_IN_CELL.match(rec["torch"])
            if not tm:
                raise ScrapeError(
                    f"not a PyTorch version: {rec['torch']!r}", source=origin.path, line=lineno
                )
            torch = tm["v"]
        for npu in npus:
            pm = _TORCH_PREFIX.match(npu)
            out.append(
                CompatRow(
                    torch_npu_version=npu,
                    torch_version=torch or (pm[1] if pm else ""),
                    cann_version=cann_above,
                    branch=rec.get("branch", ""),
                    line=lineno,
                )
            )
    return out


def _python_rows(
    table: PipeTable, kinds: Sequence[str | None], origin: Origin
) -> list[PythonCompatRow]:
    _unknown_column(table, kinds, origin, "PyTorch/Python")
    out: list[PythonCompatRow] = []
    for lineno, raw in table.rows:
        cells = _check_cells(raw, len(kinds), origin=origin, line=lineno)
        torch_cell = _value(cells[kinds.index("torch")])
        py_cell = _value(cells[kinds.index("python")])
        tm = _TORCH_IN_CELL.match(torch_cell)
        if not tm:
            raise ScrapeError(
                f"not a PyTorch version: {torch_cell!r}", source=origin.path, line=lineno
            )
        found = list(_PYTHON.finditer(py_cell))
        if not found:
            raise ScrapeError(f"no Python version in {py_cell!r}", source=origin.path, line=lineno)
        versions = tuple(sorted({m["v"] for m in found}, key=_py_key))
        notes = "; ".join(m["note"].strip() for m in found if m["note"])
        out.append(PythonCompatRow(tm["v"], versions, min_note=notes, line=lineno))
    return out


def _py_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


# --- the merged matrix ---------------------------------------------------------------------


@dataclass(frozen=True)
class CompatTable:
    """The parsed tables of one file, with where they came from (for precedence and reports)."""

    origin: Origin
    compat: tuple[CompatRow, ...] = ()
    pythons: tuple[PythonCompatRow, ...] = ()


@dataclass(frozen=True)
class MatrixRow:
    """One torch_npu release with everything known about what it pairs with."""

    torch_npu_version: str
    torch_version: str
    train: str  # Ascend release train: from the tag, else from the branch name
    cann_version: str  # "" when no table names one
    pythons: tuple[str, ...]
    tag: str  # "" when the release has no tag in releases.tsv (older than the tag list)
    branch: str
    op_plugin_commit: str
    op_plugin_branch: str
    date: str
    sources: tuple[str, ...] = ()  # files the kept values came from
    # True when no table names this release and cann_version is that of its train or of the
    # train it hotfixes (7.2.0.1 → 7.2.0); tags_without_cann() still lists it.
    cann_inferred: bool = False


@dataclass(frozen=True)
class MatrixConflict:
    """Two sources disagree on one field of one release; ``kept`` is what the matrix uses."""

    torch_npu_version: str
    field: str
    kept: str
    kept_source: str
    other: str
    other_source: str

    def __str__(self) -> str:
        return (
            f"{self.torch_npu_version} {self.field}: {self.kept!r} ({self.kept_source}) "
            f"vs {self.other!r} ({self.other_source})"
        )


@dataclass
class MatrixResult:
    rows: list[MatrixRow]
    conflicts: list[MatrixConflict] = field(default_factory=list)

    def tags_without_cann(self) -> list[str]:
        """Tags of releases no table gives a CANN version for (inferred ones included)."""
        return [r.tag for r in self.rows if r.tag and (r.cann_inferred or not r.cann_version)]


_BRANCH_TRAIN = re.compile(r"^v\d+\.\d+(?:\.\d+)?-(?P<train>\d[\w.]*)$")


def train_from_branch(branch: str) -> str:
    """``v2.1.0-7.2.0`` → the Ascend release train ``7.2.0``; "" for other branch names."""
    m = _BRANCH_TRAIN.match(branch)
    return m["train"] if m else ""


def _npu_key(version: str) -> str:
    # "1.11.0.rc2 (beta)" and "1.11.0.rc2" name the same release.
    return clean_release(version).replace(" ", "")


def merge_matrix(tags: Sequence[ReleaseTagRow], tables: Sequence[CompatTable]) -> MatrixResult:
    """Join release tags and compat tables into one row per torch_npu version.

    ``tables`` are ordered newest first: the first table that names a value wins and later
    disagreements become :class:`MatrixConflict` entries.  The tag list (releases.tsv) is
    authoritative for tag, train, torch version, op-plugin pin and date.
    """
    conflicts: list[MatrixConflict] = []
    # torch_npu version → field → (value, source)
    facts: dict[str, dict[str, tuple[str, str]]] = {}

    def put(npu: str, name: str, value: str, source: str) -> None:
        if not value:
            return
        cur = facts.setdefault(npu, {})
        if name not in cur:
            cur[name] = (value, source)
        elif cur[name][0] != value:
            conflicts.append(MatrixConflict(npu, name, cur[name][0], cur[name][1], value, source))

    # Old tags spell versions as setup.py did (1.8.1rc1, 1.11.rc1) where the tables write
    # 1.8.1.rc1 / 1.11.0.rc1: one release, named as the tables (and users) name it.
    tabled = {release_key(_npu_key(c.torch_npu_version)): _npu_key(c.torch_npu_version)
              for table in tables for c in table.compat}
    for t in tags:
        if not t.torch_npu_version:
            continue
        npu = _npu_key(t.torch_npu_version)
        npu = tabled.get(release_key(npu), npu) if release_key(npu) != release_key("0") else npu
        src = f"releases.tsv:{t.line}" if t.line else "releases.tsv"
        for name, value in (
            ("tag", t.tag),
            ("train", t.train),
            ("torch_version", t.torch_version),
            ("op_plugin_commit", t.op_plugin_commit),
            ("op_plugin_branch", t.op_plugin_branch),
            ("date", t.date),
        ):
            put(npu, name, value, src)

    python_map: dict[str, tuple[tuple[str, ...], str]] = {}
    python_conflicts: list[MatrixConflict] = []
    for table in tables:
        for c in table.compat:
            npu = _npu_key(c.torch_npu_version)
            src = table.origin.where(c.line)
            put(npu, "cann_version", c.cann_version, src)
            put(npu, "branch", c.branch, src)
            put(npu, "torch_version", _table_torch(npu, c, src, conflicts), src)
        for p in table.pythons:
            src = table.origin.where(p.line)
            if p.torch_version not in python_map:
                python_map[p.torch_version] = (p.pythons, src)
            elif python_map[p.torch_version][0] != p.pythons:
                kept, ksrc = python_map[p.torch_version]
                python_conflicts.append(
                    MatrixConflict(
                        f"torch {p.torch_version}",
                        "pythons",
                        " ".join(kept),
                        ksrc,
                        " ".join(p.pythons),
                        src,
                    )
                )

    _tag_table_releases(tags, facts)
    rows: list[MatrixRow] = []
    for npu, f in facts.items():

        def get(name: str, f: dict[str, tuple[str, str]] = f) -> str:
            return f[name][0] if name in f else ""

        torch = get("torch_version")
        branch = get("branch")
        _check_train(npu, f, conflicts)
        rows.append(
            MatrixRow(
                torch_npu_version=npu,
                torch_version=torch,
                train=get("train") or train_from_branch(branch),
                cann_version=get("cann_version"),
                pythons=python_map.get(torch, ((), ""))[0],
                tag=get("tag"),
                branch=branch,
                op_plugin_commit=get("op_plugin_commit"),
                op_plugin_branch=get("op_plugin_branch"),
                date=get("date"),
                sources=tuple(dict.fromkeys(src.split(":")[0] for _, src in f.values())),
            )
        )
    rows = _infer_hotfix_cann(rows)
    rows.sort(key=lambda r: (release_key(r.torch_npu_version), r.torch_npu_version), reverse=True)
    return MatrixResult(rows, _dedupe(conflicts) + _dedupe(python_conflicts))


def _tag_table_releases(tags: Sequence[ReleaseTagRow],
                        facts: dict[str, dict[str, tuple[str, str]]]) -> None:
    """A tag whose files name no torch_npu version (the PyTorch 1.5.0 adapter tags
    v3.0.*-pytorch1.5.0: a patched PyTorch, no version.txt) is the release the tables list
    on its branch ``v1.5.0-<train>``, when exactly one does."""
    for t in tags:
        if t.torch_npu_version or not t.train:
            continue
        found = [npu for npu, f in facts.items() if "tag" not in f
                 and f.get("torch_version", ("", ""))[0] == t.torch_version
                 and train_from_branch(f.get("branch", ("", ""))[0]) == t.train]
        if len(found) != 1:
            continue
        src = f"releases.tsv:{t.line}" if t.line else "releases.tsv"
        for name, value in (("tag", t.tag), ("train", t.train), ("date", t.date),
                            ("op_plugin_commit", t.op_plugin_commit),
                            ("op_plugin_branch", t.op_plugin_branch)):
            if value:
                facts[found[0]][name] = (value, src)


def _check_train(npu: str, f: dict[str, tuple[str, str]], conflicts: list[MatrixConflict]) -> None:
    """A table row whose branch names another train than the release's tag (1.11.0.post7
    under v1.11.0-5.0.0 while the tag v5.0.rc3.3-pytorch1.11.0 sets that version): the tag
    is kept (it is the build), the disagreement is reported."""
    if "train" not in f or "branch" not in f:
        return
    tag_train, tsrc = f["train"]
    branch, bsrc = f["branch"]
    other = train_from_branch(branch)
    if other and other not in (tag_train, _base_train(tag_train)):
        conflicts.append(MatrixConflict(npu, "train", tag_train, tsrc, other, bsrc))


def _base_train(train: str) -> str:
    """``7.2.0.1`` → ``7.2.0``, ``5.0.rc3.3`` → ``5.0.rc3``: the train a hotfix train fixes."""
    parts = train.split(".")
    return ".".join(parts[:3]) if len(parts) == 4 else ""


def _infer_hotfix_cann(rows: list[MatrixRow]) -> list[MatrixRow]:
    """A tagged release no table names ships on its train's CANN (a later build of a tabled
    train: 2.1.0.post3 of 6.0.rc1) or, for a hotfix train (7.2.0.1, 5.0.rc3.3), on the CANN of
    the train it fixes.

    Only filled when every tabled release of that train agrees on one CANN version, and
    marked ``cann_inferred``.
    """
    by_train: dict[str, set[str]] = {}
    for r in rows:
        # A row whose table branch names another train than its tag (see _check_train) says
        # nothing reliable about the CANN of either train.
        if r.train and r.cann_version and train_from_branch(r.branch) in (
                "", r.train, _base_train(r.train)):
            by_train.setdefault(r.train, set()).add(r.cann_version)
    out: list[MatrixRow] = []
    for r in rows:
        if not r.cann_version and r.tag:
            for train in (r.train, _base_train(r.train)):
                known = by_train.get(train, set()) if train else set()
                if len(known) == 1:
                    r = replace(r, cann_version=next(iter(known)), cann_inferred=True)
                    break
        out.append(r)
    return out


def _table_torch(npu: str, row: CompatRow, src: str, conflicts: list[MatrixConflict]) -> str:
    """The table's torch version, unless it contradicts the release's own name.

    torch_npu releases are named after the torch version they build for, so a table cell that
    disagrees with the name is a table typo (e.g. 1.5.0.post3 listed under PyTorch 1.8.1).
    """
    m = _TORCH_PREFIX.match(npu)
    if m and row.torch_version and m[1] != row.torch_version:
        conflicts.append(
            MatrixConflict(npu, "torch_version", m[1], "version name", row.torch_version, src)
        )
        return m[1]
    return row.torch_version


def _dedupe(items: Iterable[MatrixConflict]) -> list[MatrixConflict]:
    seen: set[tuple[str, str, str, str]] = set()
    out: list[MatrixConflict] = []
    for c in items:
        key = (c.torch_npu_version, c.field, c.kept, c.other)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


# --- which files hold tables --------------------------------------------------------------

PYTORCH_REPO = "github/Ascend/pytorch"
_MASTER_FILES = ("COMPATIBILITY.md", "COMPATIBILITY.en.md", "README.zh.md", "README.md")
_TAG_FILES = ("README.zh.md", "README.md")


def compat_paths(tags: Sequence[ReleaseTagRow], refs: Iterable[str] = ()) -> list[str]:
    """Candidate table files, newest first: master, then tags by date, then other refs.

    ``refs`` adds refs not in the tag list (release branches present in a mirror); they rank
    below the tags because their date is unknown.
    """
    dated = sorted({(t.date, t.tag) for t in tags}, reverse=True)
    ordered = ["master", *(tag for _, tag in dated)]
    ordered += sorted(set(refs) - set(ordered), reverse=True)
    out: list[str] = []
    for ref in ordered:
        names = _MASTER_FILES if ref == "master" else _TAG_FILES
        out.extend(f"{PYTORCH_REPO}/{ref}/{n}" for n in names)
    return out
