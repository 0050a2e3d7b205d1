"""Running an evaluation: build/load the indexes, rank every query, score, report.

Used by ``kbcurate evaluate`` (foreground, progress bars) and by the ``evaluate`` background job
of the app (progress into the job row).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from tqdm.auto import tqdm

from curation.evaluation.harness import (
    EvalQuery,
    EvalTask,
    EvaluationReport,
    build_task,
    evaluation_report,
    score_run,
)
from curation.matching.matcher import EntityMatcher
from curation.ranking.cross import CrossFeature, version_cross
from curation.ranking.pipeline import RANKED, RankingContext
from curation.ranking.versions import active_version, load_ranker
from curation.search.choices import RetrieverChoice, parse_retriever_choice
from curation.search.indexing import get_index
from curation.search.ranked import version_first_stages
from curation.search.rerank import RERANK_SUFFIX, EntityReranker, RerankConfig
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.schema import get_schema
from kb_sources.types import joined_text
from retrievers.base import Hit, Retriever
from retrievers.registry import retriever_names

logger = logging.getLogger(__name__)

#: Hits kept per query (Recall@100 needs 100).
DEPTH = 100
Report = Callable[[float, str], None]


def check_retriever_names(names: Sequence[str]) -> None:
    """Fail early, listing the options, when a retriever name is unknown ("dense · V" and
    "hybrid · V" name a model version: the version is checked when its index is opened)."""
    available = retriever_names()
    for name in names:
        try:
            base = RetrieverChoice.parse(name).retriever
        except CurationError:
            base = name
        if base not in available and name != RANKED:
            options = ", ".join(available + [n + RERANK_SUFFIX for n in available] + [RANKED])
            raise CurationError(f"Unknown retriever {name!r}. Available options: {options}")


def evaluate_workspace(
    ws: Workspace,
    schema: str,
    retrievers: Sequence[str],
    *,
    split: str = "test",
    options: dict[str, dict[str, Any]] | None = None,
    report: Report | None = None,
    progress: bool = True,
    task: EvalTask | None = None,
) -> EvaluationReport:
    """Evaluate retrievers on a schema's queries; returns the report (``.to_json()``).

    Args:
        ws: Workspace with the KB relations and the corpus.
        schema: Schema whose relations are the queries.
        retrievers: Registered names, each optionally with "+rerank" (entity-aware rerank).
        split: "train", "dev", "test" or "all".
        options: Retriever name -> options (e.g. {"dense": {"model": "/path/to/model"}}).
        report: Progress callback ``(fraction, message)`` (background jobs).
        progress: Show progress bars (CLI).
        task: The schema's task when the caller built it already (a training round), so the
            relations are not read and split again.
    """
    check_retriever_names(retrievers)
    task = task if task is not None and task.schema == schema else build_task(ws, schema)
    queries = task.split(split)
    if not queries:
        raise CurationError(f"The {split} split of {task.schema} has no query; use --split all")
    texts = {doc_id: joined_text(title, abstract)
             for doc_id, title, abstract in Documents(ws).all_parts()}
    matcher = EntityMatcher()
    results = []
    for i, name in enumerate(retrievers):
        step = _scaled(report, i, len(retrievers), name) if report else None
        if name == RANKED:
            run = ranked_queries(ws, task, queries, matcher, progress=progress and not report)
        else:
            retriever, opts = _retriever_options(ws, schema, name, options or {})
            run = rank_queries(ws, name, queries, texts.__getitem__, matcher, options=opts,
                               report=step, progress=progress, retriever=retriever)
        if step:
            step(0.95, "scoring")
        results.append(score_run(queries, run, name, texts.__getitem__, matcher))
    if report:
        report(1.0, "done")
    return evaluation_report(task, split, results)


def _retriever_options(ws: Workspace, schema: str, name: str,
                       options: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """(registered retriever, its options) of an entry: "dense · V" (a model version, as in the
    app's menu; "dense · active" pinned to the schema's active one now) or a plain name with the
    caller's options."""
    choice = RetrieverChoice.parse(name)
    base = str(RetrieverChoice(choice.retriever, choice.version))  # without "+rerank"
    if choice.version is not None:
        return parse_retriever_choice(base, ws=ws, schema=schema)
    return base, options.get(base, {})


def _scaled(report: Report, i: int, n: int, name: str) -> Report:
    """Map one retriever's progress (0..1) onto its share of the whole evaluation."""
    def step(fraction: float, message: str) -> None:
        report((i + fraction) / n, f"{name}: {message}")
    return step


def rank_queries(ws: Workspace, name: str, queries: Sequence[EvalQuery],
                 doc_text: Callable[[str], str], matcher: EntityMatcher, *,
                 options: dict[str, Any], report: Report | None,
                 progress: bool, retriever: str | None = None) -> dict[str, list[Hit]]:
    """qid -> top-DEPTH hits of one retriever (optionally entity-reranked); ``retriever`` is
    the registered name when ``name`` is a menu entry ("dense · V")."""
    base_name = retriever or name.removesuffix(RERANK_SUFFIX)

    def index_progress(done: int, total: int) -> None:
        if report:
            report(0.8 * done / max(total, 1), f"indexing {done:,}/{total:,}")

    base = get_index(ws, base_name, options, progress=index_progress if report else progress)
    reranker = (EntityReranker(base, doc_text, matcher, RerankConfig(depth=DEPTH))
                if name.endswith(RERANK_SUFFIX) else None)
    run = {}
    for j, q in enumerate(tqdm(queries, desc=f"rank {name}", disable=not progress or bool(report),
                               mininterval=0.5)):
        entities = [e for ents in q.query.values() for e in ents]
        run[q.qid] = (reranker.search(q.text, entities, DEPTH) if reranker
                      else base.search(q.text, DEPTH))
        if report and j % 20 == 0:
            report(0.8 + 0.15 * j / len(queries), f"ranking {j}/{len(queries)} queries")
    return run


def ranking_context(ws: Workspace, task: EvalTask, *, dense: Retriever | None = None,
                    base: Retriever | None = None, matcher: EntityMatcher | None = None,
                    depth: int = DEPTH, progress: bool = False,
                    stale_ok: bool = False, cross: CrossFeature | None = None
                    ) -> RankingContext:
    """The ranking context of a task over BM25 (built when missing; a saved one even when
    stale with ``stale_ok``: see :func:`get_index`), held out: its answer-type dictionary holds
    only the answers of train-split relations, so no dev or test relation reaches a feature.
    ``cross``: the cross-encoder block (its cached scores, computing missing ones when it has
    a scorer)."""
    keys = {a.key for q in task.split("train") for a in q.answers}
    return RankingContext(ws, get_schema(task.schema, ws.schemas()),
                          get_index(ws, "bm25", progress=progress, stale_ok=stale_ok),
                          dense=dense, base=base, matcher=matcher, depth=depth,
                          answer_keys=keys, cross=cross)


def ranked_queries(ws: Workspace, task: EvalTask, queries: Sequence[EvalQuery],
                   matcher: EntityMatcher, *, progress: bool) -> dict[str, list[Hit]]:
    """qid -> top-DEPTH hits of the schema's active ranker version (over BM25's top DEPTH).

    The answer-type dictionary holds only the answers of train-split relations, so no held-out
    relation reaches a feature (:class:`~curation.ranking.pipeline.RankingContext`). A version
    trained with the cross-encoder's score reads the cache and scores the pairs missing from it
    with the cross version it was trained with (an evaluation is a batch job, not a page).

    Raises:
        CurationError: The schema has no active ranker version.
    """
    version = active_version(ws, task.schema)
    if version is None:
        raise CurationError(f"{task.schema} has no active ranker version; train one with "
                            f"`kbcurate rank train --schema {task.schema}`")
    ranker = load_ranker(version)
    dense, base = version_first_stages(ws, version, build=True, progress=progress)
    ctx = ranking_context(ws, task, dense=dense, base=base, matcher=matcher,
                          depth=int(version.manifest.get("depth", DEPTH)), progress=progress,
                          cross=version_cross(ws, version.manifest, compute=True))
    return {q.qid: [r.hit for r in ctx.rank(ranker, q.text, q.query, DEPTH, q.qid)]
            for q in tqdm(queries, desc=f"rank {RANKED} ({version.id})", disable=not progress,
                          mininterval=0.5)}


def run_evaluation(ctx: Any, schema: str, retrievers: list[str], split: str = "test",
                   options: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Background job entry point (see :mod:`curation.jobs.queue`)."""
    return evaluate_workspace(ctx.ws, schema, retrievers, split=split, options=options,
                              report=ctx.progress, progress=False).to_json()
