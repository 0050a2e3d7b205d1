"""Evaluation harness: KB relations of a schema as queries over the workspace's documents.

A task is a schema + its KB relations (as partial relations: query slots -> known answers and
cited PMIDs) + the workspace corpus + a split. Splits are by query entity (the first query slot:
the gene for PO, the substrate for PTM, the disease for disease_gene), seeded, so that no entity
has queries in two splits (as EDEL does against leakage). Gold documents are the cited PMIDs
present in the corpus (binary relevance); queries without one are left out.

Metrics: NDCG@10/50, MAP@10/50 and Recall@100 from trec_eval (pytrec_eval), and EDEL's
EntityRecall@k: the share of a query's answer entities mentioned in some top-k document that also
mentions the query entity (the matcher decides "mentioned").
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from curation.matching.matcher import EntityMatcher
from curation.store.documents import Documents
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import Workspace
from curation.templates import render_query
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema
from kb_sources.types import Entity
from retrievers.base import Hit

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
TREC_MEASURES = {"ndcg_cut.10": "ndcg@10", "ndcg_cut.50": "ndcg@50", "map_cut.10": "map@10",
                 "map_cut.50": "map@50", "recall.100": "recall@100"}
ER_KS = (10, 50)


@dataclass(frozen=True)
class EvalQuery:
    """One evaluation query (a partial relation with gold documents in the corpus)."""

    qid: str
    text: str
    group: str
    split: str
    query: dict[str, tuple[Entity, ...]]
    answers: tuple[Entity, ...]
    gold: tuple[str, ...]

    @property
    def anchor(self) -> tuple[Entity, ...]:
        """The query entity an answer must co-occur with (first query slot)."""
        return next(iter(self.query.values()), ())


@dataclass(frozen=True)
class EvalTask:
    schema: str
    queries: tuple[EvalQuery, ...]
    seed: int
    fractions: tuple[float, float, float]

    def split(self, name: str) -> list[EvalQuery]:
        if name == "all":
            return list(self.queries)
        if name not in SPLITS:
            raise CurationError(f"Unknown split {name!r}. Available options: all, "
                                f"{', '.join(SPLITS)}")
        return [q for q in self.queries if q.split == name]


#: Seed of the train/dev/test split by query entity (``kbcurate evaluate`` and every trainer).
SPLIT_SEED = 13
#: Shares of the query-entity groups in train, dev and test.
SPLIT_FRACTIONS: tuple[float, float, float] = (0.6, 0.2, 0.2)
#: Below this many scored queries a mean metric is too noisy to choose by (the training gate
#: uses the same bound, ``curation.training.gate.MIN_TEST_QUERIES``).
MIN_SCORED_QUERIES = 20


def assign_splits(groups: Iterable[str], seed: int = SPLIT_SEED,
                  fractions: tuple[float, float, float] = SPLIT_FRACTIONS) -> dict[str, str]:
    """Seeded assignment of query-entity groups to train/dev/test by the given fractions."""
    if abs(sum(fractions) - 1.0) > 1e-6 or min(fractions) < 0:
        raise CurationError(f"Split fractions {fractions} must be non-negative and sum to 1")
    ordered = sorted(set(groups))
    random.Random(seed).shuffle(ordered)
    n = len(ordered)
    cut1 = round(n * fractions[0])
    cut2 = cut1 + round(n * fractions[1])
    return {g: ("train" if i < cut1 else "dev" if i < cut2 else "test")
            for i, g in enumerate(ordered)}


def build_task(ws: Workspace, schema: str, *, source: str | None = None,
               seed: int = SPLIT_SEED,
               fractions: tuple[float, float, float] = SPLIT_FRACTIONS) -> EvalTask:
    """Queries of one schema from the workspace's relations and documents."""
    sch = get_schema(schema, ws.schemas())
    partials = Relations(ws).partial(sch.name, source=source)
    corpus = Documents(ws).ids()
    usable = [(p, tuple(x for x in p.pmids if x in corpus)) for p in partials]
    usable = [(p, gold) for p, gold in usable if gold]
    if not usable:
        raise CurationError(
            f"No {sch.name} relation cites a document that is in the workspace; import the "
            "cited abstracts (kbcurate import docs / fetch pubmed) before evaluating")
    groups = {p.query_key: _group_key(p) for p, _ in usable}
    splits = assign_splits(groups.values(), seed, fractions)
    queries = tuple(
        EvalQuery(qid=p.query_key, text=render_query(sch, p.query).text,
                  group=groups[p.query_key], split=splits[groups[p.query_key]], query=p.query,
                  answers=_distinct(e for ents in p.answers for e in ents), gold=gold)
        for p, gold in usable)
    logger.info("task %s: %d queries (%s)", sch.name, len(queries), ", ".join(
        f"{s} {sum(q.split == s for q in queries)}" for s in SPLITS))
    return EvalTask(sch.name, queries, seed, fractions)


def _group_key(p: PartialRelation) -> str:
    first = next(iter(p.query.values()), ())
    return ",".join(sorted(e.key for e in first))


def _distinct(entities: Iterable[Entity]) -> tuple[Entity, ...]:
    out: dict[str, Entity] = {}
    for e in entities:
        out.setdefault(e.key, e)
    return tuple(out.values())


def trec_metrics(queries: Sequence[EvalQuery],
                 run: dict[str, list[Hit]]) -> dict[str, dict[str, float]]:
    """Per-query NDCG/MAP/Recall from trec_eval: qid -> metric name -> value."""
    import pytrec_eval

    qrels = {q.qid: {d: 1 for d in q.gold} for q in queries}
    scored = {q.qid: {h.doc_id: float(len(run.get(q.qid, [])) - h.rank + 1)
                      for h in run.get(q.qid, [])} for q in queries}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_MEASURES))
    raw = evaluator.evaluate({qid: docs for qid, docs in scored.items() if docs})
    out = {}
    for q in queries:
        values = raw.get(q.qid, {})
        out[q.qid] = {name: float(values.get(key.replace(".", "_"), 0.0))
                      for key, name in TREC_MEASURES.items()}
    return out


def entity_recall(query: EvalQuery, hits: Sequence[Hit], k: int, doc_text: Callable[[str], str],
                  matcher: EntityMatcher) -> float | None:
    """EDEL EntityRecall@k of one query (None when the query has no answer entity)."""
    if not query.answers:
        return None
    texts = [doc_text(h.doc_id) for h in hits[:k]]
    texts = [t for t in texts if any(matcher.mentions(a, t) for a in query.anchor)]
    found = sum(any(matcher.mentions(ans, t) for t in texts) for ans in query.answers)
    return found / len(query.answers)


@dataclass(frozen=True)
class RetrieverResult:
    """Mean metrics of one retriever and its per-query values."""

    name: str
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(repr=False)

    @property
    def n_queries(self) -> int:
        return len(self.per_query)


def score_run(queries: Sequence[EvalQuery], run: dict[str, list[Hit]], name: str,
              doc_text: Callable[[str], str], matcher: EntityMatcher) -> RetrieverResult:
    """All metrics of one ranked run."""
    per_query = trec_metrics(queries, run)
    for q in queries:
        for k in ER_KS:
            value = entity_recall(q, run.get(q.qid, []), k, doc_text, matcher)
            if value is not None:
                per_query[q.qid][f"entity_recall@{k}"] = value
    names = list(TREC_MEASURES.values()) + [f"entity_recall@{k}" for k in ER_KS]
    means = {}
    for m in names:
        values = [v[m] for v in per_query.values() if m in v]
        means[m] = sum(values) / len(values) if values else float("nan")
    return RetrieverResult(name, means, per_query)


@dataclass(frozen=True)
class EvaluationReport:
    """What an evaluation measured (returned across wings instead of a plain dict).

    Attributes:
        schema: The schema whose KB relations were the queries.
        split: "train", "dev", "test" or "all".
        seed: The split's seed.
        queries: Queries in the split.
        retrievers: Retriever -> metric name -> mean over its queries, and ``queries``: how
            many it was scored on.
        per_query: Retriever -> query id -> metric -> value.
    """

    schema: str
    split: str
    seed: int
    queries: int
    retrievers: dict[str, dict[str, float]]
    per_query: dict[str, dict[str, dict[str, float]]]

    def metric(self, retriever: str, name: str) -> float:
        """One retriever's mean of one metric ("ndcg@10", "entity_recall@10", "queries")."""
        return float(self.retrievers[retriever][name])

    @property
    def warnings(self) -> list[str]:
        """Why the figures may not be trusted: too few scored queries (one line each)."""
        return small_sample_warnings(self.split, self.queries,
                                     {name: int(m.get("queries", 0))
                                      for name, m in self.retrievers.items()})

    def to_json(self) -> dict[str, Any]:
        """The JSON report (``kbcurate evaluate --out``, an evaluation job's result)."""
        return {"schema": self.schema, "split": self.split, "seed": self.seed,
                "queries": self.queries, "retrievers": self.retrievers,
                "per_query": self.per_query, "warnings": self.warnings}


def small_sample_warnings(split: str, queries: int, scored: Mapping[str, int]) -> list[str]:
    """One warning when the split, or a retriever's scored share of it, has fewer than
    :data:`MIN_SCORED_QUERIES` queries.

    Args:
        split: The split's name.
        queries: Queries in the split.
        scored: Retriever -> how many queries it was scored on.
    """
    fewest = min([queries, *scored.values()]) if scored else queries
    if fewest >= MIN_SCORED_QUERIES:
        return []
    if fewest == 0:
        return [f"No {split} query could be scored: no relation of the split cites a document "
                "of the workspace; import the cited abstracts"]
    return [f"Scored on only {fewest} {split} queries (< {MIN_SCORED_QUERIES}): the means are "
            "too noisy to choose between rankings (one query moves NDCG@10 by up to "
            f"{1 / fewest:.2f}); import more of the cited abstracts, or evaluate on a larger "
            "split (--split all)"]


def evaluation_report(task: EvalTask, split: str, results: Sequence[RetrieverResult]
                      ) -> EvaluationReport:
    """The report of ``results``: per retriever, metric name -> mean and the number of queries."""
    return EvaluationReport(
        task.schema, split, task.seed, len(task.split(split)),
        {r.name: {**r.metrics, "queries": r.n_queries} for r in results},
        {r.name: r.per_query for r in results})


def format_table(report: EvaluationReport | Mapping[str, Any]) -> str:
    """A plain-text table of the report's mean metrics (a report or its JSON)."""
    if isinstance(report, EvaluationReport):
        report = report.to_json()
    metrics = list(TREC_MEASURES.values()) + [f"entity_recall@{k}" for k in ER_KS]
    header = f"{'retriever':<22}" + "".join(f"{m.replace('entity_recall', 'ER'):>11}"
                                           for m in metrics) + f"{'queries':>9}"
    lines = [f"{report['schema']} / {report['split']}", header]
    for name, values in report["retrievers"].items():
        lines.append(f"{name:<22}" + "".join(f"{values[m]:>11.3f}" for m in metrics)
                     + f"{values['queries']:>9}")
    return "\n".join(lines)
