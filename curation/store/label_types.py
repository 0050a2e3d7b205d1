"""The label value types: grades, stored labels, and labels waiting in the outbox."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from curation.store.errors import WorkspaceBusyError
from kb_sources.errors import CurationError, parse_choice


class Grade(StrEnum):
    """How well a document completes the partial relation."""

    COMPLETE = "complete"  # names the query entities and an answer
    PARTIAL = "partial"  # some of them
    IRRELEVANT = "irrelevant"
    SKIP = "skip"  # not judged

    @classmethod
    def parse(cls, value: str | Grade) -> Grade:
        return parse_choice(cls, value, "grade")


@dataclass(frozen=True)
class Label:
    """One stored relevance label."""

    id: int
    created_at: str
    user: str
    schema: str
    query_key: str
    query_text: str
    doc_id: str
    grade: Grade
    note: str
    model_version: str
    train_size: int | None
    superseded_by: int | None = None
    #: The ``models`` row of the dense version named in ``model_version`` (None: it names none).
    model_version_id: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> Label:
        data = dict(row)
        data["grade"] = Grade(data["grade"])
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["grade"] = self.grade.value
        return data


@dataclass(frozen=True)
class PendingLabel:
    """A label kept in the outbox until the database takes it (``created_at``: when given)."""

    outbox_id: str
    created_at: str
    user: str
    schema: str
    query_key: str
    query_text: str
    doc_id: str
    grade: Grade
    note: str
    model_version: str
    train_size: int | None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["grade"] = self.grade.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingLabel:
        """Raises ValueError when ``data`` is not a complete pending label."""
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data]
        texts = [n for n in names if n not in ("grade", "train_size")]
        if missing or any(not isinstance(data[n], str) for n in texts):
            raise ValueError(f"not a pending label (missing {missing}): {data}")
        values = {n: data[n] for n in names}
        values["grade"] = Grade(values["grade"])
        return cls(**values)


class LabelPending(CurationError):
    """The label was not written now but kept in the outbox; it is saved later, never lost.

    Attributes:
        pending: The kept label.
        cause: Why the database did not take it (busy, disk full).
    """

    def __init__(self, pending: PendingLabel, cause: CurationError) -> None:
        self.pending = pending
        self.cause = cause
        why = ("another import or job is writing to the workspace"
               if isinstance(cause, WorkspaceBusyError) else "the disk is full")
        super().__init__(
            f"Label '{pending.grade.value}' on {pending.doc_id} is pending, not saved yet: {why}. "
            "It is kept in the workspace's outbox and saved automatically with your next label "
            "or the next retry; nothing is lost")
