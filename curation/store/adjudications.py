"""What label review (:mod:`curation.access.adjudication`) reads from and keeps in the database.

* the ``adjudications`` table: recorded final grades, a newer one superseding the older
  (``superseded_by``); rows are never deleted;
* the blind-review setting (``meta`` key :data:`BLIND_REVIEW_KEY`);
* which items a user has graded, and whether an item has labels.

:class:`Adjudications`, built on a workspace (``Adjudications(ws)``), holds that SQL. How an item
reads comes from the other repositories: the entity texts of a relation from
:meth:`~curation.store.relations.Relations.slot_texts` and
:meth:`~curation.store.entities.Entities.names`, document titles from
:meth:`~curation.store.documents.Documents.titles`.

The permission checks, the audit entries and the rules (what a final grade is, who sees which
label) stay in :mod:`curation.access.adjudication`; :class:`Adjudications` only reads and writes
rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from curation.store.label_types import Grade
from curation.store.workspace import Workspace, utcnow

logger = logging.getLogger(__name__)

#: (schema, query_key, doc_id)
Item = tuple[str, str, str]
#: The ``meta`` key of the blind-review setting ("on" / "off").
BLIND_REVIEW_KEY = "blind_review"


@dataclass(frozen=True)
class Adjudication:
    """One recorded final grade (the current one has ``superseded_by`` None)."""

    id: int
    created_at: str
    user: str
    schema: str
    query_key: str
    doc_id: str
    grade: Grade
    reason: str
    superseded_by: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> Adjudication:
        data = dict(row)
        data["grade"] = Grade(data["grade"])
        return cls(**data)

    @property
    def item(self) -> Item:
        return self.schema, self.query_key, self.doc_id


class Adjudications:
    """The adjudications table and the blind-review setting."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def current_list(self, schema: str | None = None) -> list[Adjudication]:
        """The current (not superseded) final grades, oldest first.

        Args:
            schema: Only those of this schema.

        Returns:
            One :class:`Adjudication` per decided item, by id.
        """
        sql, params = "SELECT * FROM adjudications WHERE superseded_by IS NULL", []
        if schema is not None:
            sql += " AND schema = ?"
            params.append(schema)
        rows = self.ws.conn.execute(sql + " ORDER BY id", params)
        return [Adjudication.from_row(r) for r in rows]

    def history(self, schema: str, query_key: str,
                             doc_id: str) -> list[Adjudication]:
        """Every final grade recorded for one item, newest first (the current one first)."""
        rows = self.ws.conn.execute(
            "SELECT * FROM adjudications WHERE schema = ? AND query_key = ? AND doc_id = ? "
            "ORDER BY id DESC", (schema, query_key, doc_id))
        return [Adjudication.from_row(r) for r in rows]

    def item_has_labels(self, schema: str, query_key: str, doc_id: str) -> bool:
        """Whether the item has a current (not superseded) label of anyone, skips included."""
        return self.ws.conn.execute(
            "SELECT 1 FROM labels WHERE schema = ? AND query_key = ? AND doc_id = ? AND "
            "superseded_by IS NULL", (schema, query_key, doc_id)).fetchone() is not None

    def insert(self, *, user: str, schema: str, query_key: str,
                            doc_id: str, grade: Grade, reason: str,
                            supersedes: int | None = None) -> int:
        """Store a final grade (stamped now) inside the caller's transaction (which audits the
        decision).

        Args:
            user, schema, query_key, doc_id, grade, reason: The decision (``reason`` as given).
            supersedes: The id of the decision it replaces; that row gets ``superseded_by``.

        Returns:
            The new row's id.
        """
        new_id = int(self.ws.conn.execute(
            "INSERT INTO adjudications(created_at, user, schema, query_key, doc_id, grade, "
            "reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (utcnow(), user, schema, query_key, doc_id, grade.value, reason)).lastrowid)
        if supersedes is not None:
            self.ws.conn.execute("UPDATE adjudications SET superseded_by = ? WHERE id = ?",
                                 (new_id, supersedes))
        return new_id

    def blind_review_value(self) -> str | None:
        """The stored blind-review setting ("on" / "off"), or None when it was never set."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (BLIND_REVIEW_KEY,)).fetchone()
        return None if row is None else row[0]

    def save_blind_review_value(self, value: str) -> None:
        """Store the blind-review setting (inside the caller's transaction, which audits it)."""
        self.ws.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (BLIND_REVIEW_KEY, value))

    def graded_items(self, user: str) -> set[Item]:
        """Items on which ``user`` has a current grade (skips left out)."""
        rows = self.ws.conn.execute(
            "SELECT DISTINCT schema, query_key, doc_id FROM labels WHERE user = ? AND "
            "superseded_by IS NULL AND grade != 'skip'", (user,))
        return {(r[0], r[1], r[2]) for r in rows}
