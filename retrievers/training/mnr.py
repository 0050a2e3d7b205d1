"""Multiple-negatives ranking training on (query, positive, hard negative) triplets (BiCA).

:func:`train_triplets` runs the engine (:func:`retrievers.training.engine.train_model`) with
sentence-transformers' ``MultipleNegativesRankingLoss``: for each row the positive must outscore
every other document of the batch (all positives and hard negatives), similarity = cosine x
``scale``. Each (query, positive, negative) is its own row, as in BiCA's code, so a query repeats
once per hard negative; the batch sampler is sentence-transformers' ``NO_DUPLICATES`` sampler, so
no text appears twice in a batch: a repeated query, or another row's positive of the same query,
can never become an in-batch negative (TRAINING.md 6.5). The learning rate and warm-up come from
:class:`~retrievers.training.config.TrainConfig` (explicit; BiCA's released code inherits a
10,000-step warm-up that keeps the rate near 0, TRAINING.md 2).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievers.base import Progress
from retrievers.errors import RetrieverError
from retrievers.training.config import TrainConfig, TrainResult, is_number
from retrievers.training.engine import EvalFn, train_model

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

#: BiCA / sentence-transformers' default: cosine similarity times 20.
DEFAULT_SCALE = 20.0


@dataclass(frozen=True)
class TripletExample:
    """One training row: a query, a document that answers it and a hard negative.

    Attributes:
        query: Query text.
        positive: Text of a document that answers the query.
        negative: Text of a document that does not (a walk, random or BM25 negative).
        group: Free-text source of the negative, counted in the logged histogram.
    """

    query: str
    positive: str
    negative: str
    group: str = ""

    def __post_init__(self) -> None:
        for name in ("query", "positive", "negative"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise RetrieverError(f"TripletExample.{name} must be non-empty text, got "
                                     f"{value!r}")
        if self.positive == self.negative:
            raise RetrieverError(f"TripletExample for query {self.query[:60]!r}: the negative is "
                                 "the positive's text; drop the row")


def triplet_dataset(triplets: Sequence[TripletExample]) -> Any:
    """Columns ``anchor``, ``positive``, ``negative``; logs the negatives' sources."""
    from datasets import Dataset

    triplets = list(triplets)
    if not triplets:
        raise RetrieverError("no training triplets: pass TripletExample rows (query, positive, "
                             "hard negative)")
    for i, row in enumerate(triplets):
        if not isinstance(row, TripletExample):
            raise RetrieverError(f"triplets[{i}] is a {type(row).__name__}, not a "
                                 "TripletExample")
    histogram = Counter(t.group or "(no group)" for t in triplets)
    logger.info("training triplets: %d over %d queries; negatives by source: %s", len(triplets),
                len({t.query for t in triplets}),
                ", ".join(f"{g} {n}" for g, n in sorted(histogram.items())))
    return Dataset.from_dict({"anchor": [t.query for t in triplets],
                              "positive": [t.positive for t in triplets],
                              "negative": [t.negative for t in triplets]})


def train_triplets(base: str | Path | SentenceTransformer, triplets: Sequence[TripletExample],
                   output_dir: str | Path, config: TrainConfig | None = None, *,
                   scale: float = DEFAULT_SCALE, resume: bool = False, progress: Progress = True,
                   eval_fn: EvalFn | None = None) -> TrainResult:
    """Fine-tune a bi-encoder with multiple-negatives ranking over hard-negative triplets.

    Args:
        base: Model name, model folder, or a ``SentenceTransformer`` (trained in place).
        triplets: The rows; queries may repeat (one row per hard negative).
        output_dir: Run folder (layout in :mod:`retrievers.training.engine`).
        config: Hyperparameters (``margin_function`` and ``loss_weight`` are not used).
        scale: Inverse temperature of the softmax over cosine similarities.
        resume, progress, eval_fn: as :func:`~retrievers.training.engine.train_model`.

    Returns:
        The :class:`TrainResult`.

    Raises:
        RetrieverError: No triplets, a bad scale or config, checkpoints of another run.
    """
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    if not is_number(scale) or scale <= 0:
        raise RetrieverError(f"scale must be a number > 0 (BiCA: 20), got {scale!r}")
    dataset = triplet_dataset(triplets)
    return train_model(base, dataset,
                       lambda model: MultipleNegativesRankingLoss(model, scale=scale),
                       output_dir, config or TrainConfig(), resume=resume, progress=progress,
                       eval_fn=eval_fn, batch_sampler=BatchSamplers.NO_DUPLICATES)
