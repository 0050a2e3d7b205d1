"""The label value types: grades, stored labels, and labels waiting in the outbox (and the
outbox's reading and appending of them)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from curation.store.errors import WorkspaceBusyError
from curation.store.outbox import Outbox
from kb_sources.errors import CurationError, parse_choice

logger = logging.getLogger(__name__)


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
    #: The bulk grade it was given in (:meth:`~curation.store.labels.Labels.record_many`): one
    #: undo takes back every label of the batch; None for a label given alone.
    batch: str | None = None
    #: The shown order was learned within the query from this many of the relation's labels
    #: (issue 38); None: the document was shown as ranked.
    order_labels: int | None = None

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
    #: The bulk grade it belongs to ("" when given alone; older outbox records have none).
    batch: str = ""
    #: As :attr:`Label.order_labels` (older outbox records have none).
    order_labels: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["grade"] = self.grade.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingLabel:
        """Raises ValueError when ``data`` is not a complete pending label."""
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data and n not in ("batch", "order_labels")]
        texts = [n for n in names
                 if n not in ("grade", "train_size", "order_labels") and n in data]
        if missing or any(not isinstance(data[n], str) for n in texts) \
                or not is_order(data.get("order_labels")):
            raise ValueError(f"not a pending label (missing {missing}): {data}")
        values = {n: data[n] for n in names if n in data}
        values["grade"] = Grade(values["grade"])
        return cls(**values)


class LabelPending(CurationError):
    """The label was not written now but kept in the outbox; it is saved later, never lost.

    Attributes:
        pending: The kept label (the first of a bulk grade's).
        cause: Why the database did not take it (busy, disk full).
        count: How many labels were kept (a bulk grade keeps all of its labels).
    """

    def __init__(self, pending: PendingLabel, cause: CurationError, count: int = 1) -> None:
        self.pending = pending
        self.cause = cause
        self.count = count
        why = ("another import or job is writing to the workspace"
               if isinstance(cause, WorkspaceBusyError) else "the disk is full")
        what = (f"Label '{pending.grade.value}' on {pending.doc_id} is" if count == 1 else
                f"{count:d} labels '{pending.grade.value}' ({pending.doc_id} and others) are")
        super().__init__(
            f"{what} pending, not saved yet: {why}. {'It is' if count == 1 else 'They are'} "
            "kept in the workspace's outbox and saved automatically with your next label "
            "or the next retry; nothing is lost")


def queued_labels(outbox: Outbox) -> list[PendingLabel]:
    """The outbox's labels (lock held); records that are not labels are set aside, so one bad
    record cannot block the others."""
    good, bad = [], []
    for record in outbox.read():
        try:
            good.append(PendingLabel.from_json(record))
        except (ValueError, TypeError) as exc:
            logger.warning("%s: %s", outbox.path, exc)
            bad.append(record)
    if bad:
        outbox.set_aside([json.dumps(r, ensure_ascii=False) for r in bad])
        outbox.replace([p.to_json() for p in good])
    return good


def keep_label(outbox: Outbox, label: PendingLabel, cause: CurationError) -> None:
    """Append ``label`` to the outbox (lock held); an outbox that cannot take it either raises
    a :class:`CurationError` naming the label and ``cause``."""
    try:
        outbox.append(label.to_json())
    except OSError as exc:
        raise CurationError(f"{cause} The label '{label.grade.value}' on {label.doc_id} could "
                            f"not be kept in {outbox.path} either ({exc.strerror}); give it "
                            "again when the workspace is writable") from exc


def is_order(value: Any) -> bool:
    """Whether ``value`` is an ``order_labels``: None (shown as ranked) or a count >= 0."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool)
                             and value >= 0)


def checked_order(order_labels: int | None) -> int | None:
    """``order_labels`` checked: None (shown as ranked) or the labels a learned order used."""
    if is_order(order_labels):
        return order_labels
    raise CurationError(f"order_labels is {order_labels!r}; expected None (shown as ranked) or "
                        "the number of the relation's labels the shown order was learned from")
