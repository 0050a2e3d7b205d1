"""Test metrics of a model version: the whole corpus (as ``kbcurate evaluate``) or a test pool.

Every round ends here (:func:`curation.training.rounds.run_round`), so every listed version has
test metrics: ``test_<metric>`` after a corpus evaluation, ``testpool_<metric>`` plus
``testpool_spec`` after a pool evaluation (the simulation's cheap default; a version already
scored on the same pool is not scored again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from curation.evaluation.harness import EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.documents import PLAIN_FORMAT
from curation.store.models import Models, ModelVersion
from curation.store.workspace import Workspace
from curation.training.gate import MIN_TEST_QUERIES
from curation.training.pool import build_pool, score_model
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: How versions are scored: the whole corpus or a pool (simulation).
EVALUATIONS = ("corpus", "pool")
#: The test pool of ``evaluation="pool"``: test gold + BM25 top 30 per query + 500 random.
TEST_POOL_DEPTH, TEST_POOL_RANDOM = 30, 500


def check_evaluation(evaluation: str) -> None:
    if evaluation not in EVALUATIONS:
        raise CurationError(f"Unknown evaluation {evaluation!r}. Available options: "
                            f"{', '.join(EVALUATIONS)}")


def test_warning(n_test: int) -> str | None:
    if n_test >= MIN_TEST_QUERIES:
        return None
    if n_test == 0:
        return ("No test query cites a document of the workspace: the version has no test "
                "metrics and the gate cannot compare it; import the cited abstracts")
    return (f"Evaluated on only {n_test} test queries (< {MIN_TEST_QUERIES}): its test metrics "
            "are noisy, and the gate will not promote on them without an admin's written reason")


def pool_spec(ws: Workspace, seed: int) -> str:
    """Identity of the test pool: its sizes, seed and the corpus it was drawn from."""
    from curation.search.indexing import corpus_fingerprint

    return (f"test+bm25@{TEST_POOL_DEPTH}+random{TEST_POOL_RANDOM}/seed{seed}/"
            f"{corpus_fingerprint(ws)[:16]}")


def score_versions(ws: Workspace, task: EvalTask, versions: Mapping[str, ModelVersion], *,
                   evaluation: str, seed: int, matcher: EntityMatcher,
                   progress: bool = False) -> dict[str, dict[str, float]]:
    """role -> test-split metrics (unprefixed) of each version; empty without test queries."""
    check_evaluation(evaluation)
    if not task.split("test") or not versions:
        return {}
    out: dict[str, dict[str, float]] = {}
    if evaluation == "pool":
        spec = pool_spec(ws, seed)
        pool = None
        for role, v in versions.items():
            if v.metrics.get("testpool_spec") == spec:  # scored on this very pool before
                out[role] = {k.removeprefix("testpool_"): float(x) for k, x in v.metrics.items()
                             if k.startswith("testpool_") and k != "testpool_spec"}
                continue
            if pool is None:
                fmt = v.manifest.get("document_format", PLAIN_FORMAT)
                pool = build_pool(ws, task.split("test"), fmt, depth=TEST_POOL_DEPTH,
                                  n_random=TEST_POOL_RANDOM, seed=seed)
            out[role] = score_model(v.model_dir, pool, matcher=matcher, name=v.id,
                                    max_seq_length=int(v.manifest.get("max_seq_length", 128)))
        return out
    from curation.evaluation.runner import evaluate_workspace

    for role, v in versions.items():
        result = evaluate_workspace(ws, task.schema, ["dense"], split="test", task=task,
                                    options={"dense": {"model": v.id}}, progress=progress)
        out[role] = dict(result.retrievers["dense"])
    return out


def prefixed(ws: Workspace, metrics: Mapping[str, float], evaluation: str, seed: int
             ) -> dict[str, Any]:
    """Metrics as stored in the registry (``test_*`` or ``testpool_*`` + ``testpool_spec``)."""
    if not metrics:
        return {}
    if evaluation == "corpus":
        return {"test_" + k: v for k, v in metrics.items()}
    return {**{"testpool_" + k: v for k, v in metrics.items()},
            "testpool_spec": pool_spec(ws, seed)}


def version_test_metric(version: ModelVersion, name: str = "ndcg@10") -> float | None:
    """A version's test metric: the corpus one, else the pool one, else None."""
    value = version.metrics.get(f"test_{name}", version.metrics.get(f"testpool_{name}"))
    return float(value) if isinstance(value, int | float) else None


def evaluate_version(ws: Workspace, version: ModelVersion, *, actor: str,
                     evaluation: str = "corpus", seed: int = 42, task: EvalTask | None = None,
                     progress: bool = False) -> ModelVersion:
    """Score one version on the schema's test split and record the metrics, with the same
    evaluation and warnings a training round ends with (an import ends here too, so it is
    listed with test metrics like a trained version).

    Args:
        seed: The test pool's seed (``evaluation="pool"``; the recipes' default seed, so a
            version scored on the same pool is not scored again).

    Returns:
        The version with its metrics (``test_*`` or ``testpool_*``, ``warnings``).

    Raises:
        CurationError: Unknown evaluation.
    """
    from curation.evaluation.harness import build_task

    check_evaluation(evaluation)
    task = task or build_task(ws, version.schema)
    scores = score_versions(ws, task, {"candidate": version}, evaluation=evaluation, seed=seed,
                            matcher=EntityMatcher(), progress=progress)
    warnings = [w for w in (test_warning(len(task.split("test"))),) if w is not None]
    for w in warnings:
        logger.warning("%s: %s", version.id, w)
    metrics = {**prefixed(ws, scores.get("candidate", {}), evaluation, seed),
               "warnings": warnings}
    return Models(ws).update_metrics(version.id, metrics, actor=actor)
