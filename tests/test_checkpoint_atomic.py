"""Atomic checkpoints (issue 26, item 6): a torn checkpoint never breaks a resume.

Every run here is the 2-epoch, 6-step run of test_training_engine (checkpoints at steps 3 and 6).
Training is seeded and runs on the CPU, so an interrupted-and-resumed run must end with exactly the
weights of the uninterrupted one (``torch.equal``, not a tolerance): a resume from the wrong state
(a fresh optimizer, another RNG state, a skipped epoch) changes them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_training_engine import CONFIG, PAIRS

from retrievers.errors import RetrieverError
from retrievers.training import TrainConfig, train_pairs
from retrievers.training.checkpoints import recover, torn_reason, write_json

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Run in a child process: train, but block for good inside the save of checkpoint-<step>, right
#: after the RNG state is written (weights, optimizer and scheduler are already there; the trainer
#: state is not), after writing the folder being saved to the marker file. The parent SIGKILLs it.
CHILD = """
import sys, time
from pathlib import Path
from transformers import Trainer
from test_training_engine import CONFIG, PAIRS
from retrievers.training import TrainConfig, train_pairs

base, out, marker, step = sys.argv[1:]
save_rng_state = Trainer._save_rng_state

def blocking(self, output_dir):
    save_rng_state(self, output_dir)
    if self.state.global_step == int(step):
        Path(marker).write_text(output_dir)
        time.sleep(3600)

Trainer._save_rng_state = blocking
train_pairs(Path(base), PAIRS, Path(out), CONFIG, progress=False)
"""


def tensors(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_equal_weights(a: Path, b: Path) -> None:
    wa, wb = tensors(a), tensors(b)
    assert wa.keys() == wb.keys()
    assert [k for k in wa if not torch.equal(wa[k], wb[k])] == []


@pytest.fixture(scope="module")
def reference(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """One uninterrupted run (seed 1)."""
    return train_pairs(tiny_model_path, PAIRS, tmp_path_factory.mktemp("reference"), CONFIG,
                       progress=False)


def interrupt_after_epoch_1(base: Path, out: Path) -> Path:
    """Train until epoch 1's checkpoint is written, then stop (raised inside eval_fn)."""
    def crash(folder: Path, epoch: int) -> float:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_pairs(base, PAIRS, out, CONFIG, progress=False, eval_fn=crash)
    return out / "checkpoints"


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_seeded_runs_are_bit_identical_on_this_cpu(reference, tiny_model_path: Path,
                                                   tmp_path: Path) -> None:
    """What makes the exact comparisons below meaningful: same seed, same data, same weights."""
    again = train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, progress=False)
    assert_equal_weights(again.model_dir, reference.model_dir)
    # and training moved them: a resume that skipped epoch 2 could not pass for the reference
    first = tensors(reference.best_checkpoint.parent / "checkpoint-3")
    assert any(not torch.equal(first[k], w) for k, w in tensors(reference.model_dir).items())


def test_a_torn_checkpoint_and_a_temporary_folder_are_skipped(
        reference, tiny_model_path: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """The issue's state: a later checkpoint-6 without trainer_state.json, plus a save in a
    temporary folder that never finished; resume continues from checkpoint-3."""
    checkpoints = interrupt_after_epoch_1(tiny_model_path, tmp_path)
    torn = checkpoints / "checkpoint-6"
    shutil.copytree(checkpoints / "checkpoint-3", torn)
    (torn / "trainer_state.json").unlink()
    staged = checkpoints / "checkpoint-6.tmp-424242" / "checkpoint-6"
    staged.mkdir(parents=True)
    (staged / "model.safetensors").write_bytes((torn / "model.safetensors").read_bytes()[:100])
    calls: list[int] = []
    with caplog.at_level("WARNING", logger="retrievers"):
        resumed = train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, resume=True,
                              progress=lambda done, total: calls.append(done))
    assert calls == [3, 4, 5, 6]  # continued after checkpoint-3
    assert "checkpoint-6 (no trainer_state.json)" in caplog.text
    assert "checkpoint-6.tmp-424242 (an unfinished save)" in caplog.text
    assert "resuming from checkpoint-3" in caplog.text
    assert names(checkpoints) == ["checkpoint-3", "checkpoint-6"]
    assert json.loads((checkpoints / "checkpoint-6" / "trainer_state.json").read_text())[
        "global_step"] == 6
    assert (resumed.epochs_run, resumed.steps) == (2, 6)
    assert_equal_weights(resumed.model_dir, reference.model_dir)


def test_only_torn_checkpoints_start_over_with_a_warning(
        reference, tiny_model_path: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """What ``kbcurate train`` meets when the first epoch's save was torn: its run folder has a
    checkpoints folder, so it passes resume=True; the engine trains from the start."""
    checkpoints = interrupt_after_epoch_1(tiny_model_path, tmp_path)
    (checkpoints / "checkpoint-3" / "trainer_state.json").write_text('{"global_st')  # cut short
    calls: list[int] = []
    with caplog.at_level("WARNING", logger="retrievers"):
        resumed = train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, resume=True,
                              progress=lambda done, total: calls.append(done))
    assert "checkpoint-3 (trainer_state.json is not valid JSON)" in caplog.text
    assert "no complete checkpoint" in caplog.text and "training from the start" in caplog.text
    assert calls == [1, 2, 3, 4, 5, 6]
    assert_equal_weights(resumed.model_dir, reference.model_dir)


def test_without_resume_a_torn_checkpoint_is_a_clear_error(tiny_model_path: Path,
                                                          tmp_path: Path) -> None:
    torn = tmp_path / "checkpoints" / "checkpoint-3"
    torn.mkdir(parents=True)
    with pytest.raises(RetrieverError, match=r"holds checkpoints of an earlier run "
                                             r"\(checkpoint-3\); pass resume=True"):
        train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, progress=False)


def test_kill_during_a_save_then_resume_equals_an_uninterrupted_run(
        reference, tiny_model_path: Path, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A real ``kill -9`` while checkpoint-6 is being written, then resume in this process."""
    out, marker = tmp_path / "run", tmp_path / "saving"
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "tests")])}
    child = subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(tiny_model_path),
                              str(out), str(marker), "6"], cwd=REPO_ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a speed check
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), f"the child never reached the save: {child.communicate()[1]}"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert child.returncode == -signal.SIGKILL
    checkpoints = out / "checkpoints"
    saving = Path(marker.read_text())
    assert saving.parent.name == f"checkpoint-6.tmp-{child.pid}"  # never in checkpoint-6 itself
    assert (saving / "model.safetensors").is_file() and not (saving / "trainer_state.json").exists()
    assert names(checkpoints) == ["checkpoint-3", f"checkpoint-6.tmp-{child.pid}"]
    with caplog.at_level("WARNING", logger="retrievers"):
        resumed = train_pairs(tiny_model_path, PAIRS, out, CONFIG, resume=True, progress=False)
    assert f"checkpoint-6.tmp-{child.pid} (an unfinished save)" in caplog.text
    assert names(checkpoints) == ["checkpoint-3", "checkpoint-6"]
    assert (resumed.epochs_run, resumed.steps) == (2, 6)
    assert_equal_weights(resumed.model_dir, reference.model_dir)


def fake_checkpoint(folder: Path, *files: str, state: str = '{"epoch": 1.0}') -> Path:
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_bytes(b"x")
    if state:
        (folder / "trainer_state.json").write_text(state)
    return folder


def test_recover_resumes_from_the_newest_checkpoint_with_resume_state(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Older checkpoints keep weights and state only (resume state is pruned); anything newer
    than the newest resumable one is removed, since the resumed run writes it again."""
    resume = ("optimizer.pt", "scheduler.pt", "rng_state.pth")
    older = fake_checkpoint(tmp_path / "checkpoint-3", "model.safetensors")
    newest = fake_checkpoint(tmp_path / "checkpoint-6", "model.safetensors", *resume)
    fake_checkpoint(tmp_path / "checkpoint-9", "model.safetensors", "optimizer.pt")
    fake_checkpoint(tmp_path / "checkpoint-12", *resume)
    fake_checkpoint(tmp_path / "checkpoint-15", "model.safetensors", *resume, state="[]")
    (tmp_path / "checkpoint-18.tmp-7" / "checkpoint-18").mkdir(parents=True)
    with caplog.at_level("WARNING", logger="retrievers"):
        assert recover(tmp_path) == newest
    assert names(tmp_path) == ["checkpoint-3", "checkpoint-6"]
    assert "checkpoint-9 (no scheduler.pt, rng_state*.pth)" in caplog.text
    assert "checkpoint-12 (no weights (model.safetensors or" in caplog.text
    assert "checkpoint-15 (trainer_state.json has no epoch)" in caplog.text
    assert "checkpoint-18.tmp-7 (an unfinished save)" in caplog.text
    assert torn_reason(older) is None and torn_reason(older, resume=True) is not None
    assert recover(tmp_path / "missing") is None


def test_a_lora_checkpoint_is_complete(tiny_model_path: Path, tmp_path: Path) -> None:
    """LoRA runs save the adapter alone (adapter_model.safetensors): recover must keep them."""
    from retrievers.training.engine import train_model
    from retrievers.training.lora import add_lora, merge_lora
    from retrievers.training.losses import MultiMarginLoss
    from retrievers.training.trainer import _build_dataset

    config = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 1})
    train_model(tiny_model_path, _build_dataset(PAIRS, config), lambda m: MultiMarginLoss(m),
                tmp_path, config, progress=False, prepare_model=lambda m: (add_lora(m), m)[1],
                finalize_model=merge_lora)
    checkpoint = tmp_path / "checkpoints" / "checkpoint-3"
    assert (checkpoint / "adapter_model.safetensors").is_file()
    assert not (checkpoint / "model.safetensors").exists()
    assert torn_reason(checkpoint, resume=True) is None
    assert recover(tmp_path / "checkpoints") == checkpoint
    assert names(tmp_path / "checkpoints") == ["checkpoint-3"]


def test_write_json_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "dev_score.json"
    path.write_text("old")
    write_json(path, {"epoch": 1, "score": 0.5})
    assert json.loads(path.read_text()) == {"epoch": 1, "score": 0.5}
    assert names(tmp_path) == ["dev_score.json"]  # no temporary file left behind
