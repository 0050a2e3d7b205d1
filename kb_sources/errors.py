"""Domain errors shared by every floor.

Every error a user can cause (bad input file, unknown reader, missing template slot) derives from
:class:`CurationError`, so the CLI and the app catch them in one place and show the message, never
a traceback. Messages say what arrived, what was expected and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from os import PathLike
from typing import TypeVar

E = TypeVar("E", bound=Enum)


class CurationError(Exception):
    """Base class of all errors the user can fix."""


class InputFormatError(CurationError):
    """A file or record could not be read.

    Args:
        path: The file being read.
        problem: What is wrong ("missing column 'gene'").
        line: 1-based line number, when known.
        record: Record identifier (PMID, accession, evidence id), when known.
        expected: What the reader expected to find.
        fix: How the user can fix the input.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        problem: str,
        *,
        line: int | None = None,
        record: str | None = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = str(path)
        self.problem = problem
        self.line = line
        self.record = record
        self.expected = expected
        self.fix = fix
        where = self.path
        if line is not None:
            where += f", line {line}"
        if record is not None:
            where += f", record {record}"
        message = f"{where}: {problem}"
        if expected:
            message += f". Expected {expected}"
        if fix:
            message += f". Fix: {fix}"
        super().__init__(message)


class SchemaError(CurationError):
    """A relation schema or column mapping is invalid."""


class TemplateError(CurationError):
    """A query template cannot be rendered for the given partial relation."""


class UnknownNameError(CurationError):
    """A name (reader, schema, retriever) is not registered."""

    def __init__(self, kind: str, name: str, available: Iterable[str]) -> None:
        options = ", ".join(sorted(available)) or "(none registered)"
        super().__init__(f"Unknown {kind} {name!r}. Available options: {options}")
        self.kind = kind
        self.name = name


def parse_choice(enum_cls: type[E], value: object, kind: str) -> E:
    """``enum_cls`` member named by ``value`` (a member or its value, case-insensitive).

    Raises:
        CurationError: Unknown value; the message lists the options.
    """
    if isinstance(value, enum_cls):
        return value
    try:
        return enum_cls(str(value).lower())
    except ValueError:
        options = ", ".join(str(m.value) for m in enum_cls)
        raise CurationError(f"Unknown {kind} {value!r}. Available options: {options}") from None
