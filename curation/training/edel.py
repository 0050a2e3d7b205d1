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

import logging
from dataclasses import dataclass, fields
from typing import Any

from curation.evaluation.harness import build_task
from curation.matching.matcher import EntityMatcher
from curation.store.models import (
    ModelVersion,
    update_metrics,
)
from curation.store.workspace import Workspace
from curation.training.examples import ExampleConfig, ExampleSet, build_examples, to_pairs
from curation.training.rounds import (
    Report,
    base_path,
    dev_scorer,
    register_result,
    run_folder,
    step_reporter,
    train_config_of,
)
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)



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
        group_by_length: Length-grouped batches (see TrainConfig).
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
    group_by_length: bool = False

    def train_config(self) -> Any:
        return train_config_of(self, margin_function=self.margin_function,
                               group_by_length=self.group_by_length)

    def validate(self) -> None:
        """Raise :class:`CurationError` on any invalid value."""
        self.train_config()
        self.example_config()

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
    options.validate()
    return options


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

    run_dir = run_folder(ws, examples.schema, "edel", examples.manifest["sha256"], options)
    resume = (run_dir / "checkpoints").is_dir()
    if resume:
        logger.warning("resuming the interrupted run in %s", run_dir)
    try:
        result = train_pairs(base_path(ws, options.base), pairs, run_dir, train_config,
                             resume=resume, progress=step_reporter(report, progress),
                             eval_fn=scorer)
    except RetrieverError as exc:
        raise CurationError(f"training {schema} failed: {exc}") from exc
    return register_result(ws, schema=examples.schema, recipe="edel", options=options,
                           result=result, train_config=train_config,
                           data_manifest=examples.manifest, document_format=fmt,
                           resumed=resume, actor=actor, run_dir=run_dir,
                           extra_manifest=extra_manifest, report=report)


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
