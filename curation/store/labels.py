"""Relevance labels: record, relabel (audited), undo, query, agreement.

Every label stores who gave it, when, for which partial relation and query, which document, the
grade, an optional note, which model version (and training-set size) ranked the document, and
whether it was shown in the order learned within the query (``order_labels``). A relabel never
overwrites: the new row supersedes the old one, and the audit log keeps both.
Undo removes the user's latest label (its full row goes to the audit log first) and re-activates
the label it had superseded, so no label is ever lost. A bulk grade (:meth:`Labels.record_many`)
writes its labels in one transaction under one ``batch`` id; one undo takes back the batch.

A label the database cannot take now (another process holds the write lock past
:data:`LABEL_LOCK_WAIT_S`, or the disk is full) is kept in the workspace's outbox
(``WS/pending_labels.jsonl``, fsynced) and :meth:`Labels.record` raises :class:`LabelPending`;
the next label that reaches the database (or :meth:`Labels.flush_pending`) writes the pending
ones first, oldest first. With an empty outbox (the usual case) writers queue on the database's
own lock, each waiting at most :data:`LABEL_LOCK_WAIT_S`. A pending label written after a newer
label of the same item (another tab got through first) enters the history already superseded.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from curation.store.label_agreement import Agreement, agreement_of
from curation.store.label_types import (
    Grade,
    Label,
    LabelPending,
    PendingLabel,
    checked_order,
    keep_label,
    queued_labels,
)
from curation.store.label_versions import labels_learned, version_row_id
from curation.store.outbox import Outbox
from curation.store.workspace import Workspace, WorkspaceBusyError, WorkspaceFullError, utcnow
from kb_sources.errors import CurationError

__all__ = ["LABEL_LOCK_WAIT_S", "Agreement", "Grade", "Label", "LabelPending", "Labels",
           "PendingLabel"]
logger = logging.getLogger(__name__)

#: Seconds a label waits for another process's write lock before it goes to the outbox.
LABEL_LOCK_WAIT_S = 5.0
#: The outbox file in the workspace folder.
OUTBOX_NAME = "pending_labels.jsonl"

#: One current label: (user, query_key, doc_id, grade, created_at).
LabelRow = tuple[str, str, str, str, str]


class Labels:
    """The labels table and its outbox: record, relabel, undo, query, agree."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def record(
        self, *,
        user: str,
        schema: str,
        query_key: str,
        query_text: str,
        doc_id: str,
        grade: str | Grade,
        note: str = "",
        model_version: str = "",
        train_size: int | None = None,
        order_labels: int | None = None,
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
            train_size = labels_learned(self.ws.root, model_version)
        label = PendingLabel(uuid.uuid4().hex, utcnow(), user, schema, query_key, query_text,
                             doc_id, grade, note.strip(), model_version, train_size,
                             order_labels=checked_order(order_labels))
        return self._store([label])[0]

    def record_many(
        self, *,
        user: str,
        schema: str,
        query_key: str,
        query_text: str,
        doc_ids: Sequence[str],
        grade: str | Grade,
        notes: Mapping[str, str] | None = None,
        model_version: str = "",
        order_labels: int | None = None,
    ) -> list[Label]:
        """A bulk grade: the same grade for several documents of one query, in one transaction
        and one batch, so :meth:`undo` takes all of them back at once. A relabelled item keeps
        its current note unless ``notes`` gives one for it.

        Raises:
            CurationError: Unknown grade, no user or no document.
            LabelPending: As :meth:`record`; every label of the batch is kept in the outbox.
        """
        grade = Grade.parse(grade)
        if not user.strip():
            raise CurationError("A label needs a user; sign in first")
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            raise CurationError("Select at least one abstract to grade")
        notes = notes or {}
        train_size = labels_learned(self.ws.root, model_version)
        batch, now = uuid.uuid4().hex, utcnow()
        labels = []
        for doc_id in ids:
            note = notes.get(doc_id)
            if note is None:
                kept = self._active(user, schema, query_key, doc_id)
                note = kept.note if kept else ""
            labels.append(PendingLabel(uuid.uuid4().hex, now, user, schema, query_key,
                                       query_text, doc_id, grade, note.strip(), model_version,
                                       train_size, batch, checked_order(order_labels)))
        return self._store(labels)

    def _store(self, labels: list[PendingLabel]) -> list[Label]:
        """Write ``labels`` in one transaction (after the outbox's), or keep them all in the
        outbox when the database cannot take them (:class:`LabelPending`)."""
        self.ws.check_writable()
        outbox = self._outbox()
        if not outbox.exists():  # the usual case: straight to the database, writers queue there
            try:
                with self.ws.lock_wait(LABEL_LOCK_WAIT_S), self.ws.transaction():
                    new_ids = [self._insert_label(label) for label in labels]
            except (WorkspaceBusyError, WorkspaceFullError) as exc:
                with outbox.locked():
                    for label in labels:
                        keep_label(outbox, label, exc)
                raise LabelPending(labels[0], exc, len(labels)) from exc
            return [self.get(i) for i in new_ids]
        with outbox.locked():  # labels wait in the outbox: they are written first
            try:
                _, new_ids = self._write_queued(outbox, labels)
            except (WorkspaceBusyError, WorkspaceFullError) as exc:
                for label in labels:
                    keep_label(outbox, label, exc)
                raise LabelPending(labels[0], exc, len(labels)) from exc
        return [self.get(i) for i in new_ids]

    def pending(self, user: str | None = None) -> list[PendingLabel]:
        """Labels waiting in the outbox, oldest first (only ``user``'s when given)."""
        outbox = self._outbox()
        if not outbox.exists():
            return []
        with outbox.locked():
            queued = queued_labels(outbox)
        return [p for p in queued if user is None or p.user == user]

    def flush_pending(self, *, wait_s: float | None = None) -> int:
        """Write the outbox's labels into the database, oldest first; returns how many.

        Args:
            wait_s: Seconds to wait for another process's write lock (default
                :data:`LABEL_LOCK_WAIT_S`).

        Raises:
            WorkspaceBusyError: The write lock was not free within ``wait_s``; they stay pending.
            WorkspaceFullError: The disk is full; they stay pending.
        """
        outbox = self._outbox()
        if not outbox.exists():
            return 0
        with outbox.locked():
            written, _ = self._write_queued(outbox, [], wait_s=wait_s)
        return written

    def _outbox(self) -> Outbox:
        return Outbox(self.ws.root / OUTBOX_NAME)

    def _write_queued(self, outbox: Outbox, labels: Sequence[PendingLabel], *,
                      wait_s: float | None = None) -> tuple[int, list[int]]:
        """Write the outbox's labels, then ``labels``, in one transaction; call with the outbox
        lock held. Returns (outbox labels written, the ids of ``labels``)."""
        queued = queued_labels(outbox)
        wait = LABEL_LOCK_WAIT_S if wait_s is None else wait_s
        with self.ws.lock_wait(wait), self.ws.transaction():
            for item in queued:
                self._insert_label(item, was_pending=True)
            new_ids = [self._insert_label(label) for label in labels]
        if queued:
            outbox.replace([])
        return len(queued), new_ids

    def _insert_label(self, label: PendingLabel, *, was_pending: bool = False) -> int:
        """Insert one label (inside a transaction), superseding the user's active label for the
        same item. A pending label already written (by a flush that committed but was killed before
        it emptied the outbox) is not written twice."""
        if was_pending:
            row = self.ws.conn.execute(
                "SELECT id FROM labels WHERE user = ? AND schema = ? AND query_key = ? AND "
                "doc_id = ? AND created_at = ? AND grade = ? AND note = ?",
                (label.user, label.schema, label.query_key, label.doc_id, label.created_at,
                 label.grade.value, label.note)).fetchone()
            if row is not None:
                return int(row[0])
        old = self._active(label.user, label.schema, label.query_key, label.doc_id)
        if was_pending and old is not None and old.created_at > label.created_at:
            return self._insert_late(label, old)
        new_id = self._insert_row(label)
        extra = {"pending_since": label.created_at} if was_pending else {}
        if old is not None:
            self.ws.conn.execute("UPDATE labels SET superseded_by = ? WHERE id = ?",
                                 (new_id, old.id))
            self.ws.audit(label.user, "relabel", "label", str(new_id), before=old.to_json(),
                          after={"grade": label.grade.value, "note": label.note, **extra})
        else:
            self.ws.audit(label.user, "label", "label", str(new_id),
                          after={"doc_id": label.doc_id, "grade": label.grade.value,
                                 "query_key": label.query_key, **extra})
        return new_id

    def _insert_late(self, label: PendingLabel, newer: Label) -> int:
        """A pending label given before the item's current label (which reached the database
        first, from another tab or process): kept in the history, already superseded by the newer
        one, so the latest label stays the current one and none is lost."""
        new_id = self._insert_row(label, superseded_by=newer.id)
        self.ws.audit(label.user, "label", "label", str(new_id),
                      after={"doc_id": label.doc_id, "grade": label.grade.value,
                             "query_key": label.query_key, "pending_since": label.created_at,
                             "superseded_by": newer.id, "late": True})
        return new_id

    def _insert_row(self, label: PendingLabel, *, superseded_by: int | None = None) -> int:
        """Insert one label row (linked to the model version its text names); its id."""
        cur = self.ws.conn.execute(
            "INSERT INTO labels(created_at, user, schema, query_key, query_text, doc_id, grade, "
            "note, model_version, train_size, superseded_by, model_version_id, batch, "
            "order_labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (label.created_at, label.user, label.schema, label.query_key, label.query_text,
             label.doc_id, label.grade.value, label.note, label.model_version, label.train_size,
             superseded_by, version_row_id(self.ws.conn, label.model_version),
             label.batch or None, label.order_labels))
        return int(cur.lastrowid)

    def _active(self, user: str, schema: str, query_key: str, doc_id: str) -> Label | None:
        row = self.ws.conn.execute(
            "SELECT * FROM labels WHERE user = ? AND schema = ? AND query_key = ? AND doc_id = ? "
            "AND superseded_by IS NULL ORDER BY id DESC LIMIT 1",
            (user, schema, query_key, doc_id)).fetchone()
        return Label.from_row(row) if row else None

    def current(self, user: str, schema: str, query_key: str,
                      doc_id: str) -> Label | None:
        """The user's current label of one (query, document), or None."""
        return self._active(user, schema, query_key, doc_id)

    def get(self, label_id: int) -> Label:
        row = self.ws.conn.execute("SELECT * FROM labels WHERE id = ?", (label_id,)).fetchone()
        if row is None:
            raise CurationError(f"No label with id {label_id}")
        return Label.from_row(row)

    def undo_last(self, user: str) -> Label | None:
        """:meth:`undo`; the most recent label undone, or None when there was none."""
        return next(iter(self.undo(user)), None)

    def undo(self, user: str) -> list[Label]:
        """Remove the user's most recent label, or every label of its bulk grade when it was
        given in one (:meth:`record_many`), re-activating the labels they had superseded.
        Returns the labels removed, newest first (empty when there is nothing to undo).

        Pending labels are written first, so the most recent one is the one undone.
        """
        self.flush_pending()
        with self.ws.transaction():
            row = self.ws.conn.execute(
                "SELECT * FROM labels WHERE user = ? AND superseded_by IS NULL ORDER BY id DESC "
                "LIMIT 1", (user,)).fetchone()
            if row is None:
                return []
            undone = [Label.from_row(row)]
            if undone[0].batch:
                undone = [Label.from_row(r) for r in self.ws.conn.execute(
                    "SELECT * FROM labels WHERE user = ? AND batch = ? AND superseded_by IS NULL "
                    "ORDER BY id DESC", (user, undone[0].batch))]
            for label in undone:
                self.ws.conn.execute(
                    "UPDATE labels SET superseded_by = NULL WHERE superseded_by = ?", (label.id,))
                self.ws.conn.execute("DELETE FROM labels WHERE id = ?", (label.id,))
                self.ws.audit(user, "undo", "label", str(label.id), before=label.to_json())
        return undone

    def find(
        self, *,
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
        return [Label.from_row(r) for r in self.ws.conn.execute(sql + " ORDER BY id DESC", params)]

    def grades(self, schema: str, query_key: str, user: str) -> dict[str, Grade]:
        """doc_id -> current grade of this user's labels for one partial relation."""
        return {lab.doc_id: lab.grade
                for lab in self.find(user=user, schema=schema, query_key=query_key)}

    def agreement(self, user_a: str, user_b: str) -> Agreement:
        """Cohen's kappa between two annotators over their shared (query, document) items."""
        def grades(user: str) -> dict[tuple[str, str, str], str]:
            return {(lab.schema, lab.query_key, lab.doc_id): lab.grade.value
                    for lab in self.find(user=user) if lab.grade is not Grade.SKIP}

        return agreement_of(user_a, grades(user_a), user_b, grades(user_b))

    def current_rows(self, schema: str | None, user: str | None) -> list[LabelRow]:
        """Current labels as :data:`LabelRow`, in label order; only ``schema``'s and ``user``'s
        where those are given."""
        sql = ("SELECT user, query_key, doc_id, grade, created_at FROM labels "
               "WHERE superseded_by IS NULL")
        params: list[Any] = []
        for column, value in (("schema", schema), ("user", user)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        rows = self.ws.conn.execute(sql + " ORDER BY id", params)
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def counts(self, schema: str, user: str | None) -> list[tuple[str, int, int]]:
        """``(query_key, current labels, of them by user)`` per query key of ``schema`` with current
        labels (the user's count is 0 without a user)."""
        return [(key, n, n_user or 0) for key, n, n_user in self.ws.conn.execute(
            "SELECT query_key, COUNT(*), COUNT(CASE WHEN user = ? THEN 1 END) FROM labels "
            "WHERE schema = ? AND superseded_by IS NULL GROUP BY query_key", (user or "", schema))]

    def labellers(self, schema: str, keys: Sequence[str]) -> list[tuple[str, str, str]]:
        """``(query_key, doc_id, user)`` of every current label of ``schema`` on the query ``keys``
        (none without keys)."""
        if not keys:
            return []
        rows = self.ws.conn.execute(
            "SELECT query_key, doc_id, user FROM labels WHERE schema = ? AND superseded_by IS NULL "
            f"AND query_key IN ({','.join('?' * len(keys))})", (schema, *keys))
        return [(key, doc_id, user) for key, doc_id, user in rows]

    def worklist_stamp(self) -> str:
        """A cheap marker that changes whenever labels are given, relabelled or undone, source
        suggestions are added, removed or moderated, or relations are imported."""
        row = self.ws.conn.execute(
            "SELECT (SELECT COUNT(*) || ':' || IFNULL(MAX(id), 0) FROM labels), "
            "(SELECT COUNT(*) || ':' || IFNULL(MAX(id), 0) || ':' "
            "|| COUNT(CASE WHEN status = 'new' THEN 1 END) || ':' || IFNULL(MAX(reviewed_at), '') "
            "FROM source_suggestions), "
            "(SELECT COUNT(*) || ':' || IFNULL(MAX(updated_at), '') FROM relations)").fetchone()
        return "|".join(str(v) for v in row)

    def busiest_pair(self) -> tuple[str, str] | None:
        """The two annotators sharing the most graded items (ties by name), or None."""
        row = self.ws.conn.execute(
            "SELECT a.user, b.user, COUNT(*) AS n FROM labels a JOIN labels b ON a.schema = "
            "b.schema AND a.query_key = b.query_key AND a.doc_id = b.doc_id AND a.user < b.user "
            "WHERE a.superseded_by IS NULL AND b.superseded_by IS NULL AND a.grade <> 'skip' "
            "AND b.grade <> 'skip' GROUP BY a.user, b.user ORDER BY n DESC, a.user, b.user "
            "LIMIT 1").fetchone()
        return (row[0], row[1]) if row else None

    def users(self) -> list[str]:
        """The names of the users who gave a label (superseded ones included), sorted."""
        rows = self.ws.conn.execute("SELECT DISTINCT user FROM labels ORDER BY user")
        return [r[0] for r in rows]

    def model_versions(self) -> list[str]:
        """The model versions named by labels (superseded ones included), sorted."""
        return [r[0] for r in self.ws.conn.execute(
            "SELECT DISTINCT model_version FROM labels ORDER BY model_version")]

