"""Contributed knowledge: workarounds (with the one workaround lookup), ``explain``'s pipeline
(``explain/``: the log reader shared with ``trace --log`` (``logs``), troubleshooting
signatures, code tables and rules, the advice writer, the renderer), verification of
rewrites."""
