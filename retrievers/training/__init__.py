"""Fine-tuning bi-encoders on labelled text pairs: losses and the training loop.

- :mod:`retrievers.training.losses`: EDEL's multi-margin loss and the ``mu`` -> margin functions.
- :mod:`retrievers.training.trainer`: :func:`train_pairs` (checkpoints per epoch, resume, dev-score
  epoch selection), :class:`TrainConfig`, :class:`PairExample`, :class:`TrainResult`.
- Later: graph walks for BiCA and the MeSH-hierarchy loss for BioHiCL.

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
    from retrievers.training.losses import (
        MarginFunction,
        MultiMarginLoss,
        margin_from_mu,
        multi_margin_loss,
    )
    from retrievers.training.trainer import (
        measure_training_speed,
        resolve_precision,
        set_seed,
        train_pairs,
    )

_EXPORTS = {
    "MarginFunction": "losses", "MultiMarginLoss": "losses", "margin_from_mu": "losses",
    "multi_margin_loss": "losses",
    "CurvePoint": "config", "PairExample": "config", "TrainConfig": "config",
    "TrainResult": "config", "measure_training_speed": "trainer", "resolve_precision": "trainer",
    "set_seed": "trainer", "train_pairs": "trainer",
}

__all__ = [
    "CurvePoint", "MarginFunction", "MultiMarginLoss", "PairExample", "TrainConfig", "TrainResult",
    "margin_from_mu", "measure_training_speed", "multi_margin_loss", "resolve_precision",
    "set_seed", "train_pairs",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
