"""Fine-tuning bi-encoders on labelled text pairs: losses and the training loop.

- :mod:`retrievers.training.losses`: EDEL's multi-margin loss and the ``mu`` -> margin functions.
- :mod:`retrievers.training.engine`: :func:`train_model`, the loop every recipe runs on
  (checkpoints per epoch, resume, dev-score epoch selection, explicit schedule, bf16).
- :mod:`retrievers.training.trainer`: :func:`train_pairs` (EDEL), :class:`TrainConfig`,
  :class:`PairExample`, :class:`TrainResult`; :func:`compare_training_speed` (fp32 / bf16 x
  random / length-grouped batches of :mod:`retrievers.training.length_groups`).
- :mod:`retrievers.training.mnr`: :func:`train_triplets` (BiCA: multiple-negatives ranking over
  hard-negative triplets); :mod:`retrievers.training.walks`: BiCA's graph walks.
- :mod:`retrievers.training.hicl`, :mod:`retrievers.training.hicl_sampler`: BioHiCL's
  MeSH-hierarchy loss and batch sampler;
  :mod:`retrievers.training.lora`: LoRA adapters added and merged (peft).

Like the rest of :mod:`retrievers`, this sub-package knows texts, vectors and losses only. It may
import :mod:`retrievers` and third-party libraries, never ``curation`` or ``kb_sources``: callers
turn their records into :class:`PairExample` pairs.

Importing this package loads nothing heavy; the names below load their module (and with it torch)
on first use. ``transformers`` and ``sentence_transformers`` load only when training starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrievers.training.config import CurvePoint, PairExample, TrainConfig, TrainResult
    from retrievers.training.engine import resolve_precision, set_seed, train_model
    from retrievers.training.losses import (
        MarginFunction,
        MultiMarginLoss,
        margin_from_mu,
        multi_margin_loss,
    )
    from retrievers.training.mnr import TripletExample, train_triplets
    from retrievers.training.trainer import (
        SpeedResult,
        compare_training_speed,
        measure_training_speed,
        train_pairs,
    )

_EXPORTS = {
    "MarginFunction": "losses", "MultiMarginLoss": "losses", "margin_from_mu": "losses",
    "multi_margin_loss": "losses",
    "CurvePoint": "config", "PairExample": "config", "TrainConfig": "config",
    "TrainResult": "config", "measure_training_speed": "trainer", "resolve_precision": "engine",
    "set_seed": "engine", "train_pairs": "trainer", "train_model": "engine",
    "TripletExample": "mnr", "train_triplets": "mnr", "SpeedResult": "trainer",
    "compare_training_speed": "trainer",
}

__all__ = [
    "CurvePoint", "MarginFunction", "MultiMarginLoss", "PairExample", "SpeedResult", "TrainConfig",
    "TrainResult", "TripletExample", "compare_training_speed", "margin_from_mu",
    "measure_training_speed", "multi_margin_loss",
    "resolve_precision", "set_seed", "train_model", "train_pairs", "train_triplets",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
