"""What the MeSH labels of :mod:`curation.training.mesh_labels` are built from, in a workspace.

- the MeSH tree (descriptor name -> tree numbers, table ``mesh_tree``);
- the selected documents and their ``documents.mesh`` headings, without the documents of the
  reserved corpora (:data:`RESERVED_SOURCES`, :func:`is_reserved_source`);
- with ``entity_mesh``, the descriptors of each document's Disease and Chemical annotations
  (:data:`ENTITY_TYPES`) through a descriptor UI -> name mapping.

Moved out of :mod:`curation.training.mesh_labels`, which re-exports the public names; the
choices they implement are described there.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from curation.training.mesh_descriptors import DESCRIPTOR_UI
from kb_sources.errors import CurationError
from kb_sources.medline import mesh_descriptor

if TYPE_CHECKING:
    from curation.store.workspace import Workspace

__all__ = ["ENTITY_TYPES", "RESERVED_SOURCES", "is_reserved_source"]

logger = logging.getLogger(__name__)

#: Corpora kept for outside checks: their documents never give labels (see mesh_labels' docstring).
RESERVED_SOURCES: tuple[str, ...] = ("bc5cdr", "seth")

#: Annotation types (compared case-insensitively) whose MeSH ids ``entity_mesh=True`` uses.
ENTITY_TYPES: tuple[str, ...] = ("disease", "chemical")

_FIX_TREE = ("import the MeSH tree with `kbcurate import mesh mtrees2019.bin.gz` (the shared data "
             "has it in mesh_trees/), or build the demo workspace with `kbcurate demo`")
_FIX_HEADINGS = ("attach MeSH headings with `kbcurate import mesh-headings FILE` (a TSV with "
                 "columns pmid and descriptor, e.g. abstract_pool/pmid_mesh_headings.tsv.gz), "
                 "import MEDLINE records that carry MH fields, or use `kbcurate demo`")


def is_reserved_source(source: str) -> bool:
    """Whether a document source names a reserved corpus (:data:`RESERVED_SOURCES`).

    The source is split into words on anything but letters and digits: ``bc5cdr``,
    ``BC5CDR_test`` and ``seth-corpus`` are reserved, ``methods`` is not.
    """
    words = set(re.split(r"[^a-z0-9]+", source.lower()))
    return any(name in words for name in RESERVED_SOURCES)


def _no_descriptor_mapping() -> CurationError:
    return CurationError(
        "entity_mesh=True needs a MeSH descriptor UI -> name mapping: annotation ids are "
        "descriptor UIs (D003920) but the workspace's mesh_tree (imported from mtreesYYYY.bin) "
        "holds descriptor names and tree numbers only, and the shared mesh_trees/ folder has no "
        "UI column. Pass descriptor_names=read_descriptor_names(FILE) with NLM's ASCII "
        "descriptor file of the tree's year (d2019.bin from "
        "https://nlmpubs.nlm.nih.gov/projects/mesh/2019/asciimesh/) or a TSV with columns "
        "descriptor_ui and descriptor (abstract_pool/pmid_mesh_headings.tsv.gz covers only the "
        "~800 descriptors of its MEDLINE records), or derive one from the annotations' own "
        "mentions (mesh_descriptors='annotations', an adaptation: see "
        "curation.training.mesh_descriptors), or leave entity_mesh off")


def _tree_numbers(ws: Workspace) -> dict[str, list[str]]:
    """Descriptor name -> tree numbers, from the workspace's ``mesh_tree`` table."""
    tree: dict[str, list[str]] = {}
    for term, number in ws.conn.execute(
            "SELECT term, tree_number FROM mesh_tree ORDER BY tree_number"):
        tree.setdefault(term, []).append(number)
    if not tree:
        raise CurationError(f"workspace {ws.root} has no MeSH tree (table mesh_tree is empty); "
                            f"{_FIX_TREE}")
    return tree


def _documents(ws: Workspace, doc_ids: Sequence[str] | None,
               entity_mesh: bool) -> tuple[list[tuple[str, str]], int]:
    """``[(doc_id, mesh JSON)]`` of the selected documents and the number of reserved ones."""
    if doc_ids is None:
        sql = "SELECT doc_id, source, mesh FROM documents WHERE mesh != '[]'"
        if entity_mesh:
            types = ", ".join("?" * len(ENTITY_TYPES))
            sql += (" OR doc_id IN (SELECT doc_id FROM annotations WHERE lower(type) IN "
                    f"({types}) AND ids != '[]')")
        found = ws.conn.execute(sql + " ORDER BY doc_id",
                                ENTITY_TYPES if entity_mesh else ()).fetchall()
        if not found:
            raise CurationError(f"workspace {ws.root} has no document with MeSH headings; "
                                f"{_FIX_HEADINGS}")
        rows = [(r[0], r[1], r[2]) for r in found]
    else:
        wanted = list(dict.fromkeys(str(d) for d in doc_ids))
        if len(wanted) != len(doc_ids):
            raise CurationError("doc_ids lists a document more than once; pass each document "
                                "id once (it becomes one label row)")
        by_id: dict[str, tuple[str, str, str]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            for r in ws.conn.execute(
                    "SELECT doc_id, source, mesh FROM documents WHERE doc_id IN "
                    f"({', '.join('?' * len(chunk))})", chunk):
                by_id[r[0]] = (r[0], r[1], r[2])
        missing = [d for d in wanted if d not in by_id]
        if missing:
            raise CurationError(
                f"{len(missing)} of the doc_ids are not in workspace {ws.root}, e.g. "
                f"{', '.join(missing[:5])}; import those documents or drop them from doc_ids")
        rows = [by_id[d] for d in wanted]
    kept = [(doc_id, mesh) for doc_id, source, mesh in rows if not is_reserved_source(source)]
    return kept, len(rows) - len(kept)


def _headings(doc_id: str, mesh: str) -> list[str]:
    """Descriptor names of a ``documents.mesh`` value (a JSON list of heading strings)."""
    try:
        values = json.loads(mesh)
    except json.JSONDecodeError:
        values = None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise CurationError(f"document {doc_id}: the mesh column is not a JSON list of heading "
                            f"names ({mesh[:60]!r}); re-import the document")
    return [name for name in (mesh_descriptor(v) for v in values) if name]


def _entity_descriptors(ws: Workspace, doc_ids: Sequence[str], names: Mapping[str, str]
                        ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Descriptor names from each document's Disease/Chemical annotation ids, and counts."""
    per_doc: dict[str, dict[str, None]] = {}
    stats = {"entity_descriptor_assignments": 0, "entity_ids_unmapped": 0,
             "entity_ids_not_descriptors": 0}
    types = ", ".join("?" * len(ENTITY_TYPES))
    for start in range(0, len(doc_ids), 500):
        chunk = list(doc_ids[start:start + 500])
        for doc_id, ids in ws.conn.execute(
                f"SELECT doc_id, ids FROM annotations WHERE lower(type) IN ({types}) AND doc_id "
                f"IN ({', '.join('?' * len(chunk))})", (*ENTITY_TYPES, *chunk)):
            try:
                values = json.loads(ids)
            except json.JSONDecodeError:
                values = []
            for value in values if isinstance(values, list) else []:
                ui = str(value).strip()
                ui = ui[5:] if ui.upper().startswith("MESH:") else ui
                if not DESCRIPTOR_UI.fullmatch(ui):
                    stats["entity_ids_not_descriptors"] += 1
                elif ui not in names:
                    stats["entity_ids_unmapped"] += 1
                else:
                    stats["entity_descriptor_assignments"] += 1
                    per_doc.setdefault(doc_id, {})[names[ui]] = None
    if stats["entity_ids_unmapped"]:
        logger.warning("entity MeSH: %d annotation id(s) missing from the descriptor mapping",
                       stats["entity_ids_unmapped"])
    return {doc: list(found) for doc, found in per_doc.items()}, stats
