"""Contributed knowledge: workarounds (with the one workaround lookup), troubleshooting
signatures, the only log reader (``logs``: ``explain`` and ``trace --log``), verification of
rewrites."""
