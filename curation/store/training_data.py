"""What the trainers (``curation/training``) read from the workspace database.

* each document's annotation types (EDEL's BM25 negatives skip documents annotated with the
  answer type);
* a schema's KB relations as ``(query_key, data JSON)`` in import order (the train records);
* the citation edges with both ends in the workspace (BiCA's document graph);
* who submitted a job (the owner a training job acts for).

The SQL is the one the trainers ran before it moved here; rows come back in the same order.
"""

from __future__ import annotations

from curation.store.workspace import Workspace


def annotation_types(ws: Workspace) -> list[tuple[str, str]]:
    """The distinct annotation types of each document.

    Returns:
        ``(doc_id, type)`` pairs, each once, types as stored (not lower-cased).
    """
    return [(r[0], r[1]) for r in
            ws.conn.execute("SELECT DISTINCT doc_id, type FROM annotations")]


def relation_rows(ws: Workspace, schema: str) -> list[tuple[str, str]]:
    """A schema's KB relations in import order.

    Returns:
        ``(query_key, data)`` per relation, ``data`` the relation's JSON text.
    """
    return [(r[0], r[1]) for r in ws.conn.execute(
        "SELECT query_key, data FROM relations WHERE schema = ? ORDER BY id", (schema,))]


def citation_edges(ws: Workspace) -> list[tuple[str, str]]:
    """Distinct citing -> cited edges with both ends in the workspace (no self-citations).

    Returns:
        ``(citing, cited)`` doc id pairs, sorted.
    """
    return [(a, b) for a, b in ws.conn.execute(
        "SELECT c.citing, c.cited FROM citations c "
        "JOIN documents x ON x.doc_id = c.citing JOIN documents y ON y.doc_id = c.cited "
        "WHERE c.citing != c.cited ORDER BY c.citing, c.cited")]


def job_creator(ws: Workspace, job_id: int) -> str | None:
    """Who submitted a job.

    Returns:
        The job's ``created_by`` (may be empty), or None when there is no such job.
    """
    row = ws.conn.execute("SELECT created_by FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return row[0] if row else None
