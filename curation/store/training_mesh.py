"""What BioHiCL's MeSH labels (``curation/training/mesh_*``) read from the workspace database.

* the MeSH tree (table ``mesh_tree``): its headings, and ``(heading, tree number)`` rows;
* documents with their ``source`` and ``mesh`` headings (JSON list), all that have headings
  (optionally also those with annotations of some types) or a given list of ids;
* annotations of some types (compared lower-cased) that carry ids: their ids per document, and
  ``(mention text, ids, document source)`` for deriving descriptor names from mentions.

The annotation types are a parameter: which ones count is the trainer's choice. The SQL is the
one the trainers ran before it moved here; rows come back in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from curation.store.workspace import Workspace

_CHUNK = 500


def mesh_headings(ws: Workspace) -> list[str]:
    """The distinct headings (descriptor names) of the workspace's MeSH tree (empty: no tree)."""
    return [row[0] for row in ws.conn.execute("SELECT DISTINCT term FROM mesh_tree")]


def mesh_tree_rows(ws: Workspace) -> list[tuple[str, str]]:
    """The MeSH tree.

    Returns:
        ``(heading, tree number)`` per position, by tree number (empty: no tree).
    """
    return [(r[0], r[1]) for r in ws.conn.execute(
        "SELECT term, tree_number FROM mesh_tree ORDER BY tree_number")]


def documents_with_mesh(ws: Workspace, annotation_types: Sequence[str] = ()
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
    found = ws.conn.execute(sql + " ORDER BY doc_id", tuple(annotation_types)).fetchall()
    return [(r[0], r[1], r[2]) for r in found]


def documents_mesh_by_id(ws: Workspace, doc_ids: Sequence[str]
                         ) -> dict[str, tuple[str, str, str]]:
    """The documents of ``doc_ids`` (distinct ids) that are in the workspace, 500 ids a query.

    Returns:
        doc_id -> ``(doc_id, source, mesh JSON)``; ids not in the workspace are left out.
    """
    by_id: dict[str, tuple[str, str, str]] = {}
    for start in range(0, len(doc_ids), _CHUNK):
        chunk = list(doc_ids[start:start + _CHUNK])
        for r in ws.conn.execute(
                "SELECT doc_id, source, mesh FROM documents WHERE doc_id IN "
                f"({', '.join('?' * len(chunk))})", chunk):
            by_id[r[0]] = (r[0], r[1], r[2])
    return by_id


def annotation_ids(ws: Workspace, annotation_types: Sequence[str], doc_ids: Sequence[str]
                   ) -> list[tuple[str, str]]:
    """The ids of the documents' annotations of ``annotation_types`` (lower-case names), 500
    documents a query.

    Returns:
        ``(doc_id, ids JSON)`` per annotation.
    """
    types = ", ".join("?" * len(annotation_types))
    out: list[tuple[str, str]] = []
    for start in range(0, len(doc_ids), _CHUNK):
        chunk = list(doc_ids[start:start + _CHUNK])
        out += [(r[0], r[1]) for r in ws.conn.execute(
            f"SELECT doc_id, ids FROM annotations WHERE lower(type) IN ({types}) AND doc_id "
            f"IN ({', '.join('?' * len(chunk))})", (*annotation_types, *chunk))]
    return out


def annotation_mentions(ws: Workspace, annotation_types: Sequence[str]
                        ) -> list[tuple[str, str, str]]:
    """Annotations of ``annotation_types`` (lower-case names) that carry ids.

    Returns:
        ``(mention text, ids JSON, source of its document)`` per annotation.
    """
    marks = ", ".join("?" * len(annotation_types))
    return [(r[0], r[1], r[2]) for r in ws.conn.execute(
        "SELECT a.text, a.ids, d.source FROM annotations a JOIN documents d "
        f"ON d.doc_id = a.doc_id WHERE lower(a.type) IN ({marks}) AND a.ids != '[]'",
        tuple(annotation_types))]
