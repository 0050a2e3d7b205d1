"""Fusing rankings: reciprocal rank fusion and min-max score fusion, and a retriever built on them.

The fusion functions know only rankings (lists of :class:`Hit`), so they fuse any retrievers
(BM25 + dense, two dense models, a reranked list). :class:`HybridRetriever` indexes the same
documents in each component and fuses their top ``depth`` hits.

References:
    Cormack, Clarke, Büttcher, "Reciprocal rank fusion outperforms Condorcet and individual rank
    learning methods", SIGIR 2009 (k = 60).
    Fox & Shaw, "Combination of multiple searches", TREC-2 1994 (CombSUM over normalised scores).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

from retrievers.base import Hit, Progress, Retriever, make_hits
from retrievers.errors import RetrieverError, check_options, unknown_name

logger = logging.getLogger(__name__)


class Fusion(StrEnum):
    """How rankings are combined."""

    RRF = "rrf"  #: sum of weight / (rrf_k + rank)
    SCORE = "score"  #: sum of weight * min-max normalised score


def _check_weights(rankings: Sequence[Sequence[Hit]], weights: Sequence[float] | None
                   ) -> list[float]:
    if weights is None:
        return [1.0] * len(rankings)
    weights = [float(w) for w in weights]
    if len(weights) != len(rankings):
        raise RetrieverError(f"got {len(weights)} weights for {len(rankings)} rankings; give "
                             "one weight per ranking (or none for equal weights)")
    if any(w < 0 for w in weights):
        raise RetrieverError(f"weights must be >= 0, got {weights}; use 0 to ignore a ranking")
    return weights


def rrf_fuse(rankings: Sequence[Sequence[Hit]], *, k: float = 60.0,
             weights: Sequence[float] | None = None, top_k: int | None = None,
             label: str = "hybrid:rrf") -> list[Hit]:
    """Reciprocal rank fusion: ``score(d) = sum_i weights[i] / (k + rank_i(d))``.

    A document missing from a ranking gets nothing from it. Ties keep first-seen order.

    Args:
        rankings: One hit list per retriever (ranks taken from ``Hit.rank``).
        k: Smoothing constant (60 in the paper); larger flattens the top ranks' advantage.
        weights: One weight per ranking; ``None`` for equal weights.
        top_k: Keep at most this many fused hits.
        label: ``retriever`` label of the fused hits.

    Returns:
        Fused hits, score descending, ranks 1..n.

    Raises:
        RetrieverError: Wrong number of weights, a negative weight, or ``k < 0``.
    """
    if k < 0:
        raise RetrieverError(f"rrf_k must be >= 0, got {k}; the usual value is 60")
    weights = _check_weights(rankings, weights)
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for hit in ranking:
            fused[hit.doc_id] = fused.get(hit.doc_id, 0.0) + weight / (k + hit.rank)
    return make_hits(fused.items(), label, top_k)


def minmax_fuse(rankings: Sequence[Sequence[Hit]], *, weights: Sequence[float] | None = None,
                top_k: int | None = None, label: str = "hybrid:score") -> list[Hit]:
    """Weighted sum of min-max normalised scores (CombSUM).

    Each ranking's scores are mapped to [0, 1] (all 1.0 when they are equal); a document missing
    from a ranking gets 0 from it.

    Args:
        rankings: One hit list per retriever.
        weights: One weight per ranking; ``None`` for equal weights.
        top_k: Keep at most this many fused hits.
        label: ``retriever`` label of the fused hits.

    Returns:
        Fused hits, score descending, ranks 1..n.

    Raises:
        RetrieverError: Wrong number of weights or a negative weight.
    """
    weights = _check_weights(rankings, weights)
    fused: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if not ranking:
            continue
        scores = [h.score for h in ranking]
        low, span = min(scores), max(scores) - min(scores)
        for hit in ranking:
            norm = (hit.score - low) / span if span > 0 else 1.0
            fused[hit.doc_id] = fused.get(hit.doc_id, 0.0) + weight * norm
    return make_hits(fused.items(), label, top_k)


def fuse(rankings: Sequence[Sequence[Hit]], method: str = "rrf", *,
         weights: Sequence[float] | None = None, rrf_k: float = 60.0, top_k: int | None = None,
         label: str | None = None) -> list[Hit]:
    """Fuse rankings with a :class:`Fusion` method ("rrf" or "score"); see the functions above.

    Raises:
        RetrieverError: Unknown method or bad weights.
    """
    method = _fusion(method)
    label = label or f"hybrid:{method}"
    if method == Fusion.RRF:
        return rrf_fuse(rankings, k=rrf_k, weights=weights, top_k=top_k, label=label)
    return minmax_fuse(rankings, weights=weights, top_k=top_k, label=label)


def _fusion(method: object) -> Fusion:
    try:
        return Fusion(str(method).lower())
    except ValueError:
        raise unknown_name("fusion method", method, [f.value for f in Fusion]) from None


class HybridRetriever(Retriever):
    """Index documents in several retrievers and fuse their rankings.

    Args:
        components: Name -> retriever (e.g. {"bm25": ..., "dense": ...}); names are used for
            weights and save folders.
        fusion: :class:`Fusion` name.
        weights: Name -> weight (missing names weigh 1.0).
        rrf_k: RRF constant.
        depth: Hits taken from each component before fusing (at least ``k``).
    """

    name = "hybrid"

    def __init__(self, components: Mapping[str, Retriever], *, fusion: str = "rrf",
                 weights: Mapping[str, float] | None = None, rrf_k: float = 60.0,
                 depth: int = 100) -> None:
        super().__init__()
        if not components:
            raise RetrieverError("a hybrid retriever needs at least one component, e.g. "
                                 "{'bm25': BM25Retriever(), 'dense': DenseRetriever()}")
        self.components = dict(components)
        self.fusion = _fusion(fusion).value
        weights = dict(weights or {})
        check_options(self.name + " weights", weights, self.components)
        self.weights = {n: float(weights.get(n, 1.0)) for n in self.components}
        if any(w < 0 for w in self.weights.values()):
            raise RetrieverError(f"weights must be >= 0, got {self.weights}; use 0 to ignore one")
        self.rrf_k = float(rrf_k)
        self.depth = int(depth)
        self._set_ids(next(iter(self.components.values())).doc_ids)  # components pre-indexed

    @classmethod
    def from_options(cls, **options: Any) -> Self:
        """Build from plain options.

        ``components`` (names from the registry, default ``["bm25", "dense"]``), ``fusion``,
        ``weights`` ({name: weight}), ``rrf_k``, ``depth``, and per component a dict of its own
        options under its name, e.g. ``dense={"model": "BAAI/bge-base-en-v1.5"}``.

        Raises:
            RetrieverError: Unknown option, component name or value.
        """
        from retrievers.registry import build_retriever

        names = list(options.pop("components", ["bm25", "dense"]))
        check_options(cls.name, options, ("fusion", "weights", "rrf_k", "depth", *names))
        components = {n: build_retriever(n, **dict(options.pop(n, None) or {})) for n in names}
        return cls(components, **options)

    @property
    def label(self) -> str:
        """``hybrid:<fusion>(<component labels>)``."""
        inner = "+".join(c.label for c in self.components.values())
        return f"hybrid:{self.fusion}({inner})"

    def component_rankings(self, queries: Sequence[str], k: int) -> dict[str, list[list[Hit]]]:
        """Each component's own hits for the queries (for evaluation or explanations).

        Returns:
            Component name -> one hit list per query.
        """
        return {n: c.search_batch(queries, k) for n, c in self.components.items()}

    def _reset(self) -> None:
        for component in self.components.values():
            component.index([], progress=False)

    def _add(self, ids: list[str], texts: list[str], progress: Progress) -> None:
        docs = list(zip(ids, texts, strict=True))
        for component in self.components.values():
            component.add(docs, progress=progress)

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        per_component = self.component_rankings(queries, max(k, self.depth))
        weights = list(self.weights.values())
        label = self.label
        return [
            fuse([per_component[n][i] for n in self.components], self.fusion, weights=weights,
                 rrf_k=self.rrf_k, top_k=k, label=label)
            for i in range(len(queries))
        ]

    def _save(self, folder: Path) -> dict[str, Any]:
        for name, component in self.components.items():
            component.write_to(folder / "components" / name)  # inside this save's swap
        return {"components": list(self.components), "fusion": self.fusion,
                "weights": self.weights, "rrf_k": self.rrf_k, "depth": self.depth}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any]) -> Self:
        from retrievers.registry import load_retriever

        components = {n: load_retriever(folder / "components" / n)
                      for n in manifest["components"]}
        return cls(components, fusion=manifest["fusion"], weights=manifest["weights"],
                   rrf_k=manifest["rrf_k"], depth=manifest["depth"])
