"""One EDEL training round: examples -> fine-tuned bi-encoder -> a candidate model version.

:func:`train_edel` builds the train-split examples (:mod:`curation.training.examples`), trains
with :func:`retrievers.training.trainer.train_pairs` (MultiMargin loss), picks the epoch with the
best NDCG@10 on the **dev** split, and registers the result in the workspace's model registry
with everything needed to reproduce it (recipe, base model, hyperparameters, seed, example
manifest and hash, training curve, dev scores, speed). The test split is never looked at here;
``kbcurate evaluate --model VERSION`` (or ``evaluate_test=True``) reports it.

Dev scoring ranks a **dev pool**, not the whole corpus, so that choosing an epoch costs seconds
rather than an encoding of every document: the gold documents of the dev queries, the BM25 top
``dev_depth`` of each and ``dev_random`` random corpus documents, ranked by cosine for every dev
query. Its absolute numbers are higher than a full-corpus evaluation; it only compares epochs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from curation.evaluation.harness import EvalTask, build_task
from curation.matching.matcher import EntityMatcher
from curation.store.models import (
    ModelVersion,
    get_model,
    is_model_version,
    register_model,
    update_metrics,
    verify_weights,
)
from curation.store.workspace import Workspace
from curation.training.examples import ExampleConfig, ExampleSet, build_examples, to_pairs
from curation.training.pool import pool_scorer
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


@dataclass(frozen=True)
class EdelOptions:
    """Options of one EDEL round (hyperparameters default to a 2-core CPU budget).

    Attributes:
        base: Base model: HF name, local folder or "all-MiniLM-L6-v2" (packaged).
        epochs, batch_size, learning_rate, warmup_ratio, max_seq_length, precision,
            margin_function: see :class:`retrievers.training.config.TrainConfig`.
        seed: Seed of examples and training.
        negatives_per_class, bm25_depth, ablation: see :class:`ExampleConfig`.
        dev_depth: BM25 hits per dev query in the dev pool (0: no dev scoring, last epoch).
        dev_random: Random corpus documents in the dev pool.
        max_queries: Train on at most this many train queries (None: all).
    """

    base: str = "all-MiniLM-L6-v2"
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    max_seq_length: int = 128
    precision: str = "auto"
    margin_function: str = "angle"
    seed: int = 42
    negatives_per_class: int = 2
    bm25_depth: int = 50
    ablation: str = "none"
    dev_depth: int = 20
    dev_random: int = 500
    max_queries: int | None = None

    def train_config(self) -> Any:
        from retrievers.training.config import TrainConfig

        try:
            return TrainConfig(epochs=self.epochs, batch_size=self.batch_size,
                               learning_rate=self.learning_rate, warmup_ratio=self.warmup_ratio,
                               max_seq_length=self.max_seq_length, seed=self.seed,
                               precision=self.precision, margin_function=self.margin_function)
        except RetrieverError as exc:
            raise CurationError(str(exc)) from exc

    def example_config(self) -> ExampleConfig:
        return ExampleConfig(negatives_per_class=self.negatives_per_class,
                             bm25_depth=self.bm25_depth, ablation=self.ablation, seed=self.seed,
                             max_queries=self.max_queries)


def edel_options(values: dict[str, Any]) -> EdelOptions:
    """EdelOptions from plain values; unknown names and bad values are clear errors."""
    names = [f.name for f in fields(EdelOptions)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise CurationError(f"Unknown training option(s) {', '.join(unknown)}. Available "
                            f"options: {', '.join(names)}")
    options = EdelOptions(**values)
    options.train_config()  # validates the hyperparameters
    options.example_config()
    return options


def dev_scorer(ws: Workspace, task: EvalTask, options: EdelOptions, document_format: str,
               matcher: EntityMatcher) -> Callable[[Path, int], float] | None:
    """``fn(model_folder, epoch) -> dev NDCG@10`` over the dev pool (None: no dev queries)."""
    if options.dev_depth <= 0:
        return None
    return pool_scorer(ws, task.split("dev"), document_format,
                       max_seq_length=options.max_seq_length, matcher=matcher,
                       depth=options.dev_depth, n_random=options.dev_random, seed=options.seed)


def train_edel(ws: Workspace, schema: str, options: EdelOptions | None = None, *,
               actor: str, progress: bool = True, report: Report | None = None,
               examples: ExampleSet | None = None,
               extra_manifest: dict[str, Any] | None = None) -> ModelVersion:
    """Train one EDEL round on a schema's train split and register it as a candidate version.

    Args:
        ws: Workspace with the schema's KB relations and the corpus.
        schema: Schema name.
        options: :class:`EdelOptions`.
        actor: Who starts it (recorded as ``created_by``).
        progress: tqdm bars (CLI).
        report: ``fn(fraction, message)`` for background jobs.
        examples: Prebuilt examples (the benchmark reuses one set; retraining adds labels);
            built when None.
        extra_manifest: More manifest fields (retraining: parent version, warm start).

    Returns:
        The new candidate :class:`ModelVersion` (not activated).
    """
    from retrievers.encoder import resolve_model_path
    from retrievers.training.trainer import train_pairs

    options = options or EdelOptions()
    train_config = options.train_config()
    matcher = EntityMatcher()
    task = build_task(ws, schema)
    if report:
        report(0.02, "building training examples")
    examples = examples or build_examples(ws, schema, options.example_config(), matcher=matcher,
                                          task=task, progress=progress and not report)
    fmt = examples.manifest["config"]["document_format"]
    scorer = dev_scorer(ws, task, options, fmt, matcher)
    pairs = to_pairs(examples)
    logger.info("training %s on %d examples (%s)", schema, len(pairs), examples.manifest["classes"])

    def step(done: int, total: int) -> None:
        if report:
            report(0.05 + 0.9 * done / max(total, 1), f"training step {done:,}/{total:,}")

    run_dir = _run_folder(ws, examples, options)
    resume = (run_dir / "checkpoints").is_dir()
    if resume:
        logger.warning("resuming the interrupted run in %s", run_dir)
    try:
        result = train_pairs(_base_path(ws, options.base, resolve_model_path), pairs, run_dir,
                             train_config,
                             resume=resume, progress=step if report else progress,
                             eval_fn=scorer)
    except RetrieverError as exc:
        raise CurationError(f"training {schema} failed: {exc}") from exc
    try:
        if report:
            report(0.97, "registering the model version")
        manifest = {
            "recipe": "edel", "base_model": options.base, **(extra_manifest or {}),
            "options": asdict(options),
            "train_config": train_config.to_dict(), "seed": options.seed,
            "max_seq_length": options.max_seq_length, "document_format": fmt,
            "examples": examples.manifest,
            "curve": [asdict(p) for p in result.curve],
            "dev_scores": list(result.epoch_scores), "best_epoch": result.best_epoch,
            "epochs_run": result.epochs_run, "steps": result.steps,
            "seconds": round(result.seconds, 1),
            "examples_per_second": round(result.examples_per_second, 2),
            "precision": result.precision, "device": result.device,
            "resumed_from_checkpoint": resume,
        }
        dev = {"dev_ndcg@10": max(result.epoch_scores)} if result.epoch_scores else {}
        version = register_model(ws, schema=examples.schema, recipe="edel",
                                 base_model=options.base, model_dir=result.model_dir,
                                 manifest=manifest, metrics=dev, created_by=actor)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    logger.info("registered %s (best epoch %d, %.0f s)", version.id, result.best_epoch,
                result.seconds)
    if report:
        report(1.0, f"registered {version.id}")
    return version


def _base_path(ws: Workspace, base: str, resolve: Callable[[str], str]) -> str:
    """The folder of a base model: a registry version (verified weights) or HF name/path."""
    if is_model_version(ws, base):
        version = get_model(ws, base)
        verify_weights(version)
        return str(version.model_dir)
    return resolve(base)


def _run_folder(ws: Workspace, examples: ExampleSet, options: EdelOptions) -> Path:
    """Where a run keeps its checkpoints until it is registered: the same examples and options
    give the same folder, so an interrupted run resumes where it stopped."""
    key = json.dumps({"examples": examples.manifest["sha256"], "options": asdict(options)},
                     sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return ws.root / "cache" / "training" / f"{examples.schema}-edel-{digest}"


def evaluate_version(ws: Workspace, version: ModelVersion, *, split: str = "test",
                     progress: bool = True, report: Report | None = None) -> dict[str, Any]:
    """Evaluate a registered version (dense, full corpus) and store the metrics in the registry."""
    from curation.evaluation.runner import evaluate_workspace

    result = evaluate_workspace(ws, version.schema, ["dense"], split=split,
                                options={"dense": {"model": version.id}}, report=report,
                                progress=progress)
    metrics = {f"{split}_{k}": v for k, v in result["retrievers"]["dense"].items()}
    update_metrics(ws, version.id, metrics, actor=version.created_by)
    return result
