"""The held-out measurement behind a ranker round's gate (issue 36 items 3 and 4).

The version that serves learns from the KB's train-split relations **and every label** (labels
of dev and test relations included). The gate still needs queries a version did not learn from,
so it measures on the **held-out pool**, the dev and test queries (the seeded split by query
entity of ``kbcurate evaluate``; no KB grade of theirs is ever trained on), by **grouped k-fold**:
the pool's query groups (the first query entity: the gene for PO, the disease for
disease_gene) are dealt into :data:`FOLDS` folds, seeded; each query is scored by a model that
learned none of its own fold's labels. A fold whose groups carry no label is scored by the
serving model itself (it learned nothing about them), so a round without held-out labels costs
no extra fit; a fold with labels by a model fitted on everything else (seconds). Labels of
relations outside the pool (no cited abstract in the workspace) that share a fold's group are
left out of that fold's model too.

Why k-fold rather than a rotating or a time-based hold-out: every held-out query counts in every
round (a rotating hold-out drops the queries curators labelled, which are the ones they care
about, and makes two rounds' scores incomparable), and the measurement needs no label at all
(gold is the KB's citations, as in ``kbcurate evaluate``), so it is as large as dev + test
(195 queries on disease_gene, where the dev split alone had 98); a time-based hold-out of the
newest labels would measure agreement with a few labels, not search quality. The simulation
(:mod:`curation.simulation.ranker`) reports both the candidate's and the reference's
out-of-fold scores per round.

The candidate is compared with the active version on the same queries: its out-of-fold scores
are stored with it (``heldout_per_query`` in its manifest, with the pool's fingerprint), so the
next round reuses them while the pool is unchanged; otherwise the active version's model is
scored on the pool's queries whose groups it learned no label of, and the candidate on the same
queries. A first version is compared with the measured default, bm25 + the entity rerank, on
the whole pool.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from curation.evaluation.harness import EvalQuery, score_run
from curation.ranking.model import Ranker
from curation.ranking.pipeline import RankingContext
from curation.search.rerank import EntityReranker, RerankConfig
from kb_sources.types import Entity, joined_text
from retrievers.base import Hit

#: Folds of the held-out pool (fewer when the pool has fewer query groups).
FOLDS = 5
#: Seed of the deal of query groups into folds.
FOLD_SEED = 13
#: The splits whose queries form the held-out pool.
POOL_SPLITS = ("dev", "test")
#: The measured default a first version must beat.
DEFAULT_CONFIGURATION = "bm25+rerank"
#: Per-query metrics kept with a version (what the gate compares).
KEPT_METRICS = ("ndcg@10", "entity_recall@10")
#: Hits scored per query (Recall@100 needs 100).
DEPTH = 100


def group_of(query: Mapping[str, Sequence[Entity]]) -> str:
    """The query group of a partial relation: its first query slot's entity keys (the same
    grouping as the evaluation splits)."""
    first = next(iter(query.values()), ())
    return ",".join(sorted(e.key for e in first))


def doc_texts(ctx: RankingContext) -> dict[str, str]:
    """doc id -> title + abstract, read from the store when first asked for."""
    class _Lazy(dict):
        def __missing__(self, doc_id: str) -> str:
            ctx.parts.load([doc_id])
            title, abstract = ctx.parts.get(doc_id, ("", ""))
            self[doc_id] = joined_text(title, abstract)
            return self[doc_id]
    return _Lazy()


@dataclass(frozen=True)
class Prepared:
    """One query's candidates and feature rows, built once per round."""

    q: EvalQuery
    doc_ids: tuple[str, ...]
    x: np.ndarray


def prepare(ctx: RankingContext, queries: Sequence[EvalQuery], *, progress: bool = False
            ) -> list[Prepared]:
    """Candidates (the first stage's top N, no labelled extras) and features of ``queries``."""
    out = []
    for q in tqdm(queries, desc=f"held-out features {ctx.schema.name}", disable=not progress,
                  mininterval=0.5):
        cands = ctx.candidates(q.text)
        out.append(Prepared(q, cands.doc_ids, ctx.features(q.query, cands, q.qid)))
    return out


def top_hits(model: Ranker, item: Prepared, k: int = DEPTH) -> list[Hit]:
    """The model's top ``k`` of a prepared query (ties: the first stage's order), as
    :meth:`RankingContext.rank` orders them."""
    scores = model.score(item.x)
    order = sorted(range(len(item.doc_ids)), key=lambda i: (-scores[i], i))[:k]
    return [Hit(item.doc_ids[i], float(scores[i]), r, "ranked")
            for r, i in enumerate(order, start=1)]


def assign_folds(groups: Iterable[str], k: int = FOLDS, seed: int = FOLD_SEED) -> dict[str, int]:
    """Seeded deal of query groups into ``k`` folds (round robin after a shuffle)."""
    ordered = sorted(set(groups))
    random.Random(seed).shuffle(ordered)
    k = max(1, min(k, len(ordered)))
    return {g: i % k for i, g in enumerate(ordered)}


def pool_fingerprint(queries: Sequence[EvalQuery], folds: Mapping[str, int]) -> str:
    """SHA-256 of the pool (query ids, groups, gold documents) and its folds: two rounds with the
    same fingerprint measure the same thing."""
    items = sorted((q.qid, q.group, sorted(q.gold), folds.get(q.group, -1)) for q in queries)
    return hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Measurement:
    """Mean metrics of one configuration on (part of) the held-out pool, and per query."""

    name: str
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]

    def on(self, qids: Iterable[str]) -> Measurement:
        """The same measurement restricted to ``qids`` (means recomputed)."""
        keep = {q: self.per_query[q] for q in qids if q in self.per_query}
        return Measurement(self.name, means(keep), keep)

    @property
    def queries(self) -> int:
        return len(self.per_query)


def means(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over the queries that have it, and ``queries``."""
    names = sorted({m for v in per_query.values() for m in v})
    out: dict[str, float] = {}
    for m in names:
        values = [v[m] for v in per_query.values() if m in v]
        out[m] = sum(values) / len(values)
    out["queries"] = len(per_query)
    return out


def measure(ctx: RankingContext, name: str, queries: Sequence[EvalQuery],
            run: Mapping[str, list[Hit]], texts: Mapping[str, str] | None = None
            ) -> Measurement:
    """Every metric of ``run`` on ``queries`` (means), keeping :data:`KEPT_METRICS` per query."""
    texts = texts if texts is not None else doc_texts(ctx)
    result = score_run(queries, dict(run), name, texts.__getitem__, ctx.builder.matcher)
    per_query = {qid: {m: v for m, v in values.items() if m in KEPT_METRICS}
                 for qid, values in result.per_query.items()}
    return Measurement(name, {**result.metrics, "queries": len(queries)}, per_query)


def out_of_fold(prepared: Sequence[Prepared], folds: Mapping[str, int], served: Ranker,
                learned_groups: set[str], fit_without: Callable[[set[str]], Ranker],
                extra_rows: Mapping[str, np.ndarray] | None = None,
                scores: dict[str, np.ndarray] | None = None
                ) -> tuple[dict[str, list[Hit]], int]:
    """Each pool query's top hits by a model that learned no label of its fold: the served
    model for folds without labels, ``fit_without(the fold's groups)`` for the others.
    Returns (qid -> hits, how many models were fitted); ``scores``, when given, receives the
    same out-of-fold model's scores of ``extra_rows[qid]`` (feature rows of a deeper candidate
    list: the screening calibration's data) for the queries that have them."""
    run: dict[str, list[Hit]] = {}
    refits = 0
    for fold in sorted(set(folds.values())):
        groups = {g for g, f in folds.items() if f == fold}
        model = served
        if groups & learned_groups:
            model = fit_without(groups)
            refits += 1
        for item in prepared:
            if item.q.group in groups:
                run[item.q.qid] = top_hits(model, item)
                if scores is not None and extra_rows and item.q.qid in extra_rows:
                    rows = extra_rows[item.q.qid]
                    scores[item.q.qid] = np.asarray(model.score(rows) if len(rows) else
                                                    np.zeros(0), dtype=np.float64)
    return run, refits


def default_run(ctx: RankingContext, queries: Sequence[EvalQuery],
                texts: Mapping[str, str] | None = None) -> dict[str, list[Hit]]:
    """The measured default's hits (bm25 + the entity rerank over BM25's top 100), as
    ``kbcurate evaluate --retriever bm25+rerank`` ranks them."""
    texts = texts if texts is not None else doc_texts(ctx)
    reranker = EntityReranker(ctx.bm25, texts.__getitem__, ctx.builder.matcher,
                              RerankConfig(depth=DEPTH))
    return {q.qid: reranker.search(q.text, [e for ents in q.query.values() for e in ents], DEPTH)
            for q in queries}


def per_query_json(m: Measurement) -> dict[str, Any]:
    """The per-query scores as stored with a version (rounded)."""
    return {qid: {k: round(v, 6) for k, v in values.items()}
            for qid, values in sorted(m.per_query.items())}


def stored_measurement(name: str, data: Any) -> Measurement | None:
    """A measurement read back from a version's ``heldout_per_query`` (None when malformed)."""
    if not isinstance(data, dict):
        return None
    per_query: dict[str, dict[str, float]] = {}
    for qid, values in data.items():
        if not isinstance(values, dict):
            return None
        per_query[str(qid)] = {str(k): float(v) for k, v in values.items()
                               if isinstance(v, int | float) and not isinstance(v, bool)}
    return Measurement(name, means(per_query), per_query)
