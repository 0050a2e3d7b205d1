"""Labelling progress as the Worklist page counts it (``curation/search``): current labels only
(``superseded_by IS NULL``: a relabel's earlier versions are left out; labels waiting in the
outbox are not in the table yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from curation.store.workspace import Workspace

#: One current label: (user, query_key, doc_id, grade, created_at).
LabelRow = tuple[str, str, str, str, str]


def current_label_rows(ws: Workspace, schema: str | None, user: str | None) -> list[LabelRow]:
    """Current labels as :data:`LabelRow`, in label order; only ``schema``'s and ``user``'s
    where those are given."""
    sql = ("SELECT user, query_key, doc_id, grade, created_at FROM labels "
           "WHERE superseded_by IS NULL")
    params: list[Any] = []
    for column, value in (("schema", schema), ("user", user)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    return [(r[0], r[1], r[2], r[3], r[4]) for r in ws.conn.execute(sql + " ORDER BY id", params)]


def label_counts(ws: Workspace, schema: str, user: str | None) -> list[tuple[str, int, int]]:
    """``(query_key, current labels, of them by user)`` per query key of ``schema`` with current
    labels (the user's count is 0 without a user)."""
    return [(key, n, n_user or 0) for key, n, n_user in ws.conn.execute(
        "SELECT query_key, COUNT(*), COUNT(CASE WHEN user = ? THEN 1 END) FROM labels "
        "WHERE schema = ? AND superseded_by IS NULL GROUP BY query_key", (user or "", schema))]


def labellers(ws: Workspace, schema: str, keys: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(query_key, doc_id, user)`` of every current label of ``schema`` on the query ``keys``
    (none without keys)."""
    if not keys:
        return []
    rows = ws.conn.execute(
        "SELECT query_key, doc_id, user FROM labels WHERE schema = ? AND superseded_by IS NULL "
        f"AND query_key IN ({','.join('?' * len(keys))})", (schema, *keys))
    return [(key, doc_id, user) for key, doc_id, user in rows]


def worklist_stamp(ws: Workspace) -> str:
    """A cheap marker that changes whenever labels are given, relabelled or undone, source
    suggestions are added, removed or moderated, or relations are imported."""
    row = ws.conn.execute(
        "SELECT (SELECT COUNT(*) || ':' || IFNULL(MAX(id), 0) FROM labels), "
        "(SELECT COUNT(*) || ':' || IFNULL(MAX(id), 0) || ':' "
        "|| COUNT(CASE WHEN status = 'new' THEN 1 END) || ':' || IFNULL(MAX(reviewed_at), '') "
        "FROM source_suggestions), "
        "(SELECT COUNT(*) || ':' || IFNULL(MAX(updated_at), '') FROM relations)").fetchone()
    return "|".join(str(v) for v in row)
