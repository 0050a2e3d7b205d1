"""Relevance labels: record, relabel (audited), undo, query, export, agreement.

Every label stores who gave it, when, for which partial relation and query, which document, the
grade, an optional note, and which model version (and training-set size) ranked the document.
A relabel never overwrites: the new row supersedes the old one, and the audit log keeps both.
Undo removes the user's latest label (its full row goes to the audit log first) and re-activates
the label it had superseded, so no label is ever lost.

A label the database cannot take right now (another process holds the write lock past
:data:`LABEL_LOCK_WAIT_S`, or the disk is full) is kept in the workspace's outbox
(``WS/pending_labels.jsonl``, fsynced) and :func:`record_label` raises :class:`LabelPending`.
Pending labels are written, oldest first and before the new one, by the next label that reaches
the database, or by :func:`flush_pending_labels`; :func:`pending_labels` lists them. While the
outbox is empty (the usual case) a label goes straight to the database: writers queue on the
database's own lock, each waiting at most :data:`LABEL_LOCK_WAIT_S`, so no label waits behind
another label's wait. A pending label written after a newer label of the same item (another tab
got through first) enters the history already superseded: the latest label stays current.
"""

from __future__ import annotations

import csv
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.store.label_types import Grade, Label, LabelPending, PendingLabel
from curation.store.label_versions import labels_learned, version_row_id
from curation.store.outbox import Outbox
from curation.store.workspace import (
    Workspace,
    WorkspaceBusyError,
    WorkspaceFullError,
    utcnow,
)
from kb_sources.errors import CurationError

__all__ = ["LABEL_LOCK_WAIT_S", "Agreement", "Grade", "Label", "LabelPending", "PendingLabel",
           "agreement", "export_labels", "flush_pending_labels", "get_label", "labelled_grades",
           "list_labels", "pending_labels", "record_label", "undo_last_label"]

logger = logging.getLogger(__name__)

#: Seconds a label waits for another process's write lock before it goes to the outbox.
LABEL_LOCK_WAIT_S = 5.0
#: The outbox file in the workspace folder.
OUTBOX_NAME = "pending_labels.jsonl"


def record_label(
    ws: Workspace,
    *,
    user: str,
    schema: str,
    query_key: str,
    query_text: str,
    doc_id: str,
    grade: str | Grade,
    note: str = "",
    model_version: str = "",
    train_size: int | None = None,
) -> Label:
    """Store a label (one transaction). Labelling the same item again supersedes the old label.

    Labels still waiting in the outbox are written first, in the order they were given.

    Raises:
        CurationError: Unknown grade or no user.
        LabelPending: The database could not take the label within :data:`LABEL_LOCK_WAIT_S`
            (busy) or the disk is full; the label is kept in the outbox (``exc.pending``).
        WorkspaceReadOnlyError: The workspace is read-only (nothing is kept).
    """
    grade = Grade.parse(grade)
    if not user.strip():
        raise CurationError("A label needs a user; sign in first")
    if train_size is None:  # what the ranking version had learned from (0 for BM25)
        train_size = labels_learned(ws.root, model_version)
    label = PendingLabel(uuid.uuid4().hex, utcnow(), user, schema, query_key, query_text, doc_id,
                         grade, note.strip(), model_version, train_size)
    ws.check_writable()
    outbox = _outbox(ws)
    if not outbox.exists():  # the usual case: straight to the database, writers queue there
        try:
            with ws.lock_wait(LABEL_LOCK_WAIT_S), ws.transaction():
                new_id = _insert_label(ws, label)
        except (WorkspaceBusyError, WorkspaceFullError) as exc:
            with outbox.locked():
                _keep(outbox, label, exc)
            raise LabelPending(label, exc) from exc
        return get_label(ws, new_id)
    with outbox.locked():  # labels wait in the outbox: they are written first
        try:
            _, new_id = _write_queued(ws, outbox, label)
        except (WorkspaceBusyError, WorkspaceFullError) as exc:
            _keep(outbox, label, exc)
            raise LabelPending(label, exc) from exc
    return get_label(ws, new_id)


def pending_labels(ws: Workspace, user: str | None = None) -> list[PendingLabel]:
    """Labels waiting in the outbox, oldest first (only ``user``'s when given)."""
    outbox = _outbox(ws)
    if not outbox.exists():
        return []
    with outbox.locked():
        queued = _queued(outbox)
    return [p for p in queued if user is None or p.user == user]


def flush_pending_labels(ws: Workspace, *, wait_s: float | None = None) -> int:
    """Write the outbox's labels into the database, oldest first; returns how many.

    Args:
        wait_s: Seconds to wait for another process's write lock (default
            :data:`LABEL_LOCK_WAIT_S`).

    Raises:
        WorkspaceBusyError: The write lock was not free within ``wait_s``; they stay pending.
        WorkspaceFullError: The disk is full; they stay pending.
    """
    outbox = _outbox(ws)
    if not outbox.exists():
        return 0
    with outbox.locked():
        written, _ = _write_queued(ws, outbox, None, wait_s=wait_s)
    return written


def _outbox(ws: Workspace) -> Outbox:
    return Outbox(ws.root / OUTBOX_NAME)


def _write_queued(ws: Workspace, outbox: Outbox, label: PendingLabel | None, *,
                  wait_s: float | None = None) -> tuple[int, int]:
    """Write the outbox's labels, then ``label`` (if any), in one transaction; call with the
    outbox lock held. Returns (outbox labels written, id of the last label; 0 when none)."""
    queued = _queued(outbox)
    new_id = 0
    with ws.lock_wait(LABEL_LOCK_WAIT_S if wait_s is None else wait_s), ws.transaction():
        for item in queued:
            new_id = _insert_label(ws, item, was_pending=True)
        if label is not None:
            new_id = _insert_label(ws, label)
    if queued:
        outbox.replace([])
    return len(queued), new_id


def _queued(outbox: Outbox) -> list[PendingLabel]:
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


def _keep(outbox: Outbox, label: PendingLabel, cause: CurationError) -> None:
    try:
        outbox.append(label.to_json())
    except OSError as exc:
        raise CurationError(f"{cause} The label '{label.grade.value}' on {label.doc_id} could "
                            f"not be kept in {outbox.path} either ({exc.strerror}); give it "
                            "again when the workspace is writable") from exc


def _insert_label(ws: Workspace, label: PendingLabel, *, was_pending: bool = False) -> int:
    """Insert one label (inside a transaction), superseding the user's active label for the
    same item. A pending label already written (by a flush that committed but was killed before
    it emptied the outbox) is not written twice."""
    if was_pending:
        row = ws.conn.execute(
            "SELECT id FROM labels WHERE user = ? AND schema = ? AND query_key = ? AND "
            "doc_id = ? AND created_at = ? AND grade = ? AND note = ?",
            (label.user, label.schema, label.query_key, label.doc_id, label.created_at,
             label.grade.value, label.note)).fetchone()
        if row is not None:
            return int(row[0])
    old = _active(ws, label.user, label.schema, label.query_key, label.doc_id)
    if was_pending and old is not None and old.created_at > label.created_at:
        return _insert_late(ws, label, old)
    cur = ws.conn.execute(
        "INSERT INTO labels(created_at, user, schema, query_key, query_text, doc_id, grade, "
        "note, model_version, train_size, model_version_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (label.created_at, label.user, label.schema, label.query_key, label.query_text,
         label.doc_id, label.grade.value, label.note, label.model_version, label.train_size,
         version_row_id(ws.conn, label.model_version)))
    new_id = int(cur.lastrowid)
    extra = {"pending_since": label.created_at} if was_pending else {}
    if old is not None:
        ws.conn.execute("UPDATE labels SET superseded_by = ? WHERE id = ?", (new_id, old.id))
        ws.audit(label.user, "relabel", "label", str(new_id), before=old.to_json(),
                 after={"grade": label.grade.value, "note": label.note, **extra})
    else:
        ws.audit(label.user, "label", "label", str(new_id),
                 after={"doc_id": label.doc_id, "grade": label.grade.value,
                        "query_key": label.query_key, **extra})
    return new_id


def _insert_late(ws: Workspace, label: PendingLabel, newer: Label) -> int:
    """A pending label given before the item's current label (which reached the database
    first, from another tab or process): kept in the history, already superseded by the newer
    one, so the latest label stays the current one and none is lost."""
    cur = ws.conn.execute(
        "INSERT INTO labels(created_at, user, schema, query_key, query_text, doc_id, grade, "
        "note, model_version, train_size, superseded_by, model_version_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (label.created_at, label.user, label.schema, label.query_key, label.query_text,
         label.doc_id, label.grade.value, label.note, label.model_version, label.train_size,
         newer.id, version_row_id(ws.conn, label.model_version)))
    new_id = int(cur.lastrowid)
    ws.audit(label.user, "label", "label", str(new_id),
             after={"doc_id": label.doc_id, "grade": label.grade.value,
                    "query_key": label.query_key, "pending_since": label.created_at,
                    "superseded_by": newer.id, "late": True})
    return new_id


def _active(ws: Workspace, user: str, schema: str, query_key: str, doc_id: str) -> Label | None:
    row = ws.conn.execute(
        "SELECT * FROM labels WHERE user = ? AND schema = ? AND query_key = ? AND doc_id = ? "
        "AND superseded_by IS NULL ORDER BY id DESC LIMIT 1",
        (user, schema, query_key, doc_id)).fetchone()
    return Label.from_row(row) if row else None


def current_label(ws: Workspace, user: str, schema: str, query_key: str,
                  doc_id: str) -> Label | None:
    """The user's current label of one (query, document), or None."""
    return _active(ws, user, schema, query_key, doc_id)


def get_label(ws: Workspace, label_id: int) -> Label:
    row = ws.conn.execute("SELECT * FROM labels WHERE id = ?", (label_id,)).fetchone()
    if row is None:
        raise CurationError(f"No label with id {label_id}")
    return Label.from_row(row)


def undo_last_label(ws: Workspace, user: str) -> Label | None:
    """Remove the user's most recent label; returns it, or None when there is nothing to undo.

    Pending labels are written first, so the most recent one is the one undone.
    """
    flush_pending_labels(ws)
    with ws.transaction():
        row = ws.conn.execute(
            "SELECT * FROM labels WHERE user = ? AND superseded_by IS NULL ORDER BY id DESC "
            "LIMIT 1", (user,)).fetchone()
        if row is None:
            return None
        label = Label.from_row(row)
        ws.conn.execute("UPDATE labels SET superseded_by = NULL WHERE superseded_by = ?",
                        (label.id,))
        ws.conn.execute("DELETE FROM labels WHERE id = ?", (label.id,))
        ws.audit(user, "undo", "label", str(label.id), before=label.to_json())
    return label


def list_labels(
    ws: Workspace,
    *,
    user: str | None = None,
    schema: str | None = None,
    query_key: str | None = None,
    grade: str | None = None,
    model_version: str | None = None,
    since: str | None = None,
    include_superseded: bool = False,
) -> list[Label]:
    """Labels matching every given filter, newest first (``since``: ISO date or timestamp)."""
    sql = "SELECT * FROM labels WHERE 1 = 1"
    params: list[Any] = []
    for column, value in (("user", user), ("schema", schema), ("query_key", query_key),
                          ("grade", Grade.parse(grade).value if grade else None),
                          ("model_version", model_version)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    if since:
        sql += " AND created_at >= ?"
        params.append(since)
    if not include_superseded:
        sql += " AND superseded_by IS NULL"
    return [Label.from_row(r) for r in ws.conn.execute(sql + " ORDER BY id DESC", params)]


def labelled_grades(ws: Workspace, schema: str, query_key: str, user: str) -> dict[str, Grade]:
    """doc_id -> current grade of this user's labels for one partial relation."""
    return {lab.doc_id: lab.grade
            for lab in list_labels(ws, user=user, schema=schema, query_key=query_key)}


@dataclass(frozen=True)
class Agreement:
    """Agreement of two annotators on the items both labelled (skips excluded)."""

    user_a: str
    user_b: str
    shared: int
    observed: float
    kappa: float


def agreement(ws: Workspace, user_a: str, user_b: str) -> Agreement:
    """Cohen's kappa between two annotators over their shared (query, document) items."""
    from sklearn.metrics import cohen_kappa_score

    def grades(user: str) -> dict[tuple[str, str, str], str]:
        return {(lab.schema, lab.query_key, lab.doc_id): lab.grade.value
                for lab in list_labels(ws, user=user) if lab.grade is not Grade.SKIP}

    a, b = grades(user_a), grades(user_b)
    shared = sorted(set(a) & set(b))
    if not shared:
        return Agreement(user_a, user_b, 0, float("nan"), float("nan"))
    ya, yb = [a[k] for k in shared], [b[k] for k in shared]
    observed = sum(x == y for x, y in zip(ya, yb, strict=True)) / len(shared)
    kappa = 1.0 if len(set(ya) | set(yb)) == 1 else float(cohen_kappa_score(ya, yb))
    return Agreement(user_a, user_b, len(shared), observed, kappa)


_EXPORT_FIELDS: Sequence[str] = ("id", "created_at", "user", "schema", "query_key", "query_text",
                                 "doc_id", "grade", "note", "model_version", "train_size")
#: The item's final grade beside each label (empty where the item has none).
FINAL_FIELDS: Sequence[str] = ("final_grade", "final_source", "adjudicated_by", "adjudicated_at",
                               "adjudication_reason")
#: What each exported column holds (the ``kbcurate labels export`` help prints it).
EXPORT_COLUMNS_HELP = (
    "Exported columns (CSV/TSV header, JSONL keys), one row per label: id, created_at (UTC), "
    "user, schema, query_key, query_text, doc_id, grade (complete / partial / irrelevant / "
    "skip), note, model_version and train_size (what ranked the abstract when it was "
    "labelled); then the item's (schema, query_key, doc_id) final grade, the same on every "
    "label of the item: final_grade (a curator's adjudicated grade, else the grade every "
    "current non-skip label gives), final_source (adjudicated or unanimous), adjudicated_by, "
    "adjudicated_at (UTC) and adjudication_reason (empty unless adjudicated). The final "
    "columns are empty (JSONL: null) for an open disagreement or an item with only skips.")


def export_labels(labels: Sequence[Label], path: str | Path, *,
                  finals: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None) -> Path:
    """Write labels as CSV, TSV or JSONL (by the file suffix), with the final-grade columns.

    Args:
        labels: The labels, one row each (the columns: :data:`EXPORT_COLUMNS_HELP`).
        path: The file to write.
        finals: (schema, query_key, doc_id) -> the item's :data:`FINAL_FIELDS` values
            (:func:`curation.access.label_export.export_labels_with_final_grades` fills it);
            items not in it, or every item when None, get empty final columns.

    Raises:
        CurationError: A suffix other than .csv, .tsv or .jsonl.
    """
    path = Path(path)
    finals = finals or {}
    fields = [*_EXPORT_FIELDS, *FINAL_FIELDS]
    rows = []
    for lab in labels:
        data, final = lab.to_json(), finals.get((lab.schema, lab.query_key, lab.doc_id), {})
        rows.append({**{k: data[k] for k in _EXPORT_FIELDS},
                     **{k: final.get(k) for k in FINAL_FIELDS}})
    if path.suffix.lower() == ".jsonl":
        with open(path, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif path.suffix.lower() in (".csv", ".tsv"):
        delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields, delimiter=delimiter)
            writer.writeheader()
            writer.writerows(rows)
    else:
        raise CurationError(f"Cannot export labels to {path.name}: use a .csv, .tsv or .jsonl "
                            "file name")
    return path
