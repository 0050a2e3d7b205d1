"""The screening queue of one partial relation: every candidate, scored once, rows cached.

A queue holds the whole candidate set of a query (the first stages' top N, N =
:data:`SCREENING_DEPTH` by default, plus extra ids such as the relation's PubMed hits), the
ranker's score of each (the static order), the calibrated prior log-odds, and the rows the
per-query model reads: TF-IDF over the candidate set itself (:mod:`curation.screening.tfidf`:
unigrams and bigrams, sublinear tf, vocabulary fitted on these candidates only and capped at
:data:`~curation.screening.tfidf.MAX_TERMS` terms, each row L2-normalised, float32) and, when
given, dense embeddings as extra columns. Building a queue is the slow part (features, TF-IDF);
re-scoring after a label only fits the model on the cached rows
(:mod:`curation.screening.learner`). A queue's memory and build time grow linearly with its
candidates' text (docs/SCALING.md, "Screening queues").

A relation ranked by something other than the learned ranker (BM25, the entity rerank, dense,
hybrid) gets its queue from that ranking's order (:func:`order_queue`): the candidates in the
order the page ranks them, their places read by a rank-only calibration
(:mod:`curation.screening.sources`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from curation.ranking.features import gather
from curation.ranking.model import Ranker
from curation.ranking.pipeline import RankingContext
from curation.screening.calibration import (
    DEFAULT_CALIBRATION,
    DEFAULT_RANK_CALIBRATION,
    Calibration,
)
from curation.screening.tfidf import MAX_TERMS, tfidf_rows
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Entity, joined_text

logger = logging.getLogger(__name__)

#: Candidates per first stage in a screening queue (N).
SCREENING_DEPTH = 1000
#: Weight of the dense block against the (unit-length) TF-IDF row.
DENSE_WEIGHT = 0.5


@dataclass(frozen=True)
class ScreeningQueue:
    """One query's candidates in the static order (best first) with their cached rows.

    Attributes:
        query_key: The partial relation (or list) the queue belongs to.
        doc_ids: Candidates, sorted by the ranker's score (ties: first-stage order).
        static: The ranker's score of each candidate (a queue built from a ranking's order:
            the score it had there, not necessarily descending).
        prior: Calibrated prior log-odds of each candidate.
        rows: One sparse float32 row per candidate (TF-IDF, then the dense block when given).
        terms: The TF-IDF vocabulary (column names of the TF-IDF block).
        calibration: What turned the scores into ``prior``.
    """

    query_key: str
    doc_ids: tuple[str, ...]
    static: np.ndarray = field(repr=False)
    prior: np.ndarray = field(repr=False)
    rows: sp.csr_matrix = field(repr=False)
    terms: tuple[str, ...] = field(repr=False)
    calibration: Calibration = DEFAULT_CALIBRATION
    _index: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _ids: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {d: i for i, d in enumerate(self.doc_ids)})
        ids = np.empty(len(self.doc_ids), dtype=object)
        ids[:] = self.doc_ids
        object.__setattr__(self, "_ids", ids)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def index(self) -> Mapping[str, int]:
        """doc id -> row (built once per queue; read it, do not change it)."""
        return self._index

    def ids_at(self, rows: np.ndarray) -> list[str]:
        """The doc ids of queue ``rows`` (an index array), in that order."""
        return self._ids[rows].tolist()

    @property
    def nbytes(self) -> int:
        """Bytes the queue keeps: its arrays, its rows and its id and term strings."""
        arrays = (self.rows.data, self.rows.indices, self.rows.indptr, self.static, self.prior,
                  self._ids)
        strings = sum(sys.getsizeof(s) for s in (*self.doc_ids, *self.terms))
        return (sum(a.nbytes for a in arrays) + strings + sys.getsizeof(self.doc_ids)
                + sys.getsizeof(self.terms))


def build_queue(query_key: str, doc_ids: Sequence[str], texts: Sequence[str],
                static: Sequence[float], *, calibration: Calibration = DEFAULT_CALIBRATION,
                dense: np.ndarray | None = None, max_terms: int = MAX_TERMS,
                ranked: bool = False) -> ScreeningQueue:
    """A queue from candidates, their texts and ranker scores (any order; sorted here).

    Args:
        query_key: The partial relation's key.
        doc_ids: Candidate ids (distinct).
        texts: Each candidate's title + abstract.
        static: Each candidate's ranker score.
        calibration: Score -> prior log-odds.
        dense: Optional embeddings, one row per candidate (L2-normalised here).
        max_terms: TF-IDF columns kept at most (the terms in the most candidates).
        ranked: The candidates come best first (a ranking's order, whose scores need not
            descend: the entity rerank's head, then the first stage's): kept in that order,
            and the calibration reads their places (give a rank-only one).

    Raises:
        CurationError: Lengths differ, an id repeats, or a score is not finite.
    """
    n = len(doc_ids)
    scores = np.asarray(static, dtype=np.float64)
    if len(texts) != n or len(scores) != n or (dense is not None and len(dense) != n):
        raise CurationError(f"Screening queue {query_key!r}: {n} candidates but {len(texts)} "
                            f"texts and {len(scores)} scores; give one of each per candidate")
    if len(set(doc_ids)) != n:
        raise CurationError(f"Screening queue {query_key!r}: a candidate id repeats; give "
                            "each document once")
    if not np.all(np.isfinite(scores)):
        raise CurationError(f"Screening queue {query_key!r}: a ranker score is not finite")
    order = np.arange(n) if ranked else np.argsort(-scores, kind="stable")  # ties: as given
    rows, terms = tfidf_rows([texts[i] for i in order], max_terms=max_terms)
    if dense is not None and len(order):
        block = np.asarray(dense, dtype=np.float64)[order]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        block = (DENSE_WEIGHT * block / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        rows = sp.hstack([rows, sp.csr_matrix(block)], format="csr", dtype=np.float32)
    ordered = scores[order]
    prior = calibration.log_odds(-np.arange(n, dtype=np.float64) if ranked else ordered)
    return ScreeningQueue(query_key, tuple(doc_ids[i] for i in order), ordered, prior, rows,
                          terms, calibration)


def relation_queue(ctx: RankingContext, ranker: Ranker, text: str,
                   query: Mapping[str, Sequence[Entity]], query_key: str = "", *,
                   depth: int = SCREENING_DEPTH, extra: Sequence[str] = (),
                   calibration: Calibration = DEFAULT_CALIBRATION) -> ScreeningQueue:
    """The queue of one partial relation: BM25's (and the open dense indexes') top ``depth``
    plus ``extra`` ids (its PubMed hits, labelled documents), scored by ``ranker``
    (:func:`screening_candidates`).

    Raises:
        CurationError: ``depth`` is below 1.
    """
    doc_ids, x = screening_candidates(ctx, text, query, query_key, depth=depth, extra=extra)
    scores = ranker.score(x) if len(doc_ids) else np.zeros(0)
    texts = [joined_text(*ctx.parts.get(d, ("", ""))) for d in doc_ids]
    logger.info("screening queue %s: %d candidates", query_key, len(doc_ids))
    return build_queue(query_key, doc_ids, texts, scores, calibration=calibration)


def order_queue(ws: Workspace, query_key: str, ranked: Sequence[tuple[str, float]], *,
                extra: Sequence[str] = (),
                calibration: Calibration = DEFAULT_RANK_CALIBRATION) -> ScreeningQueue:
    """The queue of a relation ranked by something other than the learned ranker.

    Args:
        ws: The workspace (the candidates' texts).
        query_key: The partial relation's key.
        ranked: (doc id, score) best first, as the ranking orders them (to the queue's depth);
            the scores are kept (cards show them), the places make the prior.
        extra: Ids to screen after them (its labelled documents, its PubMed hits; score 0).
        calibration: A rank-only calibration (slope 0).

    Raises:
        CurationError: ``calibration`` has a score term: an order has no comparable scores.
    """
    if calibration.slope != 0:
        raise CurationError(f"Screening queue {query_key!r}: a queue built from an order needs "
                            f"a rank-only calibration (slope 0), got slope {calibration.slope}; "
                            "fit one with fit_calibration(..., rank_only=True)")
    scores = dict(ranked)
    ids = list(dict.fromkeys([*scores, *extra]))
    rows = Documents(ws).rows_by_id(ids)
    texts = [rows[d].text if d in rows else "" for d in ids]
    logger.info("screening queue %s: %d candidates in the ranking's order", query_key, len(ids))
    return build_queue(query_key, ids, texts, [scores.get(d, 0.0) for d in ids],
                       calibration=calibration, ranked=True)


def screening_candidates(ctx: RankingContext, text: str, query: Mapping[str, Sequence[Entity]],
                         query_key: str = "", *, depth: int = SCREENING_DEPTH,
                         extra: Sequence[str] = ()) -> tuple[tuple[str, ...], np.ndarray]:
    """A screening queue's candidates (BM25's and the open dense indexes' top ``depth``, plus
    ``extra`` ids) and their ranker feature rows: what a queue scores, and what a ranker round
    calibrates a version's scores on.

    Raises:
        CurationError: ``depth`` is below 1.
    """
    if depth < 1:
        raise CurationError(f"A screening queue needs depth >= 1 candidates, got {depth}")
    dense = ctx.dense.search(text, depth) if ctx.dense is not None else None
    base = ctx.base.search(text, depth) if ctx.base is not None else None
    cands = gather(ctx.bm25.search(text, depth), dense, base, depth=depth, extra=extra)
    return tuple(cands.doc_ids), ctx.features(query, cands, query_key)


def trim_queues(cache: dict, count: int, budget: int) -> None:
    """Drop the oldest of a session's cached queues until at most ``count`` are left and those
    left hold at most ``budget`` bytes; the newest is always kept. A value is a queue, a tuple
    whose first item is one, or anything else (counted as 0 bytes: why none could be built)."""
    sizes = {k: _nbytes(v) for k, v in cache.items()}
    while len(cache) > 1 and (len(cache) > count or sum(sizes.values()) > budget):
        oldest = next(iter(cache))
        del cache[oldest], sizes[oldest]


def _nbytes(value: Any) -> int:
    queue = value[0] if isinstance(value, tuple) else value
    return queue.nbytes if isinstance(queue, ScreeningQueue) else 0
