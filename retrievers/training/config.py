"""What a training run takes and gives: :class:`TrainConfig`, :class:`PairExample`,
:class:`CurvePoint` and :class:`TrainResult` (plain frozen dataclasses, no torch import)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from numbers import Real
from pathlib import Path
from typing import Any

from retrievers.errors import RetrieverError, unknown_name
from retrievers.training.losses import DEFAULT_WEIGHT, MarginFunction, check_mu

PRECISIONS = ("auto", "fp32", "bf16")
#: ``eval_fn(model_folder, epoch) -> dev score``, higher is better.


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of one fine-tuning run; saved as JSON or TOML via :meth:`to_dict`.

    Attributes:
        epochs: Passes over the training pairs (EDEL: 8).
        batch_size: Pairs per optimizer step (EDEL code: 64).
        learning_rate: Peak AdamW learning rate.
        warmup_ratio: Share of all steps spent warming up linearly from 0, in [0, 1).
        weight_decay: AdamW weight decay (not applied to bias and LayerNorm weights).
        max_grad_norm: Gradient clipping norm; 0 turns clipping off.
        max_seq_length: Tokens kept per text.
        seed: Seed of dropout, data order and any freshly initialised layer.
        precision: ``"auto"`` (bf16 autocast on a CUDA GPU that supports it, else fp32), ``"fp32"``
            or ``"bf16"`` (autocast; on a CPU without AVX512-BF16/AMX it is emulated and slow:
            MiniLM trained 14x slower than in fp32 on an AVX2 host, benchmarks/README.md).
        margin_function: How ``mu`` becomes a margin: ``"angle"`` (EDEL code) or ``"distance"``.
        loss_weight: Constant example weight of the loss (EDEL: 0.8).
        group_by_length: Batches of rows of similar token length
            (:mod:`retrievers.training.length_groups`): less padding, same rows per epoch;
            ignored when the recipe draws its own batches (BiCA, BioHiCL). Off by default:
            padding is only 6-7% of token slots at 128-256 tokens on PubMed abstracts (most are
            cut at the limit), 30% at 512, where grouped batches trained 1.7-2x faster.
    """

    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    max_seq_length: int = 256
    seed: int = 42
    precision: str = "auto"
    margin_function: str = MarginFunction.ANGLE.value
    loss_weight: float = DEFAULT_WEIGHT
    group_by_length: bool = False

    def __post_init__(self) -> None:
        count, number = "an integer >= 1", "a number >= 0"
        checks = {
            "epochs": (is_int(self.epochs) and self.epochs >= 1, count),
            "batch_size": (is_int(self.batch_size) and self.batch_size >= 1, count),
            "learning_rate": (is_number(self.learning_rate) and self.learning_rate > 0,
                              "a number > 0 (EDEL: 2e-5)"),
            "warmup_ratio": (is_number(self.warmup_ratio) and 0 <= self.warmup_ratio < 1,
                             "a share of all steps in [0, 1), e.g. 0.1"),
            "weight_decay": (is_number(self.weight_decay) and self.weight_decay >= 0, number),
            "max_grad_norm": (is_number(self.max_grad_norm) and self.max_grad_norm >= 0,
                              f"{number} (0 turns clipping off)"),
            "max_seq_length": (is_int(self.max_seq_length) and self.max_seq_length >= 1, count),
            "seed": (is_int(self.seed) and self.seed >= 0, "an integer >= 0"),
            "loss_weight": (is_number(self.loss_weight) and self.loss_weight > 0,
                            "a number > 0 (EDEL: 0.8)"),
        }
        for name, (ok, expected) in checks.items():
            if not ok:
                raise RetrieverError(
                    f"TrainConfig.{name} must be {expected}, got {getattr(self, name)!r}")
        if not isinstance(self.group_by_length, bool):
            raise RetrieverError(f"TrainConfig.group_by_length must be true or false, got "
                                 f"{self.group_by_length!r}")
        if self.precision not in PRECISIONS:
            raise unknown_name("TrainConfig.precision", self.precision, PRECISIONS)
        object.__setattr__(self, "margin_function",
                           MarginFunction.coerce(self.margin_function).value)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (str, int, float), ready for JSON or TOML."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict` output; missing keys take the defaults.

        Raises:
            RetrieverError: An unknown key or an invalid value.
        """
        names = [f.name for f in fields(cls)]
        for key in data:
            if key not in names:
                raise unknown_name("training option", key, names)
        return cls(**data)


@dataclass(frozen=True)
class PairExample:
    """One labelled training pair.

    Attributes:
        query: Query text.
        document: Document text.
        positive: Whether the document answers the query.
        mu: The pair's class value (0..2), made a margin by the config's margin function.
        group: Free-text class name, counted in the logged class histogram.
    """

    query: str
    document: str
    positive: bool
    mu: float
    group: str = ""

    def __post_init__(self) -> None:
        for name in ("query", "document"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise RetrieverError(f"PairExample.{name} must be non-empty text, got {value!r}")
        if not isinstance(self.positive, bool):
            raise RetrieverError(f"PairExample.positive must be a bool, got {self.positive!r}")
        check_mu(self.mu)


@dataclass(frozen=True)
class CurvePoint:
    """Training loss and learning rate of one optimizer step."""

    step: int
    epoch: float
    loss: float
    learning_rate: float


@dataclass(frozen=True)
class TrainResult:
    """What a run produced.

    Attributes:
        model_dir: The chosen epoch's model, loadable with ``SentenceTransformer``.
        best_checkpoint: The checkpoint that model comes from.
        epochs_run: Epochs trained in all (a resumed run counts those before it too).
        steps: Optimizer steps in all.
        curve: Loss and learning rate per step, earliest first (before a resume too).
        epoch_scores: Dev score per epoch (index 0 is epoch 1); empty without ``eval_fn``.
        best_epoch: The chosen epoch: highest dev score (earliest on ties), else the last.
        seconds: Wall time of this call.
        examples_per_second: Pairs per second of batch preparation and optimizer steps in this
            call (checkpoint writing and ``eval_fn`` left out).
        precision: ``"fp32"`` or ``"bf16"``, as used.
        device: ``"cpu"`` or ``"cuda"``.
        group_by_length: Whether batches were length-grouped (False when the recipe's own
            sampler drew them).
    """

    model_dir: Path
    best_checkpoint: Path
    epochs_run: int
    steps: int
    curve: tuple[CurvePoint, ...]
    epoch_scores: tuple[float, ...]
    best_epoch: int
    seconds: float
    examples_per_second: float
    precision: str
    device: str
    group_by_length: bool = False
