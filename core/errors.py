"""The project's own exceptions. Library code raises these; the CLI turns them into one line."""

from __future__ import annotations


class OpcheckError(Exception):
    """Base class: anything the CLI reports as a one-line error with exit code 2 or 1."""


class CatalogError(OpcheckError):
    """The catalog is missing, broken, or does not hold what was asked for."""


class ScrapeError(OpcheckError):
    """An upstream source could not be fetched or did not parse.

    Carries the source (URL or file) and, when known, the line, so the message points at the
    exact place that changed upstream.
    """

    def __init__(self, message: str, *, source: str = "", line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = source + (f":{line}" if line is not None else "") if source else ""
        super().__init__(f"{where}: {message}" if where else message)


class TraceError(OpcheckError):
    """A model could not be sniffed, loaded or traced."""


class UsageError(OpcheckError):
    """Bad arguments or input (exit code 2)."""
