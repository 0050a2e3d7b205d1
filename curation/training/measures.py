"""How a round measures a recipe's versions: :data:`MEASURES` by the recipe's ``measured_by``.

* ``"dense"`` (:class:`DenseMeasure`; EDEL, BiCA, BioHiCL): a bi-encoder is measured as a
  retriever: the dev pool's NDCG@10 picks the epoch (:mod:`curation.training.pool`), the test
  split is scored on the whole corpus or a test pool (:mod:`curation.training.scoring`), the
  active version is ``Models.active`` and a promotion builds its index first
  (:mod:`curation.training.activation`).
* ``"rerank"`` (:class:`RerankMeasure`; the ``cross`` recipe and imported cross-encoders): a
  cross-encoder re-ranks the first stage's top K (BM25, over the whole corpus) of each dev or
  test query; the metrics are those of ``kbcurate evaluate`` on the re-ranked list. Its active
  version is the schema's active cross-encoder (:mod:`curation.training.cross_versions`); the
  first one must beat the first stage it re-ranks (BM25 alone on the same queries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from curation.evaluation.harness import EvalQuery, EvalTask, score_run
from curation.matching.matcher import EntityMatcher
from curation.store.documents import PLAIN_FORMAT, Documents, document_text
from curation.store.models import Models, ModelVersion
from curation.store.workspace import Workspace
from curation.training.round_gate import scaled
from kb_sources.errors import CurationError
from retrievers.base import Hit

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]
#: The first stage a cross-encoder re-ranks.
FIRST_STAGE = "bm25"
#: Default K of the test measurement (BEIR re-ranks BM25's top 100).
RERANK_DEPTH = 100


class DenseMeasure:
    """A bi-encoder: encoded and ranked by cosine (module docstring)."""

    name = "dense"

    def evaluation(self, requested: str) -> str:
        return requested

    def active(self, ws: Workspace, schema: str) -> ModelVersion | None:
        return Models(ws).active(schema)

    def dev_scorer(self, ws: Workspace, task: EvalTask, options: Any, document_format: str,
                   matcher: EntityMatcher) -> Callable[[Path, int], float] | None:
        from curation.training.pool import pool_scorer

        if options.dev_depth <= 0:
            return None
        return pool_scorer(ws, task.split("dev"), document_format,
                           max_seq_length=options.max_seq_length, matcher=matcher,
                           depth=options.dev_depth, n_random=options.dev_random,
                           seed=options.seed)

    def score(self, ws: Workspace, task: EvalTask, roles: Mapping[str, ModelVersion], *,
              evaluation: str, seed: int, matcher: EntityMatcher, progress: bool,
              report: Report | None, left_out: Sequence[str]) -> dict[str, dict[str, float]]:
        from curation.training.scoring import score_versions

        return score_versions(ws, task, roles, evaluation=evaluation, seed=seed, matcher=matcher,
                              progress=progress, report=report, left_out=left_out)

    def first_reference(self, ws: Workspace, task: EvalTask, matcher: EntityMatcher,
                        version: ModelVersion) -> tuple[str, dict[str, float]] | None:
        """What a first ``version`` must beat (None: nothing, it becomes the first)."""
        return None

    def switch(self, ws: Workspace, ident: str, *, user: Any, reason: str, build_index: bool,
               on_progress: Any) -> ModelVersion:
        from curation.training.activation import switch_active

        return switch_active(ws, ident, user=user, reason=reason, build_index=build_index,
                             on_progress=on_progress)


class FirstStage:
    """BM25's top K per query and the documents' texts, loaded once per measurement."""

    def __init__(self, ws: Workspace) -> None:
        from curation.search.indexing import get_index

        self.index = get_index(ws, FIRST_STAGE, progress=False)
        self.parts = {r[0]: (r[1], r[2]) for r in Documents(ws).all_parts()}
        self._hits: dict[tuple[str, int], list[Hit]] = {}

    def hits(self, text: str, depth: int) -> list[Hit]:
        if (text, depth) not in self._hits:
            self._hits[(text, depth)] = list(self.index.search(text, depth))
        return self._hits[(text, depth)]

    def raw(self, doc_id: str) -> str:
        return document_text(*self.parts[doc_id])

    def text(self, doc_id: str, document_format: str) -> str:
        return document_text(*self.parts[doc_id], document_format)


def rerank_run(stage: FirstStage, queries: Sequence[EvalQuery], scorer: Any, *, depth: int,
               document_format: str = PLAIN_FORMAT, batch_size: int = 16,
               report: Callable[[int, int], None] | None = None) -> dict[str, list[Hit]]:
    """qid -> the first stage's top ``depth`` re-ranked by ``scorer`` (a ``CrossScorer``)."""
    run: dict[str, list[Hit]] = {}
    for i, q in enumerate(queries):
        hits = stage.hits(q.text, depth)
        scores = scorer.score(q.text, [stage.text(h.doc_id, document_format) for h in hits],
                              batch_size=batch_size)
        order = sorted(range(len(hits)), key=lambda j: (-float(scores[j]), j))
        run[q.qid] = [Hit(hits[j].doc_id, float(scores[j]), r + 1) for r, j in enumerate(order)]
        if report is not None:
            report(i + 1, len(queries))
    return run


def first_stage_metrics(stage: FirstStage, queries: Sequence[EvalQuery], depth: int,
                        matcher: EntityMatcher) -> dict[str, float]:
    """The metrics of the first stage alone (its top ``depth``) on ``queries``."""
    run = {q.qid: stage.hits(q.text, depth) for q in queries}
    return dict(score_run(list(queries), run, FIRST_STAGE, stage.raw, matcher).metrics)


def rerank_metrics(stage: FirstStage, queries: Sequence[EvalQuery], folder: str | Path, *,
                   depth: int, document_format: str, max_length: int, matcher: EntityMatcher,
                   name: str = "cross", report: Callable[[int, int], None] | None = None
                   ) -> dict[str, float]:
    """The metrics of ``folder``'s cross-encoder re-ranking the first stage's top ``depth``."""
    from retrievers.cross import CrossScorer
    from retrievers.errors import RetrieverError

    try:
        scorer = CrossScorer.load(folder, max_length=max_length)
    except RetrieverError as exc:
        raise CurationError(f"cannot load the cross-encoder {name}: {exc}") from exc
    run = rerank_run(stage, queries, scorer, depth=depth, document_format=document_format,
                     report=report)
    return {k: float(v) for k, v in
            score_run(list(queries), run, name, stage.raw, matcher).metrics.items()}


class RerankMeasure:
    """A cross-encoder: re-ranks BM25's top K (module docstring)."""

    name = "rerank"

    def evaluation(self, requested: str) -> str:
        return "corpus"  # re-ranking the corpus's BM25 top K costs no more than a pool would

    def active(self, ws: Workspace, schema: str) -> ModelVersion | None:
        from curation.training.cross_versions import active_cross

        return active_cross(ws, schema)

    def dev_scorer(self, ws: Workspace, task: EvalTask, options: Any, document_format: str,
                   matcher: EntityMatcher) -> Callable[[Path, int], float] | None:
        queries = task.split("dev")
        if options.dev_depth <= 0 or not queries:
            return None
        stage = FirstStage(ws)

        def score(folder: Path, epoch: int) -> float:
            metrics = rerank_metrics(stage, queries, folder, depth=options.dev_depth,
                                     document_format=document_format,
                                     max_length=options.max_seq_length, matcher=matcher,
                                     name=f"epoch {epoch}")
            logger.info("epoch %d: dev NDCG@10 %.4f re-ranking %s top %d", epoch,
                        metrics["ndcg@10"], FIRST_STAGE, options.dev_depth)
            return metrics["ndcg@10"]

        return score

    def score(self, ws: Workspace, task: EvalTask, roles: Mapping[str, ModelVersion], *,
              evaluation: str, seed: int, matcher: EntityMatcher, progress: bool,
              report: Report | None, left_out: Sequence[str]) -> dict[str, dict[str, float]]:
        queries = task.split("test")
        if not queries or not roles:
            return {}
        stage = FirstStage(ws)
        out = {}
        for i, (role, v) in enumerate(roles.items()):
            step = scaled(report, i / len(roles), (i + 1) / len(roles), f"re-ranking with {v.id}: ")
            out[role] = rerank_metrics(
                stage, queries, v.model_dir, depth=int(v.manifest.get("rerank_depth",
                                                                      RERANK_DEPTH)),
                document_format=v.manifest.get("document_format", PLAIN_FORMAT),
                max_length=int(v.manifest.get("max_seq_length", 256)), matcher=matcher,
                name=v.id, report=None if step is None else
                (lambda d, t, s=step: s(d / max(t, 1), f"{d:,}/{t:,} test queries")))
        return out

    def first_reference(self, ws: Workspace, task: EvalTask, matcher: EntityMatcher,
                        version: ModelVersion) -> tuple[str, dict[str, float]] | None:
        """The first stage alone, to the depth ``version`` re-ranks, on the same queries."""
        queries = task.split("test")
        if not queries:
            return None
        depth = int(version.manifest.get("rerank_depth", RERANK_DEPTH))
        return (f"{FIRST_STAGE}@{depth}",
                first_stage_metrics(FirstStage(ws), queries, depth, matcher))

    def switch(self, ws: Workspace, ident: str, *, user: Any, reason: str, build_index: bool,
               on_progress: Any) -> ModelVersion:
        from curation.training.cross_versions import activate_cross

        return activate_cross(ws, ident, user=user, reason=reason)


def evaluate_cross(ws: Workspace, version: ModelVersion, *, actor: str, progress: bool = False
                   ) -> ModelVersion:
    """Score a cross-encoder version on the schema's test split by re-ranking and record the
    metrics (``test_*``, ``warnings``), as a round ends (an import ends here)."""
    from curation.evaluation.harness import build_task
    from curation.training.scoring import prefixed, test_warning

    task = build_task(ws, version.schema)
    scores = RerankMeasure().score(ws, task, {"candidate": version}, evaluation="corpus",
                                   seed=42, matcher=EntityMatcher(), progress=progress,
                                   report=None, left_out=())
    warnings = [w for w in (test_warning(len(task.split("test"))),) if w is not None]
    for w in warnings:
        logger.warning("%s: %s", version.id, w)
    metrics = {**prefixed(ws, scores.get("candidate", {}), "corpus", 42), "warnings": warnings}
    return Models(ws).update_metrics(version.id, metrics, actor=actor)


#: ``measured_by`` -> how its versions are measured.
MEASURES: dict[str, DenseMeasure | RerankMeasure] = {"dense": DenseMeasure(),
                                                     "rerank": RerankMeasure()}


def measure_for(recipe: Any) -> DenseMeasure | RerankMeasure:
    """The measurement of a recipe (its ``measured_by``, default ``"dense"``).

    Raises:
        CurationError: An unknown ``measured_by`` (the message lists the known ones).
    """
    kind = getattr(recipe, "measured_by", "dense")
    if kind not in MEASURES:
        raise CurationError(f"Recipe {getattr(recipe, 'name', recipe)!r} is measured_by "
                            f"{kind!r}. Available options: {', '.join(MEASURES)}")
    return MEASURES[kind]
