"""The base of the catalog's table classes (``opcheck.db.tables``): their own MetaData, and the
column type of a vocabulary word. See ``opcheck.db.tables`` for the rules."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pydantic import ConfigDict
from sqlalchemy.orm import registry
from sqlmodel import SQLModel

from opcheck.core.vocab import KernelSource, Registration, Word

METADATA = sa.MetaData()


class CatalogTable(SQLModel, registry=registry(metadata=METADATA)):
    """The base of every catalog table (their own MetaData, see the module docstring)."""

    # Pydantic builds a class's validators when it is first validated, not at import: the
    # first-use build imports every table class and validates none (a third of its time).
    model_config = ConfigDict(defer_build=True)  # type: ignore[assignment]


class WordType(sa.types.TypeDecorator[Word]):
    """A vocabulary word stored as its string value (VARCHAR, as a plain ``str`` column)."""

    impl = sa.String
    cache_ok = True
    word: type[Word] = Word

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> str | None:
        return None if value is None else str(self.word(value).value)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> Word | None:
        return None if value is None else self.word(value)


class KernelSourceType(WordType):
    cache_ok = True  # SQLAlchemy reads it from each class's own namespace
    word = KernelSource


class RegistrationType(WordType):
    cache_ok = True
    word = Registration


_SOURCE = "source.id"
