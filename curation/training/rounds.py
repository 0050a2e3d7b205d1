"""What every training recipe's round shares: the base model's folder, the run folder that makes
an interrupted round resume, dev scoring that picks the epoch, and registering the result.

A recipe (:mod:`curation.training.edel`, :mod:`curation.training.bica_train`,
:mod:`curation.training.hicl_train`) builds its data, trains with the engine
(:mod:`retrievers.training.engine`) in :func:`run_folder`, and hands the
:class:`~retrievers.training.config.TrainResult` to :func:`register_result`, which writes one
manifest layout for all recipes (recipe, base model, options, train config, data manifest, curve,
dev scores, speed) so evaluation, the app and the feedback loop read every version alike.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from curation.evaluation.harness import EvalTask
from curation.matching.matcher import EntityMatcher
from curation.store.models import (
    ModelVersion,
    get_model,
    is_model_version,
    register_model,
    verify_weights,
)
from curation.store.workspace import Workspace
from curation.training.pool import pool_scorer
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


#: The TrainConfig fields every recipe's options carry under the same names.
_SHARED = ("epochs", "batch_size", "learning_rate", "warmup_ratio", "max_seq_length", "seed",
           "precision")


def train_config_of(options: Any, **extra: Any) -> Any:
    """The engine's :class:`~retrievers.training.config.TrainConfig` from a recipe's options
    (the shared hyperparameters plus ``extra``); bad values are :class:`CurationError`."""
    from retrievers.errors import RetrieverError
    from retrievers.training.config import TrainConfig

    try:
        return TrainConfig(**{k: getattr(options, k) for k in _SHARED}, **extra)
    except RetrieverError as exc:
        raise CurationError(str(exc)) from exc


def base_path(ws: Workspace, base: str) -> str:
    """The folder of a base model: a registry version (verified weights) or HF name/path."""
    from retrievers.encoder import resolve_model_path

    if is_model_version(ws, base):
        version = get_model(ws, base)
        verify_weights(version)
        return str(version.model_dir)
    return resolve_model_path(base)


def run_folder(ws: Workspace, schema: str, recipe: str, data_sha256: str, options: Any) -> Path:
    """Where a run keeps its checkpoints until it is registered: the same data and options give
    the same folder, so an interrupted run resumes where it stopped."""
    key = json.dumps({"examples": data_sha256, "options": asdict(options)}, sort_keys=True,
                     default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return ws.root / "cache" / "training" / f"{schema}-{recipe}-{digest}"


def dev_scorer(ws: Workspace, task: EvalTask, options: Any, document_format: str,
               matcher: EntityMatcher) -> Callable[[Path, int], float] | None:
    """``fn(model_folder, epoch) -> dev NDCG@10`` over the dev pool (None: ``dev_depth`` 0).

    ``options`` needs ``dev_depth``, ``dev_random``, ``max_seq_length`` and ``seed``.
    """
    if options.dev_depth <= 0:
        return None
    return pool_scorer(ws, task.split("dev"), document_format,
                       max_seq_length=options.max_seq_length, matcher=matcher,
                       depth=options.dev_depth, n_random=options.dev_random, seed=options.seed)


def step_reporter(report: Report | None, progress: bool) -> Any:
    """The engine's ``progress`` argument: a job's ``report`` mapped to 5-95 %, else tqdm."""
    if not report:
        return progress

    def step(done: int, total: int) -> None:
        report(0.05 + 0.9 * done / max(total, 1), f"training step {done:,}/{total:,}")

    return step


def register_result(ws: Workspace, *, schema: str, recipe: str, options: Any, result: Any,
                    train_config: Any, data_manifest: dict[str, Any], document_format: str,
                    resumed: bool, actor: str, run_dir: Path,
                    extra_manifest: dict[str, Any] | None = None,
                    report: Report | None = None) -> ModelVersion:
    """Register a finished run as a candidate version and remove its run folder.

    Args:
        options: The recipe's options dataclass (``base``, ``seed``, ``max_seq_length``...).
        result: The engine's :class:`~retrievers.training.config.TrainResult`.
        data_manifest: The recipe's data manifest (counts per class, coverage, sha256).
        extra_manifest: More fields (retraining: parent version, warm start; imports).
    """
    try:
        if report:
            report(0.97, "registering the model version")
        manifest = {
            "recipe": recipe, "base_model": options.base, **(extra_manifest or {}),
            "options": asdict(options), "train_config": train_config.to_dict(),
            "seed": options.seed, "max_seq_length": options.max_seq_length,
            "document_format": document_format, "examples": data_manifest,
            "curve": [asdict(p) for p in result.curve],
            "dev_scores": list(result.epoch_scores), "best_epoch": result.best_epoch,
            "epochs_run": result.epochs_run, "steps": result.steps,
            "seconds": round(result.seconds, 1),
            "examples_per_second": round(result.examples_per_second, 2),
            "precision": result.precision, "device": result.device,
            "resumed_from_checkpoint": resumed,
        }
        dev = {"dev_ndcg@10": max(result.epoch_scores)} if result.epoch_scores else {}
        version = register_model(ws, schema=schema, recipe=recipe, base_model=options.base,
                                 model_dir=result.model_dir, manifest=manifest, metrics=dev,
                                 created_by=actor)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    logger.info("registered %s (best epoch %d, %.0f s)", version.id, result.best_epoch,
                result.seconds)
    if report:
        report(1.0, f"registered {version.id}")
    return version
