"""Fine-tuning a cross-encoder on graded (query, document) pairs: :func:`train_cross`.

Runs on the same engine as the bi-encoder recipes (:mod:`retrievers.training.engine`): the
explicit AdamW schedule, seeded data order, one atomic checkpoint per epoch, resume after an
interruption, dev scoring that picks the epoch, progress per optimizer step. Only the model and
trainer differ: sentence-transformers' ``CrossEncoder`` (a sequence-classification head with one
logit on top of the base; a bi-encoder base such as all-MiniLM-L6-v2 gets a new, seeded head)
and ``CrossEncoderTrainer``. The chosen epoch is exported to ``output_dir/model`` as a
safetensors folder that :class:`retrievers.cross.CrossScorer` and ``transformers`` load.

Losses (:data:`CROSS_LOSSES`):

* ``"margin"`` (default): EDEL's pointwise multi-margin loss
  (:func:`~retrievers.training.losses.multi_margin_loss`) with the cross-encoder's score in the
  cosine's place: ``s = tanh(logit / 2)`` (in (-1, 1), 0 at a new head's start), ``D = 1 - s``,
  and the per-pair margin ``m`` from ``mu`` as for the bi-encoder. A complete positive (mu 0) is
  pulled to s = 1; a noisy positive of class mu only to ``s >= cos(mu pi / 2)``; a hard negative
  of class mu pushed below ``s <= cos(mu pi / 2)`` (mu 0.8: 0.31, random mu 1.0: 0).
* ``"bce"``: binary cross-entropy on the logit with graded targets: a positive's target is
  ``max(0, cos(mu pi / 2))`` (1 complete, 0.59 at mu 0.6), a negative's 0.

``precision`` ``"auto"`` trains in bf16 autocast on a CUDA GPU with bf16 and on a CPU with native
bf16 (AVX512-BF16/AMX), else fp32 (:func:`retrievers.cross.resolve_cross_precision`).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrievers.base import Progress
from retrievers.errors import RetrieverError, unknown_name
from retrievers.training.checkpoints import (
    EvalFn,
    atomic_trainer,
    epoch_of,
    train_and_pick,
)
from retrievers.training.config import PairExample, TrainConfig, TrainResult
from retrievers.training.engine import (
    curve_points,
    epoch_checkpoints,
    prepare_output,
    set_seed,
    step_monitor,
    training_args,
)
from retrievers.training.losses import margin_from_mu
from retrievers.training.trainer import checked_pairs

logger = logging.getLogger(__name__)

#: The cross-encoder losses (module docstring).
CROSS_LOSSES = ("margin", "bce")


def graded_target(positive: bool, mu: float) -> float:
    """The ``bce`` loss's target: ``max(0, cos(mu pi / 2))`` for a positive, 0 for a negative."""
    return max(0.0, math.cos(mu * math.pi / 2.0)) if positive else 0.0


def cross_dataset(examples: Sequence[PairExample], config: TrainConfig, loss: str) -> Any:
    """Columns ``query``, ``document``, ``label`` (``[y, margin]`` for ``margin``, the graded
    target for ``bce``); logs the class histogram.

    Raises:
        RetrieverError: No pairs, a row that is not a :class:`PairExample`, no positive.
    """
    from datasets import Dataset

    examples = checked_pairs(examples)
    if not any(e.positive for e in examples):
        raise RetrieverError(f"all {len(examples)} training pairs are negatives; a cross-encoder "
                             "needs positives too: add pairs with positive=True")
    histogram = Counter((e.group or "(no group)", "+" if e.positive else "-") for e in examples)
    logger.info("cross-encoder pairs: %d (%d positive); by class: %s", len(examples),
                sum(e.positive for e in examples),
                ", ".join(f"{g} {sign}{n}" for (g, sign), n in sorted(histogram.items())))
    if loss == "bce":
        labels: list[Any] = [graded_target(e.positive, e.mu) for e in examples]
    else:
        margins = {mu: margin_from_mu(mu, config.margin_function)
                   for mu in {e.mu for e in examples}}
        labels = [[1.0 if e.positive else 0.0, margins[e.mu]] for e in examples]
    return Dataset.from_dict({"query": [e.query for e in examples],
                              "document": [e.document for e in examples], "label": labels})


def cross_loss(model: Any, loss: str, weight: float) -> Any:
    """The loss module for ``model`` (a ``CrossEncoder``)."""
    import torch
    from sentence_transformers.util import batch_to_device
    from torch import nn

    from retrievers.training.losses import multi_margin_loss

    if loss not in CROSS_LOSSES:
        raise unknown_name("cross-encoder loss", loss, CROSS_LOSSES)

    class CrossMarginLoss(nn.Module):
        """EDEL's multi-margin loss on ``D = 1 - tanh(logit / 2)``, or graded BCE.

        Inputs: (query, document) pairs; labels ``[y, m]`` (margin) or a target in [0, 1] (bce).
        """

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, inputs: list[list[str]], labels: torch.Tensor, **_: Any
                    ) -> torch.Tensor:
            features = batch_to_device(self.model.preprocess(list(zip(inputs[0], inputs[1],
                                                                      strict=True))),
                                       self.model.device)
            logits = self.model(features)["scores"].view(-1).float()  # (batch,)
            if isinstance(labels, list | tuple):  # the collator's list of (2,) tensors
                labels = torch.stack([torch.as_tensor(x) for x in labels])
            labels = labels.to(logits.device, torch.float32)
            if loss == "bce":
                return nn.functional.binary_cross_entropy_with_logits(logits, labels.view(-1))
            labels = labels.view(-1, 2)  # (batch, 2): y, margin
            distances = 1.0 - torch.tanh(logits / 2.0)  # (batch,) in (0, 2)
            return multi_margin_loss(distances, labels[:, 0], labels[:, 1], weight)

    return CrossMarginLoss()


def train_cross(base: str | Path, examples: Sequence[PairExample], output_dir: str | Path,
                config: TrainConfig | None = None, *, loss: str = "margin", resume: bool = False,
                progress: Progress = True, eval_fn: EvalFn | None = None) -> TrainResult:
    """Fine-tune a cross-encoder on labelled pairs (layout of ``output_dir`` as the engine's).

    Args:
        base: A cross-encoder folder or name (its head is kept), or a bi-encoder / plain
            transformer folder or name (a new one-logit head, seeded by ``config.seed``).
        examples: The pairs (``mu`` grades positives and negatives, see the module docstring).
        output_dir: Run folder: ``train_config.json``, ``checkpoints/``, ``model/``.
        config: Hyperparameters (``precision`` ``"auto"``: bf16 where the hardware has it).
        loss: ``"margin"`` or ``"bce"``.
        resume: Continue from the newest checkpoint in ``output_dir``.
        progress: A tqdm bar (True), silence (False) or ``fn(done, total)`` per step.
        eval_fn: ``fn(checkpoint_folder, epoch) -> dev score``; the best epoch is exported.

    Returns:
        The :class:`TrainResult` (``model_dir`` loads with ``CrossScorer.load``).

    Raises:
        RetrieverError: No pairs, a bad config or loss, checkpoints of another run.
    """
    import torch
    from sentence_transformers.cross_encoder import (
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from transformers import PrinterCallback

    from retrievers.cross import resolve_cross_precision

    config = config or TrainConfig()
    if loss not in CROSS_LOSSES:
        raise unknown_name("cross-encoder loss", loss, CROSS_LOSSES)
    started = time.perf_counter()
    dataset = cross_dataset(examples, config, loss)
    out = Path(output_dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = resolve_cross_precision(config.precision, device) == "bf16"
    resume_from = prepare_output(out, config, resume)
    set_seed(config.seed)  # before the model: a new head is drawn from this seed
    model = _load_cross(base, device, config.max_seq_length)
    monitor = step_monitor(progress)
    trainer = atomic_trainer(CrossEncoderTrainer)(
        model=model, args=training_args(config, out / "checkpoints", device, bf16,
                                        args_class=CrossEncoderTrainingArguments),
        train_dataset=dataset, loss=cross_loss(model, loss, config.loss_weight),
        callbacks=[monitor, epoch_checkpoints(eval_fn)])
    trainer.remove_callback(PrinterCallback)
    precision = "bf16" if bf16 else "fp32"
    logger.info("training a cross-encoder on %d pairs, %d epoch(s), %s, %s, loss %s%s",
                len(dataset), config.epochs, device, precision, loss,
                f", resuming {resume_from}" if resume_from else "")
    epochs_before = epoch_of(Path(resume_from)) if resume_from else 0
    epochs, best_epoch, best = train_and_pick(trainer, resume_from, monitor,
                                              out / "checkpoints", eval_fn)
    epochs_run = round(trainer.state.epoch)
    trained = len(dataset) * (epochs_run - epochs_before)
    result = TrainResult(
        model_dir=export_cross(best, out / "model", config.max_seq_length), best_checkpoint=best,
        epochs_run=epochs_run, steps=trainer.state.global_step,
        curve=curve_points(trainer.state.log_history),
        epoch_scores=tuple(e[2] for e in epochs) if eval_fn else (), best_epoch=best_epoch,
        seconds=time.perf_counter() - started,
        examples_per_second=trained / monitor.seconds if monitor.seconds else 0.0,
        precision=precision, device=device)
    logger.info("trained the cross-encoder %d epoch(s), %d steps, %.1f pairs/s; epoch %d saved "
                "to %s", epochs_run, result.steps, result.examples_per_second, best_epoch,
                result.model_dir)
    return result


def _load_cross(base: str | Path, device: str, max_length: int) -> Any:
    from sentence_transformers.cross_encoder import CrossEncoder

    if not isinstance(base, str | Path):
        raise RetrieverError(f"base must be a model name or folder, got {type(base).__name__}")
    if Path(base).is_dir():
        from retrievers.cross import cross_weights_fingerprint

        cross_weights_fingerprint(base)  # refuses a folder without safetensors weights
    try:
        return CrossEncoder(str(base), num_labels=1, device=device, max_length=max_length,
                            model_kwargs={"use_safetensors": True})
    except (OSError, ValueError) as exc:
        raise RetrieverError(f"cannot load {base} as a cross-encoder base ({exc}); give a "
                             "folder with safetensors weights or a hub name (online)") from exc


def export_cross(checkpoint: Path, model_dir: Path, max_length: int) -> Path:
    """Save a checkpoint's cross-encoder alone (safetensors, no trainer state) to ``model_dir``."""
    from sentence_transformers.cross_encoder import CrossEncoder

    if model_dir.exists():
        shutil.rmtree(model_dir)
    model = CrossEncoder(str(checkpoint), device="cpu", max_length=max_length)
    model.save_pretrained(str(model_dir), safe_serialization=True)
    if (checkpoint / "README.md").is_file():
        shutil.copyfile(checkpoint / "README.md", model_dir / "README.md")
    return model_dir
