"""What an evaluation reads from the workspace: the corpus and which schemas have gold.

Used by :mod:`curation.evaluation` (the harness, the runner, the speed benchmark and the tables
of the Evaluate page); the SQL stays here.
"""

from __future__ import annotations

from curation.store.workspace import Workspace


def corpus_doc_ids(ws: Workspace) -> set[str]:
    """The ids of every document in the workspace."""
    return {r[0] for r in ws.conn.execute("SELECT doc_id FROM documents")}


def evaluable_schemas(ws: Workspace) -> list[str]:
    """Schemas whose relations cite at least one document of the workspace (so have gold),
    by name."""
    rows = ws.conn.execute(
        "SELECT DISTINCT r.schema FROM relations r JOIN relation_pmids p ON p.relation_id = r.id "
        "JOIN documents d ON d.doc_id = p.pmid ORDER BY r.schema")
    return [r[0] for r in rows]
