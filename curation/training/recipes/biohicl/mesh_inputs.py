"""What the MeSH labels of :mod:`curation.training.recipes.biohicl.mesh_labels` are built from,
in a workspace.

- the MeSH tree (descriptor name -> tree numbers, table ``mesh_tree``);
- the selected documents and their ``documents.mesh`` headings, without the documents of the
  reserved corpora (:data:`RESERVED_SOURCES`, :func:`is_reserved_source`);
- with ``entity_mesh``, the descriptors of each document's Disease and Chemical annotations
  (:data:`ENTITY_TYPES`) through a descriptor UI -> name mapping (:data:`DESCRIPTOR_UI`,
  :func:`descriptor_ui`: what counts as a descriptor id, shared with
  :mod:`curation.training.recipes.biohicl.mesh_descriptors`).

The rows come from :mod:`curation.store.mesh`. Moved out of
:mod:`curation.training.recipes.biohicl.mesh_labels`, which re-exports the names it documents;
the choices they implement are described there. This module imports no other MeSH module of the
recipe.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from curation.store.documents import Documents
from curation.store.mesh import (
    Mesh,
)
from kb_sources.errors import CurationError
from kb_sources.medline import mesh_descriptor

if TYPE_CHECKING:
    from curation.store.workspace import Workspace

__all__ = ["DESCRIPTOR_UI", "ENTITY_TYPES", "FIX_HEADINGS", "RESERVED_SOURCES", "descriptor_ui",
           "document_headings", "entity_descriptors", "is_reserved_source",
           "no_descriptor_mapping", "selected_documents", "tree_numbers"]

logger = logging.getLogger(__name__)

#: Corpora kept for outside checks: their documents never give labels (see mesh_labels' docstring).
RESERVED_SOURCES: tuple[str, ...] = ("bc5cdr", "seth")

#: Annotation types (compared case-insensitively) whose MeSH ids ``entity_mesh=True`` uses.
ENTITY_TYPES: tuple[str, ...] = ("disease", "chemical")

#: A MeSH descriptor UI.
DESCRIPTOR_UI = re.compile(r"D[0-9]{6,9}")

_FIX_TREE = ("import the MeSH tree with `kbcurate import mesh mtrees2019.bin.gz` (the shared data "
             "has it in mesh_trees/), or build the demo workspace with `kbcurate demo`")
#: How to give a workspace's documents MeSH headings (the end of the errors that lack them).
FIX_HEADINGS = ("attach MeSH headings with `kbcurate import mesh-headings FILE` (a TSV with "
                "columns pmid and descriptor, e.g. abstract_pool/pmid_mesh_headings.tsv.gz), "
                "import MEDLINE records that carry MH fields, or use `kbcurate demo`")


def is_reserved_source(source: str) -> bool:
    """Whether a document source names a reserved corpus (:data:`RESERVED_SOURCES`).

    The source is split into words on anything but letters and digits: ``bc5cdr``,
    ``BC5CDR_test`` and ``seth-corpus`` are reserved, ``methods`` is not.
    """
    words = set(re.split(r"[^a-z0-9]+", source.lower()))
    return any(name in words for name in RESERVED_SOURCES)


def descriptor_ui(value: object) -> str | None:
    """The descriptor UI an annotation id names (``D003920`` or ``MESH:D003920``), else None."""
    ui = str(value).strip()
    ui = ui[5:] if ui.upper().startswith("MESH:") else ui
    return ui if DESCRIPTOR_UI.fullmatch(ui) else None


def no_descriptor_mapping() -> CurationError:
    """The error of ``entity_mesh=True`` without a descriptor UI -> name mapping (names the
    ways to get one)."""
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
        "curation.training.recipes.biohicl.mesh_descriptors), or leave entity_mesh off")


def tree_numbers(ws: Workspace) -> dict[str, list[str]]:
    """Descriptor name -> tree numbers, from the workspace's ``mesh_tree`` table.

    Raises:
        CurationError: The workspace has no MeSH tree (names the import).
    """
    tree: dict[str, list[str]] = {}
    for term, number in Mesh(ws).tree_rows():
        tree.setdefault(term, []).append(number)
    if not tree:
        raise CurationError(f"workspace {ws.root} has no MeSH tree (table mesh_tree is empty); "
                            f"{_FIX_TREE}")
    return tree


def selected_documents(ws: Workspace, doc_ids: Sequence[str] | None,
                       entity_mesh: bool) -> tuple[list[tuple[str, str]], int]:
    """The documents labels are built for, without those of the reserved corpora.

    Args:
        ws: The workspace.
        doc_ids: The documents, in order; None: every document with MeSH headings (with
            ``entity_mesh`` also those with Disease/Chemical annotations), by id.
        entity_mesh: Whether entity annotations give labels too.

    Returns:
        ``([(doc_id, mesh JSON)], number of reserved documents dropped)``.

    Raises:
        CurationError: No document with headings, ``doc_ids`` repeats or names unknown ids.
    """
    if doc_ids is None:
        rows = Mesh(ws).documents_with_mesh(ENTITY_TYPES if entity_mesh else ())
        if not rows:
            raise CurationError(f"workspace {ws.root} has no document with MeSH headings; "
                                f"{FIX_HEADINGS}")
    else:
        wanted = list(dict.fromkeys(str(d) for d in doc_ids))
        if len(wanted) != len(doc_ids):
            raise CurationError("doc_ids lists a document more than once; pass each document "
                                "id once (it becomes one label row)")
        by_id = Mesh(ws).documents_mesh_by_id(wanted)
        missing = [d for d in wanted if d not in by_id]
        if missing:
            raise CurationError(
                f"{len(missing)} of the doc_ids are not in workspace {ws.root}, e.g. "
                f"{', '.join(missing[:5])}; import those documents or drop them from doc_ids")
        rows = [by_id[d] for d in wanted]
    kept = [(doc_id, mesh) for doc_id, source, mesh in rows if not is_reserved_source(source)]
    return kept, len(rows) - len(kept)


def document_headings(doc_id: str, mesh: str) -> list[str]:
    """Descriptor names of a ``documents.mesh`` value (a JSON list of heading strings).

    Raises:
        CurationError: The value is not a JSON list of strings (names the document).
    """
    try:
        values = json.loads(mesh)
    except json.JSONDecodeError:
        values = None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise CurationError(f"document {doc_id}: the mesh column is not a JSON list of heading "
                            f"names ({mesh[:60]!r}); re-import the document")
    return [name for name in (mesh_descriptor(v) for v in values) if name]


def entity_descriptors(ws: Workspace, doc_ids: Sequence[str], names: Mapping[str, str]
                       ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Descriptor names from each document's Disease/Chemical annotation ids, and counts.

    Returns:
        ``(doc_id -> descriptor names in first-seen order, counts)``; the counts are
        ``entity_descriptor_assignments``, ``entity_ids_unmapped`` (a UI missing from ``names``)
        and ``entity_ids_not_descriptors``.
    """
    per_doc: dict[str, dict[str, None]] = {}
    stats = {"entity_descriptor_assignments": 0, "entity_ids_unmapped": 0,
             "entity_ids_not_descriptors": 0}
    for doc_id, ids in Documents(ws).annotation_ids(ENTITY_TYPES, doc_ids):
        try:
            values = json.loads(ids)
        except json.JSONDecodeError:
            values = []
        for value in values if isinstance(values, list) else []:
            ui = descriptor_ui(value)
            if ui is None:
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
