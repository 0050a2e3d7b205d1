"""Choosing each schema's default ranking: the best configuration measured on its held-out split.

``kbcurate evaluate --retriever best`` (and the ``evaluate`` job with ``best`` among its
retrievers) scores the configurations the workspace can run on the schema's held-out split:

* ``bm25`` and ``bm25+rerank`` always;
* ``hybrid+rerank`` over the schema's active dense version, when its hybrid index is built
  (encoding the corpus is a separate, long step: ``kbcurate index --retriever hybrid --model
  VERSION``);
* ``ranked``: the schema's active learned-ranker version.

The best by the metric (ties: the simpler configuration, in :data:`CONFIGURATIONS` order) is
recorded in the workspace with every score, the versions measured, the split and who measured
it (:meth:`~curation.store.rankers.Rankers.set_default_ranking`); the app opens the schema on
it and says why in the sidebar (:func:`curation.search.ranked.default_for`).

Two guards (issue 36 item 4): the active ranker learns from every label, so the test queries
whose query groups it learned labels of are left out of the comparison, for every configuration
(a note says how many); and a choice made on fewer than 20 scored queries is recorded with a
warning, shown wherever the default is named ("... on only 2 test queries (< 20): too few to
choose between rankings").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from curation.evaluation.harness import EvalTask, EvaluationReport, build_task
from curation.evaluation.runner import evaluate_workspace
from curation.ranking.learned import feature_versions, versions_learned_groups
from curation.ranking.pipeline import RANKED
from curation.ranking.versions import active_ranker
from curation.search.indexing import index_ready
from curation.store.errors import Actor, require_admin_actor
from curation.store.models import Models
from curation.store.rankers import Rankers, RankingChoice
from curation.store.workspace import Workspace, utcnow

logger = logging.getLogger(__name__)

#: The configurations compared, simplest first (the order breaks ties).
CONFIGURATIONS = ("bm25", "bm25+rerank", "hybrid+rerank", RANKED)
#: The retriever name that asks for the comparison.
BEST = "best"
METRIC = "ndcg@10"


def runnable(ws: Workspace, schema: str) -> tuple[list[str], dict[str, dict[str, Any]],
                                                  dict[str, str], list[str]]:
    """(configurations, evaluation options, versions measured, notes on what was left out)."""
    names = ["bm25", "bm25+rerank"]
    options: dict[str, dict[str, Any]] = {}
    versions: dict[str, str] = {}
    notes = []
    dense = Models(ws).active(schema)
    if dense is None:
        notes.append("hybrid+rerank: no active dense version")
    elif not index_ready(ws, "hybrid", {"dense": {"model": dense.id}}):
        notes.append(f"hybrid+rerank: the hybrid index over {dense.id} is not built "
                     f"(kbcurate index --retriever hybrid --model {dense.id})")
    else:
        names.append("hybrid+rerank")
        options["hybrid"] = {"dense": {"model": dense.id}}
        versions["dense_version"] = dense.id
    state = active_ranker(ws, schema)
    ranker = state.version
    if state.problem:
        notes.append(f"{RANKED}: the active ranker version cannot be used ({state.problem})")
    elif ranker is None:
        notes.append(f"{RANKED}: no active ranker version (kbcurate rank train --schema "
                     f"{schema})")
    else:
        names.append(RANKED)
        versions["ranker_version"] = ranker.id
    return names, options, versions, notes


def choose_default(ws: Workspace, schema: str, *, user: Actor, split: str = "test",
                   metric: str = METRIC, progress: bool = True,
                   report: Callable[[float, str], None] | None = None
                   ) -> tuple[EvaluationReport, RankingChoice]:
    """Measure the runnable configurations, record the best as the schema's default.

    Returns:
        (the evaluation report, the stored record).

    Raises:
        PermissionDenied: ``user`` is not an admin (checked before measuring).
    """
    require_admin_actor(user, "Choosing a schema's default ranking")
    names, options, versions, notes = runnable(ws, schema)
    task, left_out = unlearned_task(ws, schema, split, versions.get("ranker_version"),
                                    versions.get("dense_version"))
    notes += left_out
    result = evaluate_workspace(ws, schema, names, split=split, options=options,
                                report=report, progress=progress, task=task)
    scores = {name: result.metric(name, metric) for name in names}
    best = max(names, key=lambda n: (round(scores[n], 6), -CONFIGURATIONS.index(n)))
    record = RankingChoice(best=best, metric=metric, split=split, scores=scores,
                           queries=result.queries, seed=result.seed, notes=tuple(notes),
                           measured_at=utcnow(), by=user.name,
                           warnings=tuple(result.warnings), **versions)
    Rankers(ws).set_default_ranking(schema, record, user=user)
    logger.info("default ranking of %s: %s (%s %s %.3f)", schema, best, split, metric,
                scores[best])
    for warning in record.warnings:
        logger.warning("%s: %s", schema, warning)
    return result, record


def unlearned_task(ws: Workspace, schema: str, split: str, ranker_version: str | None,
                   dense_version: str | None = None) -> tuple[EvalTask, list[str]]:
    """The schema's task less the ``split`` queries whose query groups a measured version
    learned curators' labels of: the ranker version (it learns from every label), the dense
    versions and cross version its features read, and the hybrid's dense version
    (:mod:`curation.ranking.learned`, as the dense gate leaves them out); a note says how
    many and which versions."""
    task = build_task(ws, schema)
    version = active_ranker(ws, schema).version
    learned: dict[str, set[str]] = {}
    idents = [dense_version] if dense_version else []
    if ranker_version is not None and version is not None and version.id == ranker_version:
        provenance = version.manifest.get("labels")
        groups = set(provenance.get("heldout_groups", []) if isinstance(provenance, dict)
                     else [])
        if groups:
            learned[version.id] = groups
        idents += feature_versions(version.manifest)
    learned.update(versions_learned_groups(ws, idents))
    drop = [q for q in task.split(split) if any(q.group in g for g in learned.values())]
    who = ", ".join(v for v, groups in learned.items() if any(q.group in groups for q in drop))
    if not drop or len(drop) == len(task.split(split)):
        note = ([f"{who} learned labels of every {split} query's group; the comparison keeps "
                 "them (the scores that read those versions are optimistic)"] if drop else [])
        return task, note
    kept = tuple(q for q in task.queries if q not in drop)
    return replace(task, queries=kept), [
        f"{len(drop)} {split} queries left out of every configuration: {who} learned "
        "labels of their query groups"]


def format_choice(record: RankingChoice) -> str:
    """Lines for the CLI: what became the default, and what was left out."""
    metric = record.metric.replace("ndcg", "NDCG")
    lines = [f"default ranking of this schema: {record.best} ({record.split} {metric} "
             f"{record.scores[record.best]:.3f})"]
    lines += [f"  {name}: {value:.3f}" for name, value in
              sorted(record.scores.items(), key=lambda kv: -kv[1])]
    lines += [f"  note: {note}" for note in record.notes]
    lines += [f"  warning: {warning}" for warning in record.warnings]
    return "\n".join(lines)
