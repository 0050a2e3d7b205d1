"""What a reader skipped while reading one file, so the import summary can say so.

Some input is dropped rather than refused (an OncoKB PMID cell item that is not a PMID, a row
with an empty query slot, an exact duplicate record, a row whose evidence level or interaction
type is not one the KB uses, a UniProt feature beyond its sequence). Each such case is noted in a
:class:`ReadStats`: the first one of a kind is logged as a warning, later ones only counted, and
when the file is read to its end one summary warning per repeated kind gives the total.

Every registered reader accepts ``stats: ReadStats | None``;
:meth:`kb_sources.registry.ReaderSpec.read` passes one in and returns a :class:`ReadResult`, an
iterator over the records whose :attr:`ReadResult.issues` the importer can print::

    result = get_reader("kb", "oncokb").read(path)
    relations = list(result)
    for issue in result.issues:
        print(issue.summary())  # "2 non-PMID item(s) dropped from PMID lists (first: line 3: ...)"

Repeated record ids are found by :class:`DuplicateCheck`: an identical repeat is skipped and
counted, a repeat with different content is refused (keeping either copy would silently lose the
other).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from os import PathLike
from typing import Generic, TypeVar

from kb_sources.errors import InputFormatError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class IssueKind(StrEnum):
    """Kinds of input a reader drops with a warning instead of refusing the file."""

    NOT_A_PMID = "not_a_pmid"
    DUPLICATE = "duplicate"
    EMPTY_QUERY_SLOT = "empty_query_slot"
    ANNOTATION_SKIPPED = "annotation_skipped"
    UNKNOWN_VALUE = "unknown_value"
    POSITION_OUTSIDE = "position_outside"
    NO_CATALYST = "no_catalyst"

    @property
    def label(self) -> str:
        """Plural noun phrase used in summaries ("non-PMID item(s) dropped ...")."""
        return _LABELS[self]


_LABELS = {
    IssueKind.NOT_A_PMID: "non-PMID item(s) dropped from PMID lists",
    IssueKind.DUPLICATE: "identical repeated record(s) skipped",
    IssueKind.EMPTY_QUERY_SLOT: "row(s) with an empty query slot skipped",
    IssueKind.ANNOTATION_SKIPPED: "annotation(s) that do not fit the text skipped",
    IssueKind.UNKNOWN_VALUE: "row(s) with a value outside the format's vocabulary skipped",
    IssueKind.POSITION_OUTSIDE: "feature(s) with an unknown position or one beyond the "
    "sequence skipped",
    IssueKind.NO_CATALYST: "feature(s) whose 'by' names no catalyst",
}


@dataclass(frozen=True)
class ReadIssue:
    """All cases of one kind in one file.

    Attributes:
        kind: What was dropped.
        count: How many times.
        first: The first case, with its line or record ("line 3: 'abc;-5' in column ...").
    """

    kind: IssueKind
    count: int
    first: str

    def summary(self) -> str:
        return f"{self.count} {self.kind.label} (first: {self.first})"


class ReadStats:
    """Collects the issues of one read (see the module docstring)."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = str(path)
        self._counts: dict[IssueKind, int] = {}
        self._first: dict[IssueKind, str] = {}

    def note(self, kind: IssueKind, detail: str, *, line: int | None = None,
             record: str | None = None) -> None:
        """Count one case; the first of its kind is logged as a warning, later ones at debug."""
        where = ", ".join(part for part in (
            f"line {line}" if line is not None else "",
            f"record {record}" if record is not None else "") if part)
        case = f"{where}: {detail}" if where else detail
        if kind in self._counts:
            logger.debug("%s, %s", self.path, case)
        else:
            logger.warning("%s, %s (further cases are counted)", self.path, case)
            self._first[kind] = case
        self._counts[kind] = self._counts.get(kind, 0) + 1

    @property
    def issues(self) -> tuple[ReadIssue, ...]:
        """One :class:`ReadIssue` per kind noted, in order of first appearance."""
        return tuple(ReadIssue(k, n, self._first[k]) for k, n in self._counts.items())

    def count(self, kind: IssueKind) -> int:
        return self._counts.get(kind, 0)

    def log_summary(self) -> None:
        """One warning per kind seen more than once, with its total; called by readers at the end.

        A kind seen once was already logged in full by :meth:`note`.
        """
        for issue in self.issues:
            if issue.count > 1:
                logger.warning("%s: %s", self.path, issue.summary())


class ReadResult(Iterator[T], Generic[T]):
    """The records of one read plus its :class:`ReadStats` (complete once exhausted)."""

    def __init__(self, items: Iterator[T], stats: ReadStats) -> None:
        self._items = items
        self.stats = stats

    def __iter__(self) -> ReadResult[T]:
        return self

    def __next__(self) -> T:
        return next(self._items)

    @property
    def issues(self) -> tuple[ReadIssue, ...]:
        return self.stats.issues


class DuplicateCheck:
    """Repeated ids within one file: identical repeats are noted and skipped, others refused.

    Args:
        path: The file (for messages).
        stats: Where skipped repeats are counted.
        what: What the id is called ("evidence id", "PMID").
        fix: Advice when two records share an id but differ.
    """

    def __init__(self, path: str | PathLike[str], stats: ReadStats, *, what: str,
                 fix: str) -> None:
        self.path = path
        self.stats = stats
        self.what = what
        self.fix = fix
        self._seen: dict[str, tuple[int | None, int]] = {}

    def is_repeat(self, key: str, content: Hashable, *, line: int | None = None) -> bool:
        """True when ``key`` was already read with the same ``content`` (skip the record).

        Raises:
            InputFormatError: ``key`` was read before with different content.
        """
        digest = hash(content)
        first = self._seen.get(key)
        if first is None:
            self._seen[key] = (line, digest)
            return False
        where = f"line {first[0]}" if first[0] is not None else "an earlier record"
        if first[1] != digest:
            raise InputFormatError(
                self.path, f"{self.what} {key!r} repeats {where} with different content",
                line=line, expected=f"each {self.what} once per file", fix=self.fix,
            )
        self.stats.note(IssueKind.DUPLICATE, f"{self.what} {key!r} repeats {where} "
                        "unchanged; the repeat is skipped", line=line)
        return True
