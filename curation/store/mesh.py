"""What BioHiCL's MeSH labels (``curation/training/recipes/biohicl/mesh_*``) read from the
workspace database.

:class:`Mesh`, built on a workspace (``Mesh(ws)``), reads

* the MeSH tree (table ``mesh_tree``): its headings, and ``(heading, tree number)`` rows;
* documents with their ``source`` and ``mesh`` headings (JSON list), all that have headings
  (optionally also those with annotations of some types) or a given list of ids.

The annotations of some types that carry ids (their ids per document, and ``(mention text, ids,
document source)`` for deriving descriptor names from mentions) are read by
:meth:`~curation.store.documents.Documents.annotation_ids` and
:meth:`~curation.store.documents.Documents.annotation_mentions`. The annotation types are a
parameter: which ones count is the trainer's choice. The SQL is the one the trainers ran before it
moved here; rows come back in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from curation.store.workspace import Workspace

_CHUNK = 500


class Mesh:
    """The MeSH tree and the MeSH headings of documents."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def headings(self) -> list[str]:
        """The distinct headings (descriptor names) of the MeSH tree (empty: no tree)."""
        return [row[0] for row in self.ws.conn.execute("SELECT DISTINCT term FROM mesh_tree")]

    def tree_rows(self) -> list[tuple[str, str]]:
        """The MeSH tree.

        Returns:
            ``(heading, tree number)`` per position, by tree number (empty: no tree).
        """
        return [(r[0], r[1]) for r in self.ws.conn.execute(
            "SELECT term, tree_number FROM mesh_tree ORDER BY tree_number")]

    def documents_with_mesh(self, annotation_types: Sequence[str] = ()
                            ) -> list[tuple[str, str, str]]:
        """Documents with MeSH headings and, with ``annotation_types``, also those that have an
        annotation of one of those types (lower-case names) carrying ids.

        Returns:
            ``(doc_id, source, mesh JSON)`` per document, by doc_id.
        """
        sql = "SELECT doc_id, source, mesh FROM documents WHERE mesh != '[]'"
        if annotation_types:
            types = ", ".join("?" * len(annotation_types))
            sql += (" OR doc_id IN (SELECT doc_id FROM annotations WHERE lower(type) IN "
                    f"({types}) AND ids != '[]')")
        found = self.ws.conn.execute(sql + " ORDER BY doc_id", tuple(annotation_types)).fetchall()
        return [(r[0], r[1], r[2]) for r in found]

    def documents_mesh_by_id(self, doc_ids: Sequence[str]
                             ) -> dict[str, tuple[str, str, str]]:
        """The documents of ``doc_ids`` (distinct ids) that are in the workspace, 500 ids a query.

        Returns:
            doc_id -> ``(doc_id, source, mesh JSON)``; ids not in the workspace are left out.
        """
        by_id: dict[str, tuple[str, str, str]] = {}
        for start in range(0, len(doc_ids), _CHUNK):
            chunk = list(doc_ids[start:start + _CHUNK])
            for r in self.ws.conn.execute(
                    "SELECT doc_id, source, mesh FROM documents WHERE doc_id IN "
                    f"({', '.join('?' * len(chunk))})", chunk):
                by_id[r[0]] = (r[0], r[1], r[2])
        return by_id
