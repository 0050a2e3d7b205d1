"""EDEL's pointwise training: :func:`train_pairs` runs the engine
(:func:`retrievers.training.engine.train_model`) on labelled (query, document) pairs with the
multi-margin loss; :func:`measure_training_speed` and :func:`compare_training_speed` (fp32 / bf16
x random / length-grouped batches) time it for benchmarks (``kbcurate train-speed``).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievers.base import Progress
from retrievers.errors import RetrieverError
from retrievers.training.config import PairExample, TrainConfig, TrainResult, is_int
from retrievers.training.engine import EvalFn, resolve_precision, set_seed, train_model
from retrievers.training.losses import margin_from_mu

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

__all__ = ["SpeedResult", "compare_training_speed", "measure_training_speed", "resolve_precision",
           "set_seed", "train_pairs"]


def train_pairs(base: str | Path | SentenceTransformer, examples: Sequence[PairExample],
                output_dir: str | Path, config: TrainConfig | None = None, *,
                resume: bool = False, progress: Progress = True,
                eval_fn: EvalFn | None = None) -> TrainResult:
    """Fine-tune a bi-encoder on labelled pairs with :class:`~.losses.MultiMarginLoss`.

    ``eval_fn`` runs in a trainer callback right after each epoch's checkpoint is written, with
    the Python, numpy and torch RNG state restored afterwards so it cannot change training; its
    score is saved in the checkpoint. Checkpoints left unscored (the run stopped inside
    ``eval_fn``, or an earlier call had none) are scored after training.

    Args:
        base: Model name, model folder, or a ``SentenceTransformer`` (trained in place).
        examples: Training pairs; at least one positive.
        output_dir: Run folder (layout in :mod:`retrievers.training.engine`).
        config: Hyperparameters; ``None`` for the defaults.
        resume: Continue from the newest checkpoint in ``output_dir/checkpoints`` (from the start
            when there is none); ends with the same weights as an uninterrupted run.
        progress: ``True`` for a tqdm bar over steps, ``False`` for silence, or ``fn(done, total)``
            called after each optimizer step.
        eval_fn: ``eval_fn(model_folder, epoch) -> dev score``; the best epoch becomes the model.

    Returns:
        The :class:`TrainResult`.

    Raises:
        RetrieverError: No examples or no positives, a bad config, checkpoints of another run.
    """
    from retrievers.training.losses import MultiMarginLoss

    config = config or TrainConfig()
    dataset = _build_dataset(examples, config)
    return train_model(base, dataset, lambda model: MultiMarginLoss(model,
                                                                    weight=config.loss_weight),
                       output_dir, config, resume=resume, progress=progress, eval_fn=eval_fn)


def checked_pairs(examples: Sequence[PairExample]) -> list[PairExample]:
    """``examples`` as a list of :class:`PairExample`.

    Raises:
        RetrieverError: No pair, or a row that is not a :class:`PairExample`.
    """
    examples = list(examples)
    if not examples:
        raise RetrieverError("no training pairs: examples is empty; pass PairExample pairs, at "
                             "least one of them positive")
    for i, example in enumerate(examples):
        if not isinstance(example, PairExample):
            raise RetrieverError(f"examples[{i}] is a {type(example).__name__}, not a PairExample")
    return examples


def _build_dataset(examples: Sequence[PairExample], config: TrainConfig) -> Any:
    """Columns ``query``, ``document``, ``label`` = ``[y, margin]``; logs the class histogram."""
    from datasets import Dataset

    examples = checked_pairs(examples)
    positives = sum(e.positive for e in examples)
    if positives == 0:
        raise RetrieverError(
            f"all {len(examples)} training pairs are negatives; the loss needs positives to pull "
            "queries and documents together: add pairs with positive=True")
    histogram = Counter((e.group or "(no group)", "+" if e.positive else "-") for e in examples)
    logger.info("training pairs: %d (%d positive); by class: %s", len(examples), positives,
                ", ".join(f"{g} {sign}{n}" for (g, sign), n in sorted(histogram.items())))
    margins = {mu: margin_from_mu(mu, config.margin_function) for mu in {e.mu for e in examples}}
    return Dataset.from_dict({
        "query": [e.query for e in examples],
        "document": [e.document for e in examples],
        "label": [[1.0 if e.positive else 0.0, margins[e.mu]] for e in examples],
    })


class _Enough(Exception):
    """Raised by the progress callback of :func:`measure_training_speed` to stop training."""


def measure_training_speed(base: str | Path | SentenceTransformer,
                           examples: Sequence[PairExample], config: TrainConfig | None = None,
                           steps: int = 5) -> float:
    """Training throughput in pairs per second, for benchmarks.

    Runs :func:`train_pairs` for one epoch over ``examples`` (repeated to at least ``steps + 1``
    batches) in a temporary folder, times steps 2 to ``steps + 1`` through the progress callback
    and stops there: the first step's warm-up and checkpoint writing are left out. With
    ``config.group_by_length`` the batches are grouped over the whole epoch, as in a real run,
    so pass a realistic number of examples (e.g. 50 batches' worth).

    Returns:
        Pairs per second.

    Raises:
        RetrieverError: No examples, or ``steps`` < 1.
    """
    config = TrainConfig.from_dict({**(config or TrainConfig()).to_dict(), "epochs": 1})
    examples = list(examples)
    if not examples or not is_int(steps) or steps < 1:
        raise RetrieverError(f"measure_training_speed needs examples and steps >= 1, got "
                             f"{len(examples)} examples and steps={steps!r}")
    rows = max(len(examples), (steps + 1) * config.batch_size)
    pairs = [examples[i % len(examples)] for i in range(rows)]
    stamps: list[float] = []

    def tick(done: int, total: int) -> None:
        stamps.append(time.perf_counter())
        if len(stamps) > steps:
            raise _Enough

    with tempfile.TemporaryDirectory(prefix="train-speed-") as tmp:
        try:
            train_pairs(base, pairs, tmp, config, progress=tick)
        except _Enough:
            pass
    return steps * config.batch_size / (stamps[steps] - stamps[0])


@dataclass(frozen=True)
class SpeedResult:
    """Training throughput of one setting (:func:`compare_training_speed`).

    Attributes:
        precision: ``"fp32"`` or ``"bf16"`` (autocast).
        group_by_length: Length-grouped batches.
        examples_per_second: Pairs per second, the best of the repeats.
    """

    precision: str
    group_by_length: bool
    examples_per_second: float


def compare_training_speed(base: str | Path | SentenceTransformer,
                           examples: Sequence[PairExample], config: TrainConfig | None = None,
                           steps: int = 5, *, precisions: Sequence[str] = ("fp32", "bf16"),
                           grouping: Sequence[bool] = (False, True), repeats: int = 1,
                           report: Callable[[SpeedResult], None] | None = None
                           ) -> list[SpeedResult]:
    """:func:`measure_training_speed` for every precision x grouping, on the same examples.

    Repeats run round-robin over the settings (so a burst of load on a shared machine hits all of
    them) and the best of each setting is kept. ``report`` gets every single measurement as it
    is taken.

    Returns:
        One :class:`SpeedResult` per setting, in ``precisions`` x ``grouping`` order.
    """
    base_config = (config or TrainConfig()).to_dict()
    settings = [(p, g) for p in precisions for g in grouping]
    best = dict.fromkeys(settings, 0.0)
    for _ in range(max(1, repeats)):
        for precision, grouped in settings:
            setting = TrainConfig.from_dict({**base_config, "precision": precision,
                                             "group_by_length": grouped})
            speed = measure_training_speed(base, examples, setting, steps)
            if report is not None:
                report(SpeedResult(precision, grouped, speed))
            best[precision, grouped] = max(best[precision, grouped], speed)
    return [SpeedResult(p, g, best[p, g]) for p, g in settings]
