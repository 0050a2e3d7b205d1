"""Test metrics of a model version: the whole corpus (as ``kbcurate evaluate``) or a test pool.

Every round ends here (:func:`curation.training.rounds.run_round`), so every listed version has
test metrics: ``test_<metric>`` after a corpus evaluation, ``testpool_<metric>`` plus
``testpool_spec`` after a pool evaluation (the simulation's cheap default; a version already
scored on the same pool is not scored again).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from curation.evaluation.harness import EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.documents import PLAIN_FORMAT
from curation.store.models import Models, ModelVersion
from curation.store.workspace import Workspace
from curation.training.gate import MIN_TEST_QUERIES
from curation.training.pool import build_pool, score_model
from curation.training.round_gate import scaled
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]

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


def pool_spec(ws: Workspace, seed: int, left_out: Sequence[str] = ()) -> str:
    """Identity of the test pool: its sizes, seed and the corpus it was drawn from, and the
    test queries the gate left out (``left_out``: their ids; a pool without them measures
    other queries)."""
    from curation.search.indexing import corpus_fingerprint

    spec = (f"test+bm25@{TEST_POOL_DEPTH}+random{TEST_POOL_RANDOM}/seed{seed}/"
            f"{corpus_fingerprint(ws)[:16]}")
    if left_out:
        digest = hashlib.sha256("\n".join(sorted(left_out)).encode()).hexdigest()[:12]
        spec += f"/without{len(left_out)}-{digest}"
    return spec


def score_versions(ws: Workspace, task: EvalTask, versions: Mapping[str, ModelVersion], *,
                   evaluation: str, seed: int, matcher: EntityMatcher,
                   progress: bool = False, report: Report | None = None,
                   left_out: Sequence[str] = ()) -> dict[str, dict[str, float]]:
    """role -> test-split metrics (unprefixed) of each version; empty without test queries.

    Args:
        report: ``fn(fraction, message)`` while versions are scored (a job's progress): the
            documents encoded so far, per batch, so a long corpus encoding moves the bar.
        left_out: Test query ids the caller removed from ``task`` (they name the test pool).
    """
    check_evaluation(evaluation)
    if not task.split("test") or not versions:
        return {}
    out: dict[str, dict[str, float]] = {}
    for i, (role, v) in enumerate(versions.items()):
        step = scaled(report, i / len(versions), (i + 1) / len(versions),
                      f"scoring {v.id} ({role}): ")
        out[role] = (_pool_score(ws, task, v, seed, matcher, step, left_out)
                     if evaluation == "pool" else _corpus_score(ws, task, v, progress, step))
    return out


def _corpus_score(ws: Workspace, task: EvalTask, version: ModelVersion, progress: bool,
                  report: Report | None) -> dict[str, float]:
    from curation.evaluation.runner import evaluate_workspace

    result = evaluate_workspace(ws, task.schema, ["dense"], split="test", task=task,
                                options={"dense": {"model": version.id}},
                                progress=progress and report is None, report=report)
    return dict(result.retrievers["dense"])


def _pool_score(ws: Workspace, task: EvalTask, version: ModelVersion, seed: int,
                matcher: EntityMatcher, report: Report | None,
                left_out: Sequence[str]) -> dict[str, float]:
    spec = pool_spec(ws, seed, left_out)
    if version.metrics.get("testpool_spec") == spec:  # scored on this very pool before
        return {k.removeprefix("testpool_"): float(x) for k, x in version.metrics.items()
                if k.startswith("testpool_") and k != "testpool_spec"}
    fmt = version.manifest.get("document_format", PLAIN_FORMAT)
    pool = build_pool(ws, task.split("test"), fmt, depth=TEST_POOL_DEPTH,
                      n_random=TEST_POOL_RANDOM, seed=seed)

    def encoded(done: int, total: int) -> None:
        if report is not None:
            report(0.95 * done / max(total, 1), f"encoding {done:,}/{total:,} pool documents")

    return score_model(version.model_dir, pool, matcher=matcher, name=version.id,
                       max_seq_length=int(version.manifest.get("max_seq_length", 128)),
                       progress=encoded if report is not None else False)


def prefixed(ws: Workspace, metrics: Mapping[str, float], evaluation: str, seed: int,
             left_out: Sequence[str] = ()) -> dict[str, Any]:
    """Metrics as stored in the registry (``test_*`` or ``testpool_*`` + ``testpool_spec``)."""
    if not metrics:
        return {}
    if evaluation == "corpus":
        return {"test_" + k: v for k, v in metrics.items()}
    return {**{"testpool_" + k: v for k, v in metrics.items()},
            "testpool_spec": pool_spec(ws, seed, left_out)}


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
