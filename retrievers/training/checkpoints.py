"""Atomic checkpoints, and a resume that survives a torn one.

The transformers ``Trainer`` writes a checkpoint file by file into ``checkpoint-N`` (weights, then
optimizer, scheduler and RNG state, ``trainer_state.json`` last), so a run killed while saving left
a ``checkpoint-N`` that resuming could not read. Here:

- :func:`atomic_trainer` subclasses the trainer so each checkpoint is written into
  ``checkpoint-N.tmp-<pid>/checkpoint-N``, its files fsynced, then renamed to ``checkpoint-N``
  (:func:`commit_folder`): a ``checkpoint-N`` folder is complete or absent.
- :func:`recover` picks the newest resumable checkpoint of a run folder and removes, with a warning
  naming each, unfinished saves and torn checkpoints (those of runs killed before this module, or
  damaged by hand); the resumed run writes them again.
- :func:`write_json` replaces a small JSON file whole (train config, dev scores).
- :func:`score_checkpoint` and :func:`score_epochs` keep each checkpoint's dev score beside it.

Renames stay inside the checkpoints folder, so they never cross a file system.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from retrievers.errors import RetrieverError
from retrievers.training.config import is_number

logger = logging.getLogger(__name__)

STATE_FILE = "trainer_state.json"
SCORE_FILE = "dev_score.json"
EvalFn = Callable[[Path, int], float]
#: One of these holds the weights (sentence-transformers model, or the LoRA adapter alone).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors",
                "pytorch_model.bin", "adapter_model.bin")
#: What the trainer needs besides weights and state to continue exactly where the run stopped.
RESUME_FILES = ("optimizer.pt", "scheduler.pt", "rng_state*.pth")  # rng_state_<rank>.pth if several
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_STAGING = re.compile(r"^checkpoint-\d+\.tmp-.+$")


def checkpoint_folders(checkpoints: Path) -> list[Path]:
    """The ``checkpoint-N`` folders in ``checkpoints``, lowest step first (no temporary ones)."""
    if not checkpoints.is_dir():
        return []
    folders = [p for p in checkpoints.iterdir() if p.is_dir() and _CHECKPOINT.match(p.name)]
    return sorted(folders, key=lambda p: int(_CHECKPOINT.match(p.name).group(1)))


def staging_folders(checkpoints: Path) -> list[Path]:
    """Folders of saves that never finished (``checkpoint-N.tmp-*``)."""
    if not checkpoints.is_dir():
        return []
    return sorted(p for p in checkpoints.iterdir() if _STAGING.match(p.name))


def torn_reason(folder: Path, *, resume: bool = False) -> str | None:
    """Why ``folder`` is not a usable checkpoint, or None when it is.

    Args:
        folder: A ``checkpoint-N`` folder.
        resume: Also require the optimizer, scheduler and RNG state needed to continue from it.
    """
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {STATE_FILE}"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"{STATE_FILE} is not valid JSON"
    if not isinstance(state, dict) or not isinstance(state.get("epoch"), int | float):
        return f"{STATE_FILE} has no epoch"
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        return f"no weights ({' or '.join(WEIGHT_FILES[:3])})"
    missing = [name for name in RESUME_FILES if resume and not any(folder.glob(name))]
    return f"no {', '.join(missing)}" if missing else None


def recover(checkpoints: Path) -> Path | None:
    """Make a run's checkpoints folder resumable; return the checkpoint to resume from.

    Removes unfinished saves, every checkpoint newer than the newest resumable one (the resumed
    run writes them again) and torn older ones, logging a warning that names each.

    Returns:
        The newest checkpoint with weights, trainer state and resume state; None when there is
        none (training starts over; all checkpoint folders are then removed).
    """
    removed = [(p, "an unfinished save") for p in staging_folders(checkpoints)]
    resume_from = None
    for folder in reversed(checkpoint_folders(checkpoints)):
        reason = torn_reason(folder, resume=resume_from is None)
        if reason is not None:
            removed.append((folder, reason))
        elif resume_from is None:
            resume_from = folder
    for folder, reason in removed:
        logger.warning("removing %s (%s): an interrupted save left it incomplete", folder, reason)
        try:
            shutil.rmtree(folder)
        except OSError as exc:
            raise RetrieverError(f"cannot remove the incomplete checkpoint {folder} ({exc}); "
                                 "delete it by hand, then resume") from exc
    if resume_from is None and removed:
        logger.warning("no complete checkpoint in %s: training from the start", checkpoints)
    elif resume_from is not None and removed:
        logger.warning("resuming from %s, the newest complete checkpoint", resume_from.name)
    return resume_from


def epoch_of(checkpoint: Path) -> int:
    """The epoch a complete checkpoint ends."""
    state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    return round(state["epoch"])


def score_checkpoint(folder: Path, epoch: int, eval_fn: EvalFn) -> float:
    """Score a checkpoint with ``eval_fn`` and save the score in it (``dev_score.json``)."""
    score = eval_fn(folder, epoch)
    if not is_number(score):
        raise RetrieverError(f"eval_fn must return a finite number (higher is better), got "
                             f"{score!r} for epoch {epoch}")
    write_json(folder / SCORE_FILE, {"epoch": epoch, "score": float(score)})
    logger.info("epoch %d: dev score %.4f", epoch, score)
    return float(score)


def score_epochs(checkpoints: Path, eval_fn: EvalFn | None
                 ) -> list[tuple[int, Path, float | None]]:
    """``(epoch, folder, score)`` per checkpoint; unscored ones are scored if ``eval_fn``."""
    epochs = []
    for folder in checkpoint_folders(checkpoints):
        epoch = epoch_of(folder)
        score = None if eval_fn is None else _saved_score(folder)
        if eval_fn is not None and score is None:
            score = score_checkpoint(folder, epoch, eval_fn)
        epochs.append((epoch, folder, score))
    if not epochs:
        raise RetrieverError(f"training wrote no checkpoint in {checkpoints}")
    return epochs


def _saved_score(folder: Path) -> float | None:
    """The dev score saved in a checkpoint; None when absent or unreadable (scored again)."""
    try:
        score = json.loads((folder / SCORE_FILE).read_text(encoding="utf-8"))["score"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("%s unreadable (%s): scoring the checkpoint again", folder / SCORE_FILE, exc)
        return None
    return float(score) if is_number(score) else None


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file, so it is whole or old."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def commit_folder(staged: Path, final: Path) -> None:
    """Flush every file under ``staged`` to disk, then rename it to ``final`` (same parent).

    A leftover ``final`` (not expected: :func:`recover` removes newer checkpoints before a
    resume) is moved aside first, so the rename never fails on a non-empty folder.
    """
    for root, _, files in os.walk(staged):
        for name in files:
            _fsync(Path(root) / name)
        _fsync(Path(root))
    if final.exists():
        aside = final.with_name(f"{final.name}.tmp-old-{os.getpid()}")
        logger.warning("replacing the existing %s with the new save", final)
        os.replace(final, aside)
        shutil.rmtree(aside)
    os.replace(staged, final)
    _fsync(final.parent)


def _fsync(path: Path) -> None:
    if path.is_dir() and os.name != "posix":
        return  # only POSIX can open a folder to flush its entries
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@cache
def atomic_trainer(trainer_class: type) -> type:
    """``trainer_class`` (a transformers ``Trainer``) writing each checkpoint atomically.

    The trainer's own ``_save_checkpoint`` does the writing (model, optimizer, scheduler, RNG and
    trainer state, whatever the installed version saves); only the folder it writes into changes,
    through ``_get_output_dir``, which it asks once for the run folder. ``on_save`` callbacks run
    after the rename, so they see the final ``checkpoint-N``.
    """

    class AtomicCheckpointTrainer(trainer_class):  # type: ignore[misc, valid-type]
        _staging: str | None = None

        def _get_output_dir(self, trial: Any) -> str:
            return self._staging or super()._get_output_dir(trial)

        def _save_checkpoint(self, model: Any, trial: Any) -> None:
            run_dir = Path(super()._get_output_dir(trial))
            name = f"checkpoint-{self.state.global_step}"
            staging = run_dir / f"{name}.tmp-{os.getpid()}"
            if staging.exists():
                shutil.rmtree(staging)
            self._staging = str(staging)
            try:
                super()._save_checkpoint(model, trial)
            finally:
                self._staging = None
            if self.args.should_save:
                commit_folder(staging / name, run_dir / name)
                staging.rmdir()

    AtomicCheckpointTrainer.__name__ = f"Atomic{trainer_class.__name__}"
    AtomicCheckpointTrainer.__qualname__ = AtomicCheckpointTrainer.__name__
    return AtomicCheckpointTrainer


def train_and_pick(trainer: Any, resume_from: str | None, monitor: Any, checkpoints: Path,
                   eval_fn: EvalFn | None) -> tuple[list[tuple[int, Path, float]], int, Path]:
    """Run ``trainer`` (from ``resume_from`` when given; the progress ``monitor`` closed in
    any case), then score every epoch's checkpoint and pick the one to export: the highest dev
    score (the earliest epoch on ties), or the last epoch without ``eval_fn``.

    Returns:
        Every epoch as ``(epoch, checkpoint, score)``, the chosen epoch and its checkpoint.
    """
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    except KeyboardInterrupt:
        logger.warning("training interrupted: resume=True continues from the newest checkpoint "
                       "in %s", checkpoints)
        raise
    finally:
        monitor.close()
    epochs = score_epochs(checkpoints, eval_fn)
    best_epoch, best, _ = epochs[-1] if eval_fn is None else max(
        epochs, key=lambda e: (e[2], -e[0]))  # highest score, earliest epoch on ties
    return epochs, best_epoch, best
