"""MeSH labels per document for BioHiCL (Lan et al.; TRAINING.md section 3).

Each document's MeSH headings are expanded to tree positions: every tree number of a heading plus
all its dot-prefixes (``C04.588.180`` adds ``C04.588`` and ``C04``). A position is one label node
with depth = number of segments (``C04`` = 1) and weight ``w = log(depth + 1)`` (Eq. 1 as
printed). A document's row is the weighted multi-hot vector over the nodes, L2-normalised, so the
label similarity ``SimL(p, q) = cos(y_p * w, y_q * w)`` is a dot product of rows.

Choices where the paper is silent (TRAINING.md marks them as interpretation):

- All headings count, not only the major ones (12.68 per abstract in the paper's data); the
  ``documents.mesh`` column holds plain descriptor names (MEDLINE's ``*`` major marks and
  ``/qualifier`` parts are stripped on import; :func:`kb_sources.medline.mesh_descriptor` is
  applied again here, so either form works).
- Check tags (:data:`DEFAULT_CHECK_TAGS`: Humans, Animals, sexes, age groups, Mice, Rats) are
  dropped before expansion. Kept, "Humans" (depth 11) dominates the vectors and only 0.4 % of
  random pairs share no label, so the contrastive term has almost no negatives.
- Headings missing from the workspace's tree (renamed since the tree's year) are skipped and
  counted in :attr:`MeshLabels.stats`.
- Documents from the reserved corpora (:data:`RESERVED_SOURCES`: BC5CDR and SETH, kept for outside
  checks) never give labels: a document whose ``source`` names one of them (as a word of the
  source name, e.g. ``bc5cdr`` or ``seth-test``) is excluded, with or without ``doc_ids``. A PMID
  that is also in a reserved corpus but was imported under another source cannot be recognised.

Optional ``entity_mesh=True`` adds the MeSH descriptors of the document's Disease and Chemical
annotations (ids such as ``D003920`` or ``MESH:D003920``). The annotations carry descriptor
*UIs*, the workspace's tree (``mtreesYYYY.bin``) carries descriptor *names*: the flag needs a
UI -> name mapping (``descriptor_names``; :func:`read_descriptor_names` reads NLM's ASCII
descriptor file ``dYYYY.bin`` or a TSV with ``descriptor_ui`` and ``descriptor`` columns;
:mod:`curation.training.recipes.biohicl.mesh_descriptors` can also derive one from the mentions
themselves) and raises :class:`~kb_sources.errors.CurationError` without one.
Supplementary-concept ids (``C000...``) have no tree number and are skipped.

Reading the workspace (tree, headings, annotations, reserved corpora) lives in
:mod:`curation.training.recipes.biohicl.mesh_inputs`, whose public names are re-exported here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from curation.training.recipes.biohicl.mesh_descriptors import read_descriptor_names
from curation.training.recipes.biohicl.mesh_inputs import (
    ENTITY_TYPES,
    FIX_HEADINGS,
    RESERVED_SOURCES,
    document_headings,
    entity_descriptors,
    is_reserved_source,
    no_descriptor_mapping,
    selected_documents,
    tree_numbers,
)
from kb_sources.errors import CurationError

if TYPE_CHECKING:
    from scipy import sparse

    from curation.store.workspace import Workspace

__all__ = ["DEFAULT_CHECK_TAGS", "ENTITY_TYPES", "RESERVED_SOURCES", "MeshLabels",
           "expand_tree_number", "is_reserved_source", "label_similarity",
           "label_similarity_matrix", "mesh_labels", "node_weight", "positive_partners",
           "read_descriptor_names"]

logger = logging.getLogger(__name__)

#: MeSH check tags dropped before expansion: they describe the study population, not the topic,
#: and sit deep in the tree ("Humans" at depth 11), so kept they dominate every vector
#: (TRAINING.md section 3, "Measured on the project's MeSH sample"). Pass ``check_tags`` to
#: :func:`mesh_labels` to change the set (``frozenset()`` keeps them all).
DEFAULT_CHECK_TAGS: frozenset[str] = frozenset({
    "Humans", "Animals", "Male", "Female",
    "Infant", "Infant, Newborn", "Child", "Child, Preschool", "Adolescent", "Young Adult",
    "Adult", "Middle Aged", "Aged", "Aged, 80 and over",
    "Mice", "Rats",
})

#: Default label-similarity threshold for a positive pair (the paper's beta).
DEFAULT_BETA = 0.3


def expand_tree_number(tree_number: str) -> list[str]:
    """A tree number and all its dot-prefixes, shallowest first.

    ``expand_tree_number("C04.588.180")`` -> ``["C04", "C04.588", "C04.588.180"]``.
    """
    parts = tree_number.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def node_weight(tree_number: str) -> float:
    """``log(depth + 1)`` with depth = number of segments (``C04`` -> log 2 = 0.693)."""
    return math.log(tree_number.count(".") + 2)


@dataclass(frozen=True)
class MeshLabels:
    """Weighted multi-hot MeSH label rows, one per document.

    Attributes:
        doc_ids: Document ids, row order.
        nodes: Tree numbers, column order (sorted).
        matrix: CSR matrix (documents x nodes), float64; row ``i`` is document ``i``'s weighted
            multi-hot vector ``y * w``, L2-normalised (an all-zero row: no label).
        heading_counts: Per document, the distinct descriptors that reached the tree (check tags
            and headings missing from the tree not counted).
        check_tags: The check tags that were dropped.
        entity_mesh: Whether entity annotations added labels.
        stats: Counts for the manifest: ``documents_excluded_reserved``,
            ``check_tag_assignments``, ``unknown_heading_assignments``, ``unknown_headings``
            (distinct names), and with ``entity_mesh`` ``entity_descriptor_assignments``,
            ``entity_ids_unmapped``, ``entity_ids_not_descriptors``.
    """

    doc_ids: tuple[str, ...]
    nodes: tuple[str, ...]
    matrix: sparse.csr_matrix
    heading_counts: np.ndarray
    check_tags: frozenset[str] = DEFAULT_CHECK_TAGS
    entity_mesh: bool = False
    stats: Mapping[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.doc_ids)

    @property
    def node_index(self) -> dict[str, int]:
        """Tree number -> column."""
        return {node: i for i, node in enumerate(self.nodes)}

    @property
    def doc_index(self) -> dict[str, int]:
        """Document id -> row."""
        return {doc: i for i, doc in enumerate(self.doc_ids)}

    @property
    def labels_per_doc(self) -> np.ndarray:
        """Number of label nodes per document (its expanded tree positions)."""
        return np.diff(self.matrix.indptr)

    @property
    def has_labels(self) -> np.ndarray:
        """Boolean mask of documents with at least one label node."""
        return self.labels_per_doc > 0

    def row(self, key: int | str) -> int:
        """Row of a document given as row number or document id.

        Raises:
            CurationError: Unknown document id or row out of range.
        """
        if isinstance(key, str):
            try:
                return self.doc_ids.index(key)
            except ValueError:
                raise CurationError(f"document {key!r} has no row in these MeSH labels "
                                    f"({len(self.doc_ids)} documents)") from None
        if not 0 <= key < len(self.doc_ids):
            raise CurationError(f"row {key} is out of range: the labels have "
                                f"{len(self.doc_ids)} documents")
        return int(key)

    def summary(self, beta: float = DEFAULT_BETA, pairs: int = 20_000,
                seed: int = 0) -> dict[str, Any]:
        """Coverage statistics for the training manifest (JSON-serialisable).

        Random pairs are drawn (seeded, with replacement, never a document with itself) among the
        documents that have labels.

        Args:
            beta: Threshold of a positive pair.
            pairs: Number of random pairs.
            seed: Seed of the pair sample.

        Returns:
            ``documents``, ``documents_with_labels``, ``nodes``, ``mean_labels_per_doc`` and
            ``mean_headings_per_doc`` (over documents with labels), ``beta``, ``random_pairs``,
            ``share_above_beta``, ``share_zero``, ``mean_label_similarity`` (None without two
            labelled documents), ``check_tags``, ``entity_mesh`` and the :attr:`stats` counts.
        """
        labelled = np.flatnonzero(self.has_labels)
        k = len(labelled)
        out: dict[str, Any] = {
            "documents": len(self.doc_ids),
            "documents_with_labels": k,
            "nodes": len(self.nodes),
            "mean_labels_per_doc": float(self.labels_per_doc[labelled].mean()) if k else 0.0,
            "mean_headings_per_doc": float(self.heading_counts[labelled].mean()) if k else 0.0,
            "beta": float(beta),
            "random_pairs": 0,
            "share_above_beta": None,
            "share_zero": None,
            "mean_label_similarity": None,
        }
        if k >= 2 and pairs > 0:
            rng = np.random.default_rng(seed)
            first = rng.integers(0, k, pairs)
            second = rng.integers(0, k - 1, pairs)
            second += second >= first  # never a document with itself
            a, b = self.matrix[labelled[first]], self.matrix[labelled[second]]
            sims = np.asarray(a.multiply(b).sum(axis=1)).ravel()
            out.update(random_pairs=int(pairs), share_above_beta=float((sims > beta).mean()),
                       share_zero=float((sims <= 0.0).mean()),
                       mean_label_similarity=float(sims.mean()))
        out["check_tags"] = sorted(self.check_tags)
        out["entity_mesh"] = self.entity_mesh
        out.update({key: int(value) for key, value in self.stats.items()})
        return out


def mesh_labels(ws: Workspace, doc_ids: Sequence[str] | None = None, *, entity_mesh: bool = False,
                check_tags: Iterable[str] = DEFAULT_CHECK_TAGS,
                descriptor_names: Mapping[str, str] | None = None) -> MeshLabels:
    """Build the BioHiCL label rows of documents from a workspace.

    Args:
        ws: The workspace (read only; a read-only workspace works).
        doc_ids: Documents, in row order; unlabelled ones get an all-zero row. ``None``: every
            document with MeSH headings (with ``entity_mesh``, also those with Disease or
            Chemical annotations) that ends up with at least one label, ordered by id. Documents
            of reserved corpora are dropped either way (logged).
        entity_mesh: Also take descriptors from Disease/Chemical annotations (needs
            ``descriptor_names``).
        check_tags: Descriptor names dropped before expansion (default
            :data:`DEFAULT_CHECK_TAGS`).
        descriptor_names: MeSH descriptor UI (``D003920``) -> descriptor name, for
            ``entity_mesh``; see :func:`read_descriptor_names`.

    Returns:
        The :class:`MeshLabels`.

    Raises:
        CurationError: The workspace has no MeSH tree or no document with labels, ``doc_ids``
            names unknown documents, a ``mesh`` column is not a JSON list, or ``entity_mesh``
            lacks ``descriptor_names``; the message names the fix.
    """
    from scipy import sparse

    tags = frozenset(check_tags)
    if entity_mesh and not descriptor_names:
        raise no_descriptor_mapping()
    tree = tree_numbers(ws)
    rows, excluded = selected_documents(ws, doc_ids, entity_mesh)
    if excluded:
        logger.warning("MeSH labels: %d document(s) of reserved corpora (%s) excluded", excluded,
                       ", ".join(RESERVED_SOURCES))
    entity_terms, entity_stats = (entity_descriptors(ws, [r[0] for r in rows], descriptor_names
                                                     or {}) if entity_mesh else ({}, {}))
    counts = {"documents_excluded_reserved": excluded, "check_tag_assignments": 0,
              "unknown_heading_assignments": 0}
    unknown: set[str] = set()
    doc_nodes: list[set[str]] = []
    headings_reached: list[int] = []
    for doc_id, mesh in rows:
        descriptors = dict.fromkeys(document_headings(doc_id, mesh))
        descriptors.update(dict.fromkeys(entity_terms.get(doc_id, ())))
        nodes: set[str] = set()
        reached = 0
        for name in descriptors:
            if name in tags:
                counts["check_tag_assignments"] += 1
                continue
            numbers = tree.get(name)
            if not numbers:
                counts["unknown_heading_assignments"] += 1
                unknown.add(name)
                continue
            reached += 1
            for number in numbers:
                nodes.update(expand_tree_number(number))
        doc_nodes.append(nodes)
        headings_reached.append(reached)
    if doc_ids is None:  # the training set: documents that ended up with labels
        keep = [i for i, nodes in enumerate(doc_nodes) if nodes]
        rows = [rows[i] for i in keep]
        doc_nodes = [doc_nodes[i] for i in keep]
        headings_reached = [headings_reached[i] for i in keep]
    if not any(doc_nodes):
        raise CurationError(
            f"none of the {len(rows)} selected document(s) in workspace {ws.root} has a MeSH "
            f"heading in the tree (after dropping check tags); {FIX_HEADINGS}")
    if unknown:
        logger.info("MeSH labels: %d heading assignment(s) of %d name(s) not in the tree "
                    "skipped, e.g. %s", counts["unknown_heading_assignments"], len(unknown),
                    ", ".join(sorted(unknown)[:5]))
    nodes_sorted = sorted(set().union(*doc_nodes))
    column = {node: i for i, node in enumerate(nodes_sorted)}
    weights = np.array([node_weight(n) for n in nodes_sorted], dtype=np.float64)
    indptr = [0]
    indices: list[int] = []
    for nodes in doc_nodes:
        indices.extend(sorted(column[n] for n in nodes))
        indptr.append(len(indices))
    cols = np.asarray(indices, dtype=np.int64)
    data = weights[cols]
    ptr = np.asarray(indptr, dtype=np.int64)
    for start, end in zip(ptr[:-1], ptr[1:], strict=True):  # L2-normalise each row
        norm = np.sqrt(np.dot(data[start:end], data[start:end]))
        if norm > 0:
            data[start:end] /= norm
    matrix = sparse.csr_matrix((data, cols, ptr), shape=(len(rows), len(nodes_sorted)))
    counts["unknown_headings"] = len(unknown)
    counts.update(entity_stats)
    labels = MeshLabels(tuple(r[0] for r in rows), tuple(nodes_sorted), matrix,
                        np.asarray(headings_reached, dtype=np.int64), tags, entity_mesh, counts)
    logger.info("MeSH labels: %d documents, %d with labels, %d nodes, %.1f nodes per document",
                len(labels), int(labels.has_labels.sum()), len(nodes_sorted),
                float(labels.labels_per_doc[labels.has_labels].mean()))
    return labels


def label_similarity(labels: MeshLabels, i: int | str, j: int | str) -> float:
    """``SimL`` of two documents (rows or document ids): the cosine of their label rows.

    Raises:
        CurationError: Unknown document or row.
    """
    a, b = labels.matrix[labels.row(i)], labels.matrix[labels.row(j)]
    return float(a.multiply(b).sum())


def label_similarity_matrix(labels: MeshLabels,
                            rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """``SimL`` between all pairs of a set of rows (dense, rows x rows).

    Args:
        labels: The labels.
        rows: Row numbers; ``None`` for all (only sensible for a few thousand documents).

    Returns:
        A float64 array; an unlabelled document has similarity 0 with everyone, itself included.
    """
    sub = labels.matrix if rows is None else labels.matrix[np.asarray(rows, dtype=np.int64)]
    return np.asarray((sub @ sub.T).toarray())


def positive_partners(labels: MeshLabels, beta: float = DEFAULT_BETA, *,
                      max_partners: int | None = None, seed: int = 0) -> list[np.ndarray]:
    """For each document, the other documents with ``SimL > beta`` (sorted row numbers).

    Computed in row blocks of the sparse product, so memory stays near ``block x documents``.
    With many documents the lists grow quadratically (about 10 % of all pairs pass beta = 0.3
    without check tags): ``max_partners`` keeps a seeded random subset per document, enough for
    a batch sampler that draws one partner per anchor.

    Args:
        labels: The labels.
        beta: Threshold (0 <= beta < 1).
        max_partners: Keep at most this many partners per document (None: all).
        seed: Seed of the subset.

    Returns:
        One int64 array per row.

    Raises:
        CurationError: ``beta`` outside [0, 1) or ``max_partners`` below 1.
    """
    if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0.0 <= beta < 1.0:
        raise CurationError(f"beta must be a number in [0, 1) (the paper uses 0.3), got {beta!r}")
    if max_partners is not None and (isinstance(max_partners, bool) or
                                     not isinstance(max_partners, int) or max_partners < 1):
        raise CurationError(f"max_partners must be a positive integer or None, got "
                            f"{max_partners!r}")
    rng = np.random.default_rng(seed)
    matrix = labels.matrix
    n = matrix.shape[0]
    transposed = matrix.T.tocsc()
    block = max(1, min(n, 20_000_000 // max(n, 1)))
    partners: list[np.ndarray] = []
    for start in range(0, n, block):
        product = (matrix[start:start + block] @ transposed).tocsr()
        for offset in range(product.shape[0]):
            lo, hi = product.indptr[offset], product.indptr[offset + 1]
            cols = product.indices[lo:hi][product.data[lo:hi] > beta]
            cols = cols[cols != start + offset]
            if max_partners is not None and len(cols) > max_partners:
                cols = rng.choice(cols, size=max_partners, replace=False)
            partners.append(np.sort(cols).astype(np.int64))
    return partners
