"""Scrapers: one module per upstream source, each a pure ``parse(text, *, origin) -> rows``.

Fetching is separate (``opcheck.sync.sources``): HTTP, a mirror directory, or a
``pip download``-ed wheel all hand the same text to the same parser.
"""
