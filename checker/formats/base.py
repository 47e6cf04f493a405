"""The format interface: a named renderer of one kind of document (a Report, a ZooResult).

A ``Format`` is a name, a one-line help and the module that renders it; a ``Registry`` holds
the formats of one document kind, in the order the CLI lists them. The registry names the
module instead of holding its function so that building the CLI's option help at start-up
imports no renderer (and no catalog code): the module is imported when it renders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Generic, TypeVar, cast

from opcheck.core.errors import UsageError

Doc = TypeVar("Doc")


@dataclass(frozen=True)
class RenderContext:
    """What a renderer may need beyond the document."""

    environment: Mapping[str, str] | None = None  # component → version (``wants_environment``)
    all_ops: bool = False  # list every op, not only the problems (``--all-ops``)


@dataclass(frozen=True)
class Format:
    """One output format.

    ``module`` (in this package) defines ``render(doc, ctx: RenderContext) -> str``. A
    ``terminal`` format has none: it is drawn with colours on a console, which only the CLI
    has, so the CLI renders it.
    """

    name: str
    help: str
    module: str = ""
    terminal: bool = False
    wants_environment: bool = False  # the CLI collects the machine's inventory for it

    def __post_init__(self) -> None:
        if self.terminal == bool(self.module):
            raise ValueError(f"format {self.name!r}: give exactly one of a module or terminal=True")


class Registry(Generic[Doc]):
    """The formats of one document kind; the CLI's choices and help are derived from it."""

    def __init__(self, kind: str, formats: Iterable[Format]) -> None:
        self.kind = kind
        self._formats: dict[str, Format] = {}
        for fmt in formats:
            if fmt.name in self._formats:
                raise ValueError(f"{kind} format {fmt.name!r} is registered twice")
            self._formats[fmt.name] = fmt

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._formats)

    def help_text(self) -> str:
        """The ``--format`` option's help: the choices, in order."""
        return " | ".join(self._formats)

    def get(self, name: str) -> Format:
        try:
            return self._formats[name]
        except KeyError:
            raise UsageError(
                f"unknown format {name!r} (choose from {', '.join(self._formats)})"
            ) from None

    def renderer(self, name: str) -> Callable[[Doc, RenderContext], str]:
        fmt = self.get(name)
        if fmt.terminal:
            raise UsageError(f"{self.kind} format {name!r} is drawn on a terminal, not rendered "
                             "to text")
        module = import_module(f"{__package__}.{fmt.module}")
        return cast(Callable[[Doc, RenderContext], str], module.render)

    def render(self, name: str, doc: Doc, ctx: RenderContext | None = None) -> str:
        return self.renderer(name)(doc, ctx or RenderContext())
