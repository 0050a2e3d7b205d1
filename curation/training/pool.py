"""Scoring a model folder on a **pool** of documents instead of the whole corpus.

A pool holds the gold documents of the queries, the BM25 top ``depth`` of each and ``n_random``
seeded random corpus documents; every query is ranked by cosine over the pool. Encoding a pool
costs seconds where a full-corpus encoding costs minutes on a CPU, so training uses it to choose
the epoch (dev split) and the simulation to score rounds (test split). Its absolute numbers are
higher than a full-corpus evaluation's (fewer distractors); they compare models, nothing more.
``kbcurate evaluate`` and the retraining gate score the full corpus.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from curation.evaluation.harness import EvalQuery, score_run
from curation.matching.matcher import EntityMatcher
from curation.search.indexing import get_index
from curation.store.documents import Documents, document_text
from curation.store.workspace import Workspace
from retrievers.base import Hit, Progress

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DocumentPool:
    """The pool's documents (sorted ids, texts in the model's format) and its queries."""

    queries: tuple[EvalQuery, ...]
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    raw: dict[str, str]


def build_pool(ws: Workspace, queries: Sequence[EvalQuery], document_format: str, *,
               depth: int = 20, n_random: int = 500, seed: int = 42) -> DocumentPool:
    """Gold documents + BM25 top ``depth`` per query + ``n_random`` random documents."""
    rows = Documents(ws).all_parts()
    raw = {r[0]: document_text(r[1], r[2]) for r in rows}
    pool = {d for q in queries for d in q.gold if d in raw}
    if depth > 0:
        bm25 = get_index(ws, "bm25", progress=False)
        pool |= {h.doc_id for q in queries for h in bm25.search(q.text, depth)}
    rest = sorted(set(raw) - pool)
    pool |= set(random.Random(seed).sample(rest, min(n_random, len(rest))))
    chosen = sorted((r for r in rows if r[0] in pool), key=lambda r: r[0])
    texts = tuple(document_text(r[1], r[2], document_format) for r in chosen)
    logger.info("pool: %d queries, %d documents", len(queries), len(chosen))
    return DocumentPool(tuple(queries), tuple(r[0] for r in chosen), texts, raw)


def score_model(folder: str | Path, pool: DocumentPool, *, max_seq_length: int,
                matcher: EntityMatcher, name: str = "model", device: str | None = None,
                progress: Progress = False) -> dict[str, float]:
    """Every metric of ``kbcurate evaluate`` for a sentence-transformers folder on a pool
    (``progress``: a bar, or ``fn(done, total)`` over the pool's documents as they encode)."""
    import numpy as np

    from retrievers.encoder import Encoder, EncoderConfig

    encoder = Encoder(EncoderConfig(model=str(folder), max_seq_length=max_seq_length,
                                    device=device or "auto"))
    docs = encoder.encode_documents(list(pool.texts), progress=progress)  # (n_docs, dim)
    qv = encoder.encode_queries([q.text for q in pool.queries])  # (n_q, dim)
    sims = qv @ docs.T  # (n_q, n_docs)
    run = {}
    for i, q in enumerate(pool.queries):
        top = np.argsort(-sims[i], kind="stable")[:100]
        run[q.qid] = [Hit(pool.ids[j], float(sims[i, j]), r + 1) for r, j in enumerate(top)]
    result = score_run(list(pool.queries), run, name, pool.raw.__getitem__, matcher)
    return {k: float(v) for k, v in result.metrics.items()}


def pool_scorer(ws: Workspace, queries: Sequence[EvalQuery], document_format: str, *,
                max_seq_length: int, matcher: EntityMatcher, depth: int = 20,
                n_random: int = 500, seed: int = 42) -> Callable[[Path, int], float] | None:
    """``fn(model_folder, epoch) -> NDCG@10`` on a pool of ``queries`` (None: no queries)."""
    if not queries:
        return None
    pool = build_pool(ws, queries, document_format, depth=depth, n_random=n_random, seed=seed)

    def score(folder: Path, epoch: int) -> float:
        metrics = score_model(folder, pool, max_seq_length=max_seq_length, matcher=matcher,
                              name=f"epoch {epoch}")
        logger.info("epoch %d: pool NDCG@10 %.4f, ER@10 %.4f", epoch, metrics["ndcg@10"],
                    metrics["entity_recall@10"])
        return metrics["ndcg@10"]

    return score
