"""The workspace's counts shown by ``kbcurate stats``: :class:`WorkspaceStats` and the queries
that fill it (:func:`count_everything`, behind :meth:`Workspace.stats`), on either engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from curation.store.database import StoreConnection
from curation.store.migrations import SCHEMA_VERSION


@dataclass(frozen=True)
class WorkspaceStats:
    """Counts shown by ``kbcurate stats``."""

    documents: int
    documents_by_source: dict[str, int]
    annotations: int
    relations: int
    relations_by_source: dict[str, int]
    relations_by_schema: dict[str, int]
    partial_relations_by_schema: dict[str, int]
    relations_with_pmids: int
    entities: int
    synonyms: int
    citations: int
    mesh_terms: int
    labels: int
    labels_by_grade: dict[str, int]
    model_versions: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def count_everything(conn: StoreConnection, schema_version: int) -> WorkspaceStats:
    """Counts of everything in the workspace database ``conn`` (at ``schema_version``)."""

    def one(sql: str) -> int:
        return int(conn.execute(sql, ()).fetchone()[0])

    def grouped(sql: str) -> dict[str, int]:
        """``key -> count`` in key order (SQLite returns groups sorted; a server may not)."""
        return {str(k): int(v) for k, v in conn.execute(f"{sql} ORDER BY 1")}

    return WorkspaceStats(
        documents=one("SELECT COUNT(*) FROM documents"),
        documents_by_source=grouped("SELECT source, COUNT(*) FROM documents GROUP BY 1"),
        annotations=one("SELECT COUNT(*) FROM annotations"),
        relations=one("SELECT COUNT(*) FROM relations"),
        relations_by_source=grouped("SELECT source, COUNT(*) FROM relations GROUP BY 1"),
        relations_by_schema=grouped("SELECT schema, COUNT(*) FROM relations GROUP BY 1"),
        partial_relations_by_schema=grouped(
            "SELECT schema, COUNT(DISTINCT query_key) FROM relations GROUP BY 1"),
        relations_with_pmids=one("SELECT COUNT(DISTINCT relation_id) FROM relation_pmids"),
        entities=one("SELECT COUNT(*) FROM entities"),
        synonyms=one("SELECT COUNT(*) FROM synonyms"),
        citations=one("SELECT COUNT(*) FROM citations"),
        mesh_terms=one("SELECT COUNT(DISTINCT term) FROM mesh_tree"),
        labels=one("SELECT COUNT(*) FROM labels WHERE superseded_by IS NULL"),
        labels_by_grade=grouped(
            "SELECT grade, COUNT(*) FROM labels WHERE superseded_by IS NULL GROUP BY 1"),
        model_versions=[f"{r[0]}@{r[1]}" for r in conn.execute(
            "SELECT name, version FROM models ORDER BY id")],
        schema_version=schema_version,
    )
