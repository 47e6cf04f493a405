"""Dump the rows every HTML-reading parser yields on the real upstream pages, to compare two
versions of the parsers (the Beautiful Soup reader against the hand-written one it replaced).

    python tests/scrapers/html_rows_dump.py ../shared/upstream OUT.pickle   # with this tree
    PYTHONPATH=DIR python tests/scrapers/html_rows_dump.py ...  # DIR/opcheck = another tree
    OPCHECK_HTML_PARSER=html.parser python tests/scrapers/html_rows_dump.py ...  # the other parser
    python tests/scrapers/html_rows_dump.py --diff OLD.pickle NEW.pickle

Rows are stored as their ``repr`` (dataclasses), one list per (parser, file); a parse error is
stored as its message, so an error that appears or disappears is a difference too.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from pathlib import Path


def _files(root: Path) -> dict[str, list[str]]:
    from opcheck.scrapers import aclnn_codes, apidocs

    hicann = sorted(p.relative_to(root).as_posix() for p in (root / "github/hicann").rglob("*.md"))
    pytorch = sorted(p.relative_to(root).as_posix()
                     for p in (root / "github/Ascend/pytorch").rglob("*.md") if "/docs/" in p.as_posix())
    return {
        "aclnn_docs": [p for p in hicann if p.rsplit("/", 1)[-1].startswith("aclnn")
                       and "/docs/" in p],
        "aclnn_codes": [p for p in hicann if aclnn_codes.is_code_page(p)
                        or aclnn_codes.is_function_page(p)],
        "apidocs": apidocs.api_doc_paths(pytorch),
    }


def dump(root: Path) -> dict[tuple[str, str], list[str] | str]:
    from opcheck.core.errors import OpcheckError
    from opcheck.scrapers import aclnn_codes, aclnn_docs, apidocs
    from opcheck.scrapers.rows import Origin

    parsers = {
        "aclnn_docs": lambda t, o: aclnn_docs.page_or_skip(t, origin=o),
        "aclnn_codes": lambda t, o: aclnn_codes.parse_return_codes(t, origin=o),
        "apidocs": lambda t, o: apidocs.parse_markdown(t, origin=o),
    }
    out: dict[tuple[str, str], list[str] | str] = {}
    for kind, paths in _files(root).items():
        for path in paths:
            text = (root / path).read_text(encoding="utf-8")
            try:
                got = parsers[kind](text, Origin(path))
            except OpcheckError as exc:
                out[(kind, path)] = f"error: {exc}"
                continue
            if isinstance(got, tuple):  # page_or_skip: (reason, page): one row per fact
                reason, page = got
                rows: list[object] = [reason] if page is None else [
                    (page.title, page.functions, page.param_form),
                    *page.products, *page.params, *page.exceptions, *page.return_codes,
                    *page.constraints]
            else:
                rows = list(got)
            out[(kind, path)] = [repr(r) for r in rows]
    return out


def diff(old: dict[tuple[str, str], list[str] | str],
         new: dict[tuple[str, str], list[str] | str]) -> list[str]:
    lines: list[str] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a != b:
            lines.append(f"{key[0]} {key[1]}")
            if isinstance(a, list) and isinstance(b, list):
                lines += [f"  - {r}" for r in a if r not in b][:5]
                lines += [f"  + {r}" for r in b if r not in a][:5]
            else:
                lines += [f"  - {str(a)[:300]}", f"  + {str(b)[:300]}"]
    return lines


if __name__ == "__main__":
    if sys.argv[1] == "--diff":
        old = pickle.loads(Path(sys.argv[2]).read_bytes())
        new = pickle.loads(Path(sys.argv[3]).read_bytes())
        out = diff(old, new)
        print("\n".join(out))
        kinds = {k for k, _ in old}
        for kind in sorted(kinds):
            n = sum(1 for k in old if k[0] == kind)
            d = sum(1 for k in set(old) | set(new) if k[0] == kind and old.get(k) != new.get(k))
            print(f"{kind}: {n} files, {d} differ")
        sys.exit(1 if out else 0)
    if os.environ.get("OPCHECK_HTML_PARSER"):
        from opcheck.scrapers import html

        html.PARSER = os.environ["OPCHECK_HTML_PARSER"]
    started = time.perf_counter()
    rows = dump(Path(sys.argv[1]))
    print(f"{time.perf_counter() - started:.1f} s")
    Path(sys.argv[2]).write_bytes(pickle.dumps(rows))
    print(f"{len(rows)} files")
