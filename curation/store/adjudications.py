"""What label review (:mod:`curation.access.adjudication`) reads from and keeps in the database.

* the ``adjudications`` table: recorded final grades, a newer one superseding the older
  (``superseded_by``); rows are never deleted;
* the blind-review setting (``meta`` key :data:`BLIND_REVIEW_KEY`);
* which items a user has graded, and how an item reads: the entity texts of a relation (from a KB
  record, or of entity keys) and document titles.

The permission checks, the audit entries and the rules (what a final grade is, who sees which
label) stay in :mod:`curation.access.adjudication`; these functions only read and write rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from curation.store.label_types import Grade
from curation.store.workspace import Workspace, utcnow

logger = logging.getLogger(__name__)

#: (schema, query_key, doc_id)
Item = tuple[str, str, str]
#: The ``meta`` key of the blind-review setting ("on" / "off").
BLIND_REVIEW_KEY = "blind_review"
_CHUNK = 500


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


def current_adjudication_list(ws: Workspace, schema: str | None = None) -> list[Adjudication]:
    """The current (not superseded) final grades, oldest first.

    Args:
        ws: The workspace.
        schema: Only those of this schema.

    Returns:
        One :class:`Adjudication` per decided item, by id.
    """
    sql, params = "SELECT * FROM adjudications WHERE superseded_by IS NULL", []
    if schema is not None:
        sql += " AND schema = ?"
        params.append(schema)
    rows = ws.conn.execute(sql + " ORDER BY id", params)
    return [Adjudication.from_row(r) for r in rows]


def adjudication_history(ws: Workspace, schema: str, query_key: str,
                         doc_id: str) -> list[Adjudication]:
    """Every final grade recorded for one item, newest first (the current one first)."""
    rows = ws.conn.execute(
        "SELECT * FROM adjudications WHERE schema = ? AND query_key = ? AND doc_id = ? "
        "ORDER BY id DESC", (schema, query_key, doc_id))
    return [Adjudication.from_row(r) for r in rows]


def item_has_labels(ws: Workspace, schema: str, query_key: str, doc_id: str) -> bool:
    """Whether the item has a current (not superseded) label of anyone, skips included."""
    return ws.conn.execute(
        "SELECT 1 FROM labels WHERE schema = ? AND query_key = ? AND doc_id = ? AND "
        "superseded_by IS NULL", (schema, query_key, doc_id)).fetchone() is not None


def insert_adjudication(ws: Workspace, *, user: str, schema: str, query_key: str,
                        doc_id: str, grade: Grade, reason: str,
                        supersedes: int | None = None) -> int:
    """Store a final grade (stamped now) inside the caller's transaction.

    Args:
        ws: The workspace, inside the caller's transaction (which audits the decision).
        user, schema, query_key, doc_id, grade, reason: The decision (``reason`` as given).
        supersedes: The id of the decision it replaces; that row gets ``superseded_by``.

    Returns:
        The new row's id.
    """
    new_id = int(ws.conn.execute(
        "INSERT INTO adjudications(created_at, user, schema, query_key, doc_id, grade, "
        "reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (utcnow(), user, schema, query_key, doc_id, grade.value, reason)).lastrowid)
    if supersedes is not None:
        ws.conn.execute("UPDATE adjudications SET superseded_by = ? WHERE id = ?",
                     (new_id, supersedes))
    return new_id


def blind_review_value(ws: Workspace) -> str | None:
    """The stored blind-review setting ("on" / "off"), or None when it was never set."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?", (BLIND_REVIEW_KEY,)).fetchone()
    return None if row is None else row[0]


def save_blind_review_value(ws: Workspace, value: str) -> None:
    """Store the blind-review setting (inside the caller's transaction, which audits it)."""
    ws.conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (BLIND_REVIEW_KEY, value))


def graded_items(ws: Workspace, user: str) -> set[Item]:
    """Items on which ``user`` has a current grade (skips left out)."""
    rows = ws.conn.execute(
        "SELECT DISTINCT schema, query_key, doc_id FROM labels WHERE user = ? AND "
        "superseded_by IS NULL AND grade != 'skip'", (user,))
    return {(r[0], r[1], r[2]) for r in rows}


def record_slot_texts(ws: Workspace, schema: str, query_key: str) -> list[tuple[str, str]]:
    """(slot, entity text) of the first KB record of a partial relation, in stored order;
    [] when no record has that key."""
    rows = ws.conn.execute(
        "SELECT slot, text FROM relation_slots WHERE relation_id = (SELECT MIN(id) FROM "
        "relations WHERE schema = ? AND query_key = ?) ORDER BY rowid", (schema, query_key))
    return [(row["slot"], row["text"]) for row in rows]


def entity_names(ws: Workspace, keys: Sequence[str]) -> dict[str, str]:
    """Entity key -> its text, for the keys the workspace knows (one query)."""
    rows = ws.conn.execute(
        f"SELECT key, text FROM entities WHERE key IN ({','.join('?' * len(keys))})", keys)
    return {row["key"]: row["text"] for row in rows}


def document_titles(ws: Workspace, doc_ids: Iterable[str]) -> dict[str, str]:
    """doc_id -> title of the documents the workspace holds (one query per 500 ids)."""
    ids = list(dict.fromkeys(doc_ids))
    out: dict[str, str] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i:i + _CHUNK]
        rows = ws.conn.execute("SELECT doc_id, title FROM documents WHERE doc_id IN "
                               f"({','.join('?' * len(chunk))})", chunk)
        out.update({row["doc_id"]: row["title"] for row in rows})
    return out
