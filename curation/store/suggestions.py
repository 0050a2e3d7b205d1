"""The ``source_suggestions`` table: PMIDs curators confirmed as evidence for a relation.

:class:`SourceSuggestion` is one stored row (its moderation rules and CSV export are
:mod:`curation.search.suggestions`). :class:`Suggestions`, built on a workspace
(``Suggestions(ws)``), holds the table's SQL; writers call its write methods inside their own
``ws.transaction()``, with the audit entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from curation.store.workspace import Workspace
from kb_sources.errors import parse_choice


class SuggestionStatus(StrEnum):
    """Where a source suggestion stands in moderation."""

    NEW = "new"
    ACCEPTED = "accepted"
    REJECTED = "rejected"

    @classmethod
    def parse(cls, value: str | SuggestionStatus) -> SuggestionStatus:
        return parse_choice(cls, value, "suggestion status")


@dataclass(frozen=True)
class SourceSuggestion:
    """A PMID a curator confirmed as evidence for a relation, with the required comment.

    ``status`` starts ``new``; a curator or admin accepts or rejects it
    (:func:`curation.search.suggestions.moderate_suggestion`), recorded in ``reviewed_by``,
    ``reviewed_at`` and ``review_reason``.
    """

    id: int
    created_at: str
    confirmed_by: str
    schema: str
    query_key: str
    pmid: str
    slots: dict[str, str]
    answer: str
    answer_key: str
    comment: str
    status: SuggestionStatus
    reviewed_by: str
    reviewed_at: str | None
    review_reason: str

    @classmethod
    def from_row(cls, row: Any) -> SourceSuggestion:
        """The suggestion of a ``source_suggestions`` row (``SELECT *``)."""
        data = dict(row)
        data["slots"] = json.loads(data["slots"])
        data["status"] = SuggestionStatus(data["status"])
        return cls(**data)


class Suggestions:
    """The source_suggestions table: answers suggested from the sources."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def exists(self, schema: str, query_key: str, pmid: str, answer_key: str,
                          answer: str) -> bool:
        """True when the same suggestion (schema, query key, PMID, answer key, answer) is stored."""
        return self.ws.conn.execute(
            "SELECT 1 FROM source_suggestions WHERE schema = ? AND query_key = ? AND pmid = ? "
            "AND answer_key = ? AND answer = ?",
            (schema, query_key, pmid, answer_key, answer)).fetchone() is not None

    def insert(self, created_at: str, confirmed_by: str, schema: str,
                          query_key: str, pmid: str, slots: Mapping[str, str], *, answer: str,
                          answer_key: str, comment: str) -> int:
        """Insert a new suggestion (status ``new``; ``slots`` stored as JSON); returns its id."""
        return int(self.ws.conn.execute(
            "INSERT INTO source_suggestions(created_at, confirmed_by, schema, query_key, pmid, "
            "slots, answer, answer_key, comment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (created_at, confirmed_by, schema, query_key, pmid,
             json.dumps(slots, ensure_ascii=False), answer, answer_key, comment)).lastrowid)

    def get(self, suggestion_id: int) -> SourceSuggestion | None:
        """The stored suggestion with this id, or None."""
        row = self.ws.conn.execute("SELECT * FROM source_suggestions WHERE id = ?",
                                   (suggestion_id,)).fetchone()
        return None if row is None else SourceSuggestion.from_row(row)

    def stored(self, *, schema: str | None = None, query_key: str | None = None,
                           status: SuggestionStatus | None = None) -> list[SourceSuggestion]:
        """Stored suggestions, newest (highest id) first, filtered by the arguments not None."""
        sql, params = "SELECT * FROM source_suggestions WHERE 1 = 1", []
        for column, value in (("schema", schema), ("query_key", query_key),
                              ("status", None if status is None else status.value)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        rows = self.ws.conn.execute(sql + " ORDER BY id DESC", params)
        return [SourceSuggestion.from_row(r) for r in rows]

    def delete(self, suggestion_id: int) -> None:
        """Delete the suggestion with this id (nothing when there is none)."""
        self.ws.conn.execute("DELETE FROM source_suggestions WHERE id = ?", (suggestion_id,))

    def set_review(self, suggestion_id: int, status: SuggestionStatus, reviewed_by: str,
                   reviewed_at: str, reason: str) -> None:
        """Record a moderation decision on the suggestion."""
        self.ws.conn.execute(
            "UPDATE source_suggestions SET status = ?, reviewed_by = ?, reviewed_at = ?, "
            "review_reason = ? WHERE id = ?",
            (status.value, reviewed_by, reviewed_at, reason, suggestion_id))

    def accepted_answer_rows(self, schema: str, query_key: str) -> list[tuple[str, str]]:
        """``(answer, answer_key)`` of the relation's accepted suggestions, oldest acceptance
        first (then by id)."""
        rows = self.ws.conn.execute(
            "SELECT answer, answer_key FROM source_suggestions WHERE schema = ? AND query_key = ? "
            "AND status = 'accepted' ORDER BY reviewed_at, id", (schema, query_key)).fetchall()
        return [(r["answer"], r["answer_key"]) for r in rows]

    def pending_answers(self, schema: str) -> list[tuple[str, str, str]]:
        """``(query_key, answer_key, answer)`` of the schema's suggestions still ``new``, by id."""
        rows = self.ws.conn.execute(
            "SELECT query_key, answer_key, answer FROM source_suggestions WHERE schema = ? AND "
            "status = 'new' ORDER BY id", (schema,))
        return [(row["query_key"], row["answer_key"], row["answer"]) for row in rows]
