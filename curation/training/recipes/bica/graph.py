"""The document graph and the walks of BiCA's triplets
(:mod:`curation.training.recipes.bica.triplets`).

* :class:`Graph`, :class:`CitationDirection`: which edges the walks follow and how;
  :class:`NegativeSource`: where a negative comes from;
* :func:`base_vectors`: the walk's fixed encoder, documents through the workspace embedding
  cache (:class:`BaseVectors`);
* the plumbing of :func:`~curation.training.recipes.bica.triplets.build_bica_examples`: one
  walk per query text (:class:`WalkUnit`), the adjacency of the chosen graph (citations, kNN or
  both: :func:`graph_adjacency`), document vectors fetched once and checked
  (:class:`DocVectors`), and the seeded walks of :func:`retrievers.training.walks.walk_negatives`
  (:func:`walk_all`). The options they read are :class:`WalkSettings`
  (:class:`~curation.training.recipes.bica.triplets.BicaConfig` has them); the workspace's
  citation edges come from :meth:`~curation.store.citations.Citations.edges`.

Moved out of :mod:`curation.training.recipes.bica.triplets`, which re-exports the names its
callers use; this module does not import it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

import numpy as np
from tqdm.auto import tqdm

from curation.evaluation.harness import EvalQuery
from curation.store.documents import Documents
from curation.store.models import Models
from curation.store.workspace import Workspace
from curation.training.recipes.edel.examples import DEFAULT_DOCUMENT_FORMAT
from kb_sources.errors import CurationError
from retrievers.encoder import DEFAULT_MODEL
from retrievers.errors import RetrieverError
from retrievers.training.walks import knn_graph, walk_negatives

logger = logging.getLogger(__name__)

#: doc ids (or query texts) -> L2-normalised float32 vectors, one row per input, in input order.
VectorFunction = Callable[[list[str]], np.ndarray]

_NORM_TOLERANCE = 1e-2  # float16 encoders normalise to about 1e-3


class Graph(StrEnum):
    """Which edges the walks follow."""

    CITATIONS = "citations"
    KNN = "knn"
    BOTH = "both"


class CitationDirection(StrEnum):
    """How citation edges are followed."""

    BOTH = "both"  # citing -> cited and cited -> citing
    OUT = "out"  # citing -> cited only (BiCA)


class NegativeSource(StrEnum):
    WALK = "walk"
    RANDOM = "random"
    BM25 = "bm25"


class WalkSettings(Protocol):
    """The walk options :func:`graph_adjacency` and :func:`walk_all` read (see
    :class:`~curation.training.recipes.bica.triplets.BicaConfig`, which has them all)."""

    @property
    def graph(self) -> str: ...  # a Graph value

    @property
    def citation_direction(self) -> str: ...  # a CitationDirection value

    @property
    def knn_k(self) -> int: ...

    @property
    def n_paths(self) -> int: ...

    @property
    def path_length(self) -> int: ...

    @property
    def top_k(self) -> int: ...

    @property
    def include_random(self) -> bool: ...

    @property
    def seed(self) -> int: ...


class BaseVectors(NamedTuple):
    """The walk's encoder as two functions (see :func:`base_vectors`); unpacks as a pair.

    ``documents.model_id`` names the encoder (its embedding-cache key).
    """

    documents: VectorFunction
    queries: VectorFunction

    @property
    def model_id(self) -> str:
        return str(getattr(self.documents, "model_id", "injected"))


def base_vectors(ws: Workspace, model: str = DEFAULT_MODEL,
                 document_format: str = DEFAULT_DOCUMENT_FORMAT, max_seq_length: int = 256,
                 progress: bool = True) -> BaseVectors:
    """Document and query vectors of a fixed encoder, documents through the workspace cache.

    Document vectors are read from (and written to) ``WS/cache/embeddings`` under the encoder's
    ``model_id``, as dense indexes do, so texts embedded once are never embedded again.

    Args:
        ws: The workspace (document texts and cache).
        model: HF name, local folder or a registry version of the workspace (its verified
            folder, token limit and cache key are used).
        document_format: How a document becomes the text that is embedded.
        max_seq_length: Token limit (a registry version's own limit wins).
        progress: tqdm bar while documents are encoded.

    Returns:
        :class:`BaseVectors` ``(documents, queries)``: ``documents(doc_ids)`` and
        ``queries(texts)``, L2-normalised float32 rows in input order;
        ``documents.model_id`` is the encoder's cache key.
    """
    from retrievers.cache import EmbeddingCache, encode_with_cache
    from retrievers.encoder import Encoder, EncoderConfig

    options: dict[str, Any] = {"model": model, "max_seq_length": max_seq_length}
    if Models(ws).is_version(model):
        found = Models(ws).options(model)
        options = {k: found[k] for k in ("model", "model_version", "max_seq_length")}
    encoder = Encoder(EncoderConfig(**options, normalize=True))
    cache = EmbeddingCache(ws.root / "cache" / "embeddings", encoder.model_id)
    texts: dict[str, str] = {}

    def documents(doc_ids: list[str]) -> np.ndarray:
        if not texts:
            for doc_id, title, abstract in Documents(ws).all_parts():
                texts[doc_id] = document_format.format(title=title, abstract=abstract).strip()
        missing = [d for d in doc_ids if d not in texts]
        if missing:
            raise CurationError(f"{len(missing)} documents are not in the workspace (first "
                                f"{missing[0]!r}); pass doc ids of workspace documents")
        return encode_with_cache([texts[d] for d in doc_ids], encoder, cache, progress=progress)

    def queries(query_texts: list[str]) -> np.ndarray:
        return encoder.encode_queries(list(query_texts))

    documents.model_id = encoder.model_id  # type: ignore[attr-defined]
    return BaseVectors(documents, queries)


@dataclass(frozen=True)
class WalkUnit:
    """One walk: a query text, its positives (the walk's seeds) and its exclusions.

    Attributes:
        query: The KB query.
        text: The query text the walk starts from.
        kind: Where the text comes from (a ``QuerySource`` value of
            :mod:`~curation.training.recipes.bica.triplets`).
        positives: The walk's seeds.
        exclude: Documents never taken as negatives.
    """

    query: EvalQuery
    text: str
    kind: str
    positives: tuple[str, ...]
    exclude: frozenset[str]


class DocVectors:
    """Document vectors fetched once per document through the vector function, then kept."""

    def __init__(self, fn: VectorFunction) -> None:
        self.fn = fn
        self.rows: dict[str, np.ndarray] = {}

    def matrix(self, ids: Sequence[str]) -> np.ndarray:
        """Vectors of ``ids`` (checked), shape (len(ids), dim)."""
        missing = [d for d in dict.fromkeys(ids) if d not in self.rows]
        if missing:
            found = _checked(self.fn(missing), len(missing), "vectors")
            self.rows.update(zip(missing, found, strict=True))
        if not ids:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.rows[d] for d in ids])


def graph_adjacency(config: WalkSettings, citations: Sequence[tuple[str, str]],
                    doc_vectors: DocVectors, corpus: Sequence[str]) -> dict[str, list[str]]:
    """doc id -> neighbours (sorted citation neighbours, then kNN neighbours by similarity)."""
    adjacency: dict[str, list[str]] = {}
    if config.graph != Graph.KNN:
        both = config.citation_direction == CitationDirection.BOTH
        linked: dict[str, set[str]] = {}
        for citing, cited in citations:
            linked.setdefault(citing, set()).add(cited)
            if both:
                linked.setdefault(cited, set()).add(citing)
        adjacency = {d: sorted(nbs) for d, nbs in linked.items()}
    if config.graph != Graph.CITATIONS and corpus:
        logger.info("kNN graph (k=%d) over %d documents", config.knn_k, len(corpus))
        for i, nbs in enumerate(knn_graph(doc_vectors.matrix(corpus), config.knn_k)):
            row = adjacency.setdefault(corpus[i], [])
            seen = set(row)
            row += [corpus[j] for j in nbs if corpus[j] not in seen]
    return adjacency


def _checked(matrix: object, rows: int, what: str) -> np.ndarray:
    """The vectors a function returned, checked: (rows, dim) floats with unit norm."""
    arr = np.asarray(matrix)
    if arr.ndim != 2 or arr.shape[0] != rows or not np.issubdtype(arr.dtype, np.floating):
        raise CurationError(f"{what} returned an array of shape {arr.shape} ({arr.dtype}); "
                            f"expected {rows} rows of floats, one per input, in input order")
    norms = np.linalg.norm(arr, axis=1)
    if rows and (not np.all(np.isfinite(norms)) or np.any(np.abs(norms - 1) > _NORM_TOLERANCE)):
        raise CurationError(f"{what} returned rows that are not L2-normalised (norms "
                            f"{norms.min():.3f}..{norms.max():.3f}); normalise them (cosine = "
                            "dot product)")
    return arr.astype(np.float32, copy=False)


def _unit_seed(seed: int, unit: WalkUnit) -> int:
    key = f"{seed}\t{unit.query.qid}\t{unit.kind}\t{','.join(unit.positives)}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def walk_all(config: WalkSettings, walks: Sequence[tuple[int, WalkUnit, list[str], list[str]]],
             doc_vectors: DocVectors, query_vectors: VectorFunction, progress: bool
             ) -> dict[int, list[tuple[str, str]]]:
    """unit index -> [(doc id, source)] of every walked unit (paths first, then random)."""
    out: dict[int, list[tuple[str, str]]] = {}
    if not walks:
        return out
    ids = sorted({d for _, _, hop1, cands in walks for d in (*hop1, *cands)})
    row = {d: i for i, d in enumerate(ids)}
    matrix = doc_vectors.matrix(ids)
    texts = sorted({unit.text for _, unit, _, _ in walks})
    qrow = {t: i for i, t in enumerate(texts)}
    qmatrix = _checked(query_vectors(texts), len(texts), "query_vectors")
    for i, unit, hop1, cands in tqdm(walks, desc="BiCA walks", disable=not progress,
                                     mininterval=0.5):
        try:
            result = walk_negatives(
                qmatrix[qrow[unit.text]], [row[d] for d in hop1], [row[d] for d in cands],
                matrix, n_paths=config.n_paths, path_length=config.path_length,
                top_k=config.top_k, include_random=config.include_random,
                exclude=[row[d] for d in unit.exclude if d in row],
                rng=_unit_seed(config.seed, unit))
        except RetrieverError as exc:
            raise CurationError(f"BiCA walk of query {unit.query.qid!r}: {exc}") from exc
        negs = [(ids[r], NegativeSource.WALK.value) for path in result.paths for r in path]
        if result.random is not None:
            negs.append((ids[result.random], NegativeSource.RANDOM.value))
        out[i] = negs
    return out
