"""The training engine every recipe runs on: :func:`train_model`.

It wraps sentence-transformers' ``SentenceTransformerTrainer`` around any dataset and loss: AdamW
with a linear schedule and an explicit warm-up ratio (no hidden 10,000-step warm-up, TRAINING.md
6.4), no weight decay on bias/LayerNorm, gradient clipping, seeded data order, loss and learning
rate logged every step, one checkpoint per epoch, resume after an interruption, dev scoring per
epoch, bf16 autocast on CUDA (or on request on CPU), length-grouped batches on request
(``TrainConfig.group_by_length``). Recipes supply the dataset, a loss factory, optionally a batch
sampler (BiCA: no duplicate texts in a batch; BioHiCL: batches with positive pairs; it wins over
length grouping) and model hooks (BioHiCL: LoRA added before training, merged before export).
Layout of ``output_dir``::

    train_config.json          the run's TrainConfig (resume refuses a different one)
    checkpoints/checkpoint-N/  one per epoch: a sentence-transformers folder (model.safetensors,
                               or the adapter only with LoRA), trainer state, and dev_score.json
                               once eval_fn scored it
    model/                     the chosen epoch's model only: safetensors, no optimizer, no pickle

Every epoch's weights are kept, so a dev score can pick the epoch. Resuming also needs optimizer,
scheduler and RNG state, which the trainer writes with ``torch.save`` (``optimizer.pt``,
``scheduler.pt``, ``rng_state.pth``, ``training_args.bin``); weights are never pickled. To keep
disk use near one model per epoch, optimizer and scheduler state is deleted from each checkpoint
once a newer one is written: resume always continues from the newest. Checkpoints are written
atomically (a temporary folder renamed once complete, :mod:`retrievers.training.checkpoints`), and
a resume skips and removes torn ones left by a run killed mid-save, so a ``kill -9`` costs at most
the epoch in progress.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievers.base import Progress, progress_reporter
from retrievers.errors import RetrieverError, unknown_name
from retrievers.training.checkpoints import (
    EvalFn,
    atomic_trainer,
    checkpoint_folders,
    epoch_of,
    recover,
    score_checkpoint,
    train_and_pick,
    write_json,
)
from retrievers.training.config import (
    PRECISIONS,
    CurvePoint,
    TrainConfig,
    TrainResult,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer
    from torch import nn

logger = logging.getLogger(__name__)

#: Checkpoint files needed only to resume; deleted from all checkpoints but the newest.
RESUME_ONLY = ("optimizer.pt", "scheduler.pt")
CONFIG_FILE = "train_config.json"
LossFactory = Callable[["SentenceTransformer"], "nn.Module"]
ModelHook = Callable[["SentenceTransformer"], "SentenceTransformer"]

#: How runs saved before an option existed trained (their train_config.json lacks it).
_BEFORE_OPTION = {"group_by_length": False}


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, numpy and torch (CPU and every GPU)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_precision(precision: str, device: str) -> bool:
    """Decide whether to train with bf16 autocast.

    Args:
        precision: ``"auto"``, ``"fp32"`` or ``"bf16"``.
        device: ``"cpu"`` or ``"cuda"`` (or ``"cuda:N"``).

    Returns:
        True for bf16 autocast, False for fp32.

    Raises:
        RetrieverError: Unknown precision or device, or bf16 on a GPU without it.
    """
    import torch

    if precision not in PRECISIONS:
        raise unknown_name("precision", precision, PRECISIONS)
    cuda = device.startswith("cuda")
    if not cuda and device != "cpu":
        raise RetrieverError(f"training runs on 'cpu' or 'cuda', got device {device!r}")
    if cuda and not torch.cuda.is_available():
        raise RetrieverError(f"device {device!r} asked for, but torch sees no CUDA GPU; use 'cpu'")
    if precision != "bf16":
        return precision == "auto" and cuda and torch.cuda.is_bf16_supported()
    if cuda and not torch.cuda.is_bf16_supported():
        raise RetrieverError(
            f"precision 'bf16' asked for, but GPU {torch.cuda.get_device_name()} lacks bf16 (it "
            "needs compute capability 8.0+, e.g. A100/H100); use precision 'fp32' or 'auto'")
    if not cuda and not _cpu_has_native_bf16():
        logger.warning("this CPU has no native bf16 (AVX512-BF16 or AMX): bf16 autocast is "
                       "emulated and usually slower than fp32")
    return True


def _cpu_has_native_bf16() -> bool:
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def train_model(base: str | Path | SentenceTransformer, dataset: Any,
                loss_factory: LossFactory, output_dir: str | Path,
                config: TrainConfig | None = None, *, resume: bool = False,
                progress: Progress = True, eval_fn: EvalFn | None = None,
                batch_sampler: Any = None, prepare_model: ModelHook | None = None,
                finalize_model: ModelHook | None = None) -> TrainResult:
    """Fine-tune a bi-encoder on a prepared dataset with any sentence-transformers loss.

    ``eval_fn`` runs in a trainer callback right after each epoch's checkpoint is written, with
    the Python, numpy and torch RNG state restored afterwards so it cannot change training; its
    score is saved in the checkpoint. Checkpoints left unscored (the run stopped inside
    ``eval_fn``, or an earlier call had none) are scored after training.

    Args:
        base: Model name, model folder, or a ``SentenceTransformer`` (trained in place).
        dataset: A ``datasets.Dataset`` whose columns the loss takes (a ``label`` column, if any,
            goes to the loss as labels).
        loss_factory: ``fn(model) -> loss module``.
        output_dir: Run folder (layout in the module docstring).
        config: Hyperparameters; ``None`` for the defaults.
        resume: Continue from the newest checkpoint in ``output_dir/checkpoints`` (from the start
            when there is none); ends with the same weights as an uninterrupted run.
        progress: ``True`` for a tqdm bar over steps, ``False`` for silence, or ``fn(done, total)``
            called after each optimizer step.
        eval_fn: ``eval_fn(model_folder, epoch) -> dev score``; the best epoch becomes the model.
        batch_sampler: ``SentenceTransformerTrainingArguments.batch_sampler`` (a ``BatchSamplers``
            value, a sampler class or a factory); ``None``: shuffled batches.
        prepare_model: Applied to the loaded model before training (e.g. add a LoRA adapter).
        finalize_model: Applied to the chosen checkpoint's model before it is saved to
            ``output_dir/model`` (e.g. merge the adapter into the base weights).

    Returns:
        The :class:`TrainResult`.

    Raises:
        RetrieverError: An empty dataset, a bad config, checkpoints of another run.
    """
    config = config or TrainConfig()
    started = time.perf_counter()
    import torch
    from sentence_transformers.sentence_transformer import SentenceTransformerTrainer
    from transformers import PrinterCallback

    if dataset is None or len(dataset) == 0:
        raise RetrieverError("no training rows: the dataset is empty")
    out = Path(output_dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = resolve_precision(config.precision, device)
    resume_from = prepare_output(out, config, resume)
    set_seed(config.seed)
    model = _load_model(base, device)
    model.max_seq_length = config.max_seq_length
    if prepare_model is not None:
        model = prepare_model(model)
    grouped = config.group_by_length and batch_sampler is None
    if grouped:
        batch_sampler = _length_sampler(dataset, model, config.max_seq_length)
    elif config.group_by_length:
        logger.warning("group_by_length ignored: this recipe draws its own batches (%r)",
                       batch_sampler)
    monitor = step_monitor(progress)
    trainer = atomic_trainer(SentenceTransformerTrainer)(
        model=model,
        args=training_args(config, out / "checkpoints", device, bf16, batch_sampler),
        train_dataset=dataset, loss=loss_factory(model),
        callbacks=[monitor, epoch_checkpoints(eval_fn)])
    trainer.remove_callback(PrinterCallback)  # it prints every step's log dict
    precision = "bf16" if bf16 else "fp32"
    logger.info("training on %d rows, %d epoch(s), %s, %s%s%s", len(dataset), config.epochs,
                device, precision, ", length-grouped batches" if grouped else "",
                f", resuming {resume_from}" if resume_from else "")
    epochs_before = epoch_of(Path(resume_from)) if resume_from else 0
    epochs, best_epoch, best = train_and_pick(trainer, resume_from, monitor,
                                              out / "checkpoints", eval_fn)
    epochs_run = round(trainer.state.epoch)
    trained = len(dataset) * (epochs_run - epochs_before)
    result = TrainResult(
        model_dir=_export_model(best, out / "model", finalize_model), best_checkpoint=best,
        epochs_run=epochs_run, steps=trainer.state.global_step,
        curve=curve_points(trainer.state.log_history),
        epoch_scores=tuple(e[2] for e in epochs) if eval_fn else (), best_epoch=best_epoch,
        seconds=time.perf_counter() - started,
        examples_per_second=trained / monitor.seconds if monitor.seconds else 0.0,
        precision=precision, device=device, group_by_length=grouped)
    logger.info("trained %d epoch(s), %d steps, %.1f rows/s; epoch %d saved to %s",
                epochs_run, result.steps, result.examples_per_second, best_epoch, result.model_dir)
    return result


def _length_sampler(dataset: Any, model: SentenceTransformer, max_seq_length: int) -> Any:
    """The length-grouped ``batch_sampler`` over ``dataset``, lengths from the model's tokenizer."""
    from retrievers.training.length_groups import length_grouped_batch_sampler, row_lengths

    return length_grouped_batch_sampler(
        row_lengths(dataset, getattr(model, "tokenizer", None), max_seq_length))


def training_args(config: TrainConfig, checkpoints: Path, device: str, bf16: bool,
                  batch_sampler: Any = None, args_class: type | None = None) -> Any:
    """Trainer arguments (``args_class``, default ``SentenceTransformerTrainingArguments``):
    every schedule, seed and save setting explicit."""
    from sentence_transformers.sentence_transformer import SentenceTransformerTrainingArguments

    return (args_class or SentenceTransformerTrainingArguments)(
        output_dir=str(checkpoints), num_train_epochs=config.epochs,
        per_device_train_batch_size=config.batch_size, learning_rate=config.learning_rate,
        lr_scheduler_type="linear", warmup_steps=float(config.warmup_ratio),  # float < 1: a ratio
        weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm, optim="adamw_torch",
        seed=config.seed, data_seed=config.seed, bf16=bf16, use_cpu=device == "cpu",
        save_strategy="epoch", save_total_limit=None, save_only_model=False,
        logging_strategy="steps", logging_steps=1, report_to="none", disable_tqdm=True,
        dataloader_num_workers=0, dataloader_pin_memory=device == "cuda", eval_strategy="no",
        **({"batch_sampler": batch_sampler} if batch_sampler is not None else {}))


def prepare_output(out: Path, config: TrainConfig, resume: bool) -> str | None:
    """Check the run folder against ``resume``; return the checkpoint to resume from.

    Unfinished saves, and with ``resume`` torn checkpoints, are removed first (:func:`recover`).
    """
    checkpoints = out / "checkpoints"
    earlier = checkpoint_folders(checkpoints)
    if earlier and not resume:
        raise RetrieverError(
            f"{out} already holds checkpoints of an earlier run ({earlier[-1].name}); pass "
            "resume=True to continue it, or choose an empty output_dir")
    last = recover(checkpoints)
    config_file = out / CONFIG_FILE
    if last is not None and config_file.is_file():
        try:
            saved = {**_BEFORE_OPTION, **json.loads(config_file.read_text(encoding="utf-8"))}
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RetrieverError(
                f"{config_file} is not valid JSON ({exc}): it records the config the run "
                f"started with; delete {out} to train from the start") from exc
        changed = [f"{k} ({saved.get(k)!r} -> {v!r})" for k, v in config.to_dict().items()
                   if saved.get(k) != v]
        if changed:
            raise RetrieverError(
                f"resume=True needs the config the run in {out} started with; changed: "
                f"{', '.join(changed)}. Use that config, or a new output_dir to change it")
    if resume and last is None:
        logger.info("no checkpoint in %s: training from the start", checkpoints)
    out.mkdir(parents=True, exist_ok=True)
    write_json(config_file, config.to_dict())
    return None if last is None else str(last)


def _load_model(base: str | Path | SentenceTransformer, device: str) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    if isinstance(base, SentenceTransformer):
        return base.to(device)
    if isinstance(base, str | Path):
        return SentenceTransformer(str(base), device=device)
    raise RetrieverError(f"base must be a model name, a model folder or a SentenceTransformer, "
                         f"got {type(base).__name__}")


def _export_model(checkpoint: Path, model_dir: Path, finalize: ModelHook | None = None) -> Path:
    """Save the checkpoint's model alone (safetensors, no trainer state) to ``model_dir``."""
    from sentence_transformers import SentenceTransformer

    if model_dir.exists():
        shutil.rmtree(model_dir)
    model = SentenceTransformer(str(checkpoint), device="cpu")
    if finalize is not None:
        model = finalize(model)
    model.save(str(model_dir), safe_serialization=True)
    if (checkpoint / "README.md").is_file():  # the card written while training describes the run
        shutil.copyfile(checkpoint / "README.md", model_dir / "README.md")
    return model_dir


def curve_points(log_history: list[dict[str, Any]]) -> tuple[CurvePoint, ...]:
    return tuple(CurvePoint(int(r["step"]), float(r["epoch"]), float(r["loss"]),
                            float(r["learning_rate"]))
                 for r in log_history if "loss" in r and "learning_rate" in r)


@contextmanager
def _preserved_rng() -> Iterator[None]:
    """Restore the Python, numpy and torch RNG state afterwards, whatever ran inside."""
    import numpy as np
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def step_monitor(progress: Progress) -> Any:
    """A callback reporting optimizer steps to ``progress`` and timing them.

    ``seconds`` sums the time from each epoch's start or the previous step's end to each step's
    end: batch preparation and steps, without checkpoint writing or ``eval_fn``.
    """
    from transformers import TrainerCallback

    class StepMonitor(TrainerCallback):
        def __init__(self) -> None:
            self.seconds, self._mark = 0.0, 0.0
            self._reporter: Any = None
            self._advance: Callable[[int], None] | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._reporter = progress_reporter(state.max_steps, progress, "training", 0)
            self._advance = self._reporter.__enter__()
            if state.global_step:  # resumed
                self._advance(state.global_step)

        def on_epoch_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._mark = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.perf_counter()
            self.seconds, self._mark = self.seconds + now - self._mark, now
            if self._advance is not None:
                self._advance(1)

        def close(self) -> None:
            if self._reporter is not None:
                self._reporter.__exit__(None, None, None)
                self._reporter = self._advance = None

    return StepMonitor()


def epoch_checkpoints(eval_fn: EvalFn | None) -> Any:
    """A callback that, after each epoch's checkpoint, prunes older resume state and scores it."""
    from transformers import TrainerCallback

    class EpochCheckpoints(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            for older in checkpoint_folders(Path(args.output_dir)):
                for name in RESUME_ONLY if older != folder else ():
                    (older / name).unlink(missing_ok=True)
            if eval_fn is not None:
                with _preserved_rng():
                    score_checkpoint(folder, round(state.epoch), eval_fn)

    return EpochCheckpoints()
