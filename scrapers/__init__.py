"""Scrapers: one module per upstream format, each a pure ``parse(text, *, origin) -> rows``.

Fetching is separate (``opcheck.sync``): HTTP, a mirror directory, or a ``pip download``-ed
wheel all hand the same text to the same parser.  Shared reading helpers: ``yamlines`` (YAML
with line numbers) and ``tables`` (Markdown pipe tables).  Nothing here imports
``opcheck.sync``, ``opcheck.db`` or anything above them.
"""
