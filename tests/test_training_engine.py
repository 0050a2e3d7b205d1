"""The training engine: EDEL's multi-margin loss and train_pairs on the tiny random BERT.

Runs train_pairs a handful of times on 12 pairs (batch 4, 2 epochs, 6 steps), so the file takes
seconds beyond the one-off import of transformers.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from retrievers.errors import RetrieverError
from retrievers.training import (
    MarginFunction,
    MultiMarginLoss,
    PairExample,
    TrainConfig,
    margin_from_mu,
    multi_margin_loss,
    resolve_precision,
    train_pairs,
)
from retrievers.training.losses import pair_loss
from retrievers.training.trainer import measure_training_speed

QUERIES = {
    "BRAF V600E melanoma": "BRAF V600E melanoma responds to vemurafenib and dabrafenib.",
    "EGFR L858R lung cancer": "EGFR L858R lung cancer responds to erlotinib and osimertinib.",
    "KRAS G12C pancreatic": "KRAS G12C inhibitors sotorasib in pancreatic adenocarcinoma.",
}
NEGATIVES = [
    "Aspirin, metformin and statins reduce the risk of cancer in diabetes patients.",
    "Patients were randomised to placebo or treatment; survival improved.",
]
#: 3 positives (mu 0) and 9 negatives (mu 1: pushed to cosine <= 0), 12 pairs.
PAIRS = [PairExample(q, doc, True, 0.0, "complete") for q, doc in QUERIES.items()] + [
    PairExample(q, doc, False, 1.0, "random")
    for q in QUERIES for doc in [*NEGATIVES, *(d for p, d in QUERIES.items() if p != q)][:3]]
CONFIG = TrainConfig(epochs=2, batch_size=4, learning_rate=1e-3, max_seq_length=32, seed=1)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.allclose(wa[k], wb[k]) for k in wa)


def set_loss(model_dir: Path, pairs: list[PairExample]) -> float:
    """Multi-margin loss of ``pairs`` under the model (eval mode, no dropout)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    q = model.encode([p.query for p in pairs], convert_to_tensor=True)
    d = model.encode([p.document for p in pairs], convert_to_tensor=True)
    y = torch.tensor([float(p.positive) for p in pairs])
    m = torch.tensor([margin_from_mu(p.mu) for p in pairs])
    return float(multi_margin_loss(1 - F.cosine_similarity(q, d), y, m, 0.8))


@pytest.fixture(scope="module")
def reference(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """One uninterrupted run (seed 1), reporting progress to a list."""
    calls: list[tuple[int, int]] = []
    out = tmp_path_factory.mktemp("reference")
    result = train_pairs(tiny_model_path, PAIRS, out, CONFIG,
                         progress=lambda done, total: calls.append((done, total)))
    return result, calls


# --- margins and the loss, by hand -----------------------------------------------------------

@pytest.mark.parametrize(("mu", "kind", "margin"), [
    (0.6, "angle", 0.412), (0.2, "angle", 0.049), (1.0, "angle", 1.0), (1.2, "angle", 1.309),
    (0.0, "angle", 0.0), (0.6, "distance", 0.6), (1.2, MarginFunction.DISTANCE, 1.2),
])
def test_margin_from_mu(mu: float, kind: str, margin: float) -> None:
    assert margin_from_mu(mu, kind) == pytest.approx(margin, abs=1e-3)


def test_margin_errors_name_the_options() -> None:
    with pytest.raises(RetrieverError, match=r"Unknown margin function 'radians'. "
                                             r"Available options: angle, distance"):
        margin_from_mu(0.5, "radians")
    with pytest.raises(RetrieverError, match=r"mu must be a number from 0 to 2 .* got 2.5"):
        margin_from_mu(2.5)
    with pytest.raises(RetrieverError, match="PairExample.mu|mu must be"):
        PairExample("q", "d", True, -0.1)


@pytest.mark.parametrize(("mu", "positive", "cos", "expected"), [
    (0.0, True, 0.70, 0.0360),   # complete positive
    (0.6, True, 0.70, 0.0),      # noisy positive inside its margin
    (0.6, True, 0.40, 0.0141),   # noisy positive outside its margin
    (0.8, False, 0.50, 0.0146),  # negative too close
    (0.8, False, 0.20, 0.0),     # negative far enough
    (1.2, False, 0.00, 0.0382),  # PTM random negative
])
def test_worked_example_of_training_md(mu: float, positive: bool, cos: float,
                                       expected: float) -> None:
    assert pair_loss(cos, positive, margin_from_mu(mu)) == pytest.approx(expected, abs=1e-3)


def test_batched_loss_is_the_mean_and_distance_margins_differ() -> None:
    distances = torch.tensor([0.30, 0.60, 0.50, 1.00])
    y = torch.tensor([1.0, 1.0, 0.0, 0.0])
    m = torch.tensor([margin_from_mu(mu) for mu in (0.0, 0.6, 0.8, 1.2)])
    loss = multi_margin_loss(distances, y, m, 0.8)
    assert float(loss) == pytest.approx((0.0360 + 0.0141 + 0.0146 + 0.0382) / 4, abs=1e-3)
    # distance margins: mu 0.6 -> m 0.6, so D 0.60 sits on the boundary and D 0.70 violates by 0.1
    assert pair_loss(0.40, True, margin_from_mu(0.6, "distance")) == pytest.approx(0.0)
    assert pair_loss(0.30, True, margin_from_mu(0.6, "distance")) == pytest.approx(0.004)


def test_loss_module_matches_pure_function_and_trains_the_encoder(tiny_model_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_path), device="cpu")
    model.eval()  # no dropout: the two forward passes below must agree
    loss_fn = MultiMarginLoss(model)
    pairs = PAIRS[:4]
    features = [model.tokenize([p.query for p in pairs]),
                model.tokenize([p.document for p in pairs])]
    labels = torch.tensor([[float(p.positive), margin_from_mu(p.mu)] for p in pairs])  # (4, 2)
    loss = loss_fn(features, labels)
    with torch.no_grad():
        q, d = (model(dict(f))["sentence_embedding"] for f in features)
    expected = multi_margin_loss(1 - F.cosine_similarity(q, d), labels[:, 0], labels[:, 1], 0.8)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert loss.item() > 0
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    assert loss_fn.get_config_dict() == {"weight": 0.8, "distance": "cosine"}
    with pytest.raises(RetrieverError, match=r"labels of shape \(4, 2\) holding \[y, m\]"):
        loss_fn(features, labels[:, 0])


# --- config -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "match"), [
    ("epochs", 0, r"TrainConfig.epochs must be an integer >= 1, got 0"),
    ("batch_size", 2.5, r"TrainConfig.batch_size must be an integer >= 1, got 2.5"),
    ("learning_rate", -1e-5, r"TrainConfig.learning_rate must be a number > 0"),
    ("warmup_ratio", 1.0, r"TrainConfig.warmup_ratio must be a share of all steps in \[0, 1\)"),
    ("max_grad_norm", float("nan"), r"TrainConfig.max_grad_norm must be a number >= 0"),
    ("seed", True, r"TrainConfig.seed must be an integer >= 0, got True"),
    ("precision", "fp16", r"Unknown TrainConfig.precision 'fp16'. Available options: auto, bf16"),
    ("margin_function", "cosine", r"Available options: angle, distance"),
])
def test_config_validation(field: str, value: object, match: str) -> None:
    with pytest.raises(RetrieverError, match=match):
        TrainConfig(**{field: value})


def test_config_round_trip_and_defaults() -> None:
    config = TrainConfig()
    assert (config.warmup_ratio, config.learning_rate, config.loss_weight) == (0.1, 2e-5, 0.8)
    assert TrainConfig.from_dict(json.loads(json.dumps(CONFIG.to_dict()))) == CONFIG
    toml = "\n".join(f"{key} = {json.dumps(value)}" for key, value in CONFIG.to_dict().items())
    assert TrainConfig.from_dict(tomllib.loads(toml)) == CONFIG
    assert TrainConfig(margin_function=MarginFunction.DISTANCE).to_dict()["margin_function"] == \
        "distance"
    with pytest.raises(RetrieverError, match=r"Unknown training option 'lr'. Available options:"):
        TrainConfig.from_dict({"lr": 1e-3})


def test_resolve_precision() -> None:
    assert resolve_precision("fp32", "cpu") is False
    assert resolve_precision("auto", "cpu") is False
    assert resolve_precision("bf16", "cpu") is True
    with pytest.raises(RetrieverError, match="Available options: auto, bf16, fp32"):
        resolve_precision("half", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RetrieverError, match="torch sees no CUDA GPU"):
            resolve_precision("bf16", "cuda")


@pytest.mark.parametrize(("examples", "match"), [
    ([], "no training pairs: examples is empty"),
    (PAIRS[3:5], "all 2 training pairs are negatives"),
])
def test_unusable_examples(tiny_model_path: Path, tmp_path: Path, examples: list,
                           match: str) -> None:
    with pytest.raises(RetrieverError, match=match):
        train_pairs(tiny_model_path, examples, tmp_path, CONFIG, progress=False)


def test_importing_the_package_loads_no_torch() -> None:
    code = "import sys, retrievers.training; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_floor_rule_no_kb_imports() -> None:
    folder = Path(__file__).parents[1] / "retrievers" / "training"
    for module in folder.glob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] in ("curation", "kb_sources")], module


# --- training ---------------------------------------------------------------------------------

def test_run_schedule_progress_and_saved_model(reference) -> None:
    from sentence_transformers import SentenceTransformer

    result, calls = reference
    assert (result.epochs_run, result.steps, result.best_epoch) == (2, 6, 2)
    assert (result.precision, result.device, result.epoch_scores) == ("fp32", "cpu", ())
    assert calls == [(i, 6) for i in range(1, 7)]
    # explicit warm-up: ceil(0.1 * 6) = 1 step from 0, then linear decay to 0 at step 6
    lrs = [point.learning_rate for point in result.curve]
    assert lrs == pytest.approx([0.0, 1e-3, 8e-4, 6e-4, 4e-4, 2e-4])
    assert [point.step for point in result.curve] == [1, 2, 3, 4, 5, 6]
    assert result.examples_per_second > 0
    model_dir = result.model_dir
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "modules.json").is_file()
    pickled = [p.name for p in model_dir.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl")]
    assert pickled == []
    assert same_weights(model_dir, result.best_checkpoint)
    checkpoints = sorted(result.best_checkpoint.parent.iterdir())
    assert [c.name for c in checkpoints] == ["checkpoint-3", "checkpoint-6"]
    assert not (checkpoints[0] / "optimizer.pt").exists()  # resume state kept only in the newest
    assert (checkpoints[1] / "optimizer.pt").is_file()
    assert not list(result.best_checkpoint.parent.rglob("pytorch_model.bin"))
    model = SentenceTransformer(str(model_dir), device="cpu")
    assert model.max_seq_length == 32
    assert model.encode(["BRAF V600E"]).shape == (1, 32)


def test_training_lowers_the_loss(reference, tiny_model_path: Path) -> None:
    result, _ = reference
    before, after = set_loss(tiny_model_path, PAIRS), set_loss(result.model_dir, PAIRS)
    assert after < 0.8 * before


def test_same_seed_same_weights_other_seed_differs(reference, tiny_model_path: Path,
                                                   tmp_path: Path) -> None:
    result, _ = reference
    again = train_pairs(tiny_model_path, PAIRS, tmp_path / "same", CONFIG, progress=False)
    assert same_weights(again.model_dir, result.model_dir)
    assert [p.loss for p in again.curve] == [p.loss for p in result.curve]
    other = TrainConfig.from_dict({**CONFIG.to_dict(), "seed": 2})
    moved = train_pairs(tiny_model_path, PAIRS, tmp_path / "other", other, progress=False)
    assert not same_weights(moved.model_dir, result.model_dir)


def test_eval_fn_picks_the_best_epoch_without_changing_training(reference, tiny_model_path: Path,
                                                                 tmp_path: Path) -> None:
    result, _ = reference
    seen: list[tuple[str, int]] = []

    def dev_score(folder: Path, epoch: int) -> float:
        seen.append((folder.name, epoch))
        torch.rand(1000)  # consumes RNG: train_pairs must restore it
        return {1: 0.9, 2: 0.5}[epoch]

    scored = train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, progress=False,
                         eval_fn=dev_score)
    assert seen == [("checkpoint-3", 1), ("checkpoint-6", 2)]
    assert (scored.epoch_scores, scored.best_epoch) == ((0.9, 0.5), 1)
    assert scored.best_checkpoint.name == "checkpoint-3"
    assert same_weights(scored.model_dir, scored.best_checkpoint)
    assert not same_weights(scored.model_dir, result.model_dir)
    assert same_weights(tmp_path / "checkpoints" / "checkpoint-6", result.model_dir)


def test_resume_after_interruption_equals_uninterrupted(reference, tiny_model_path: Path,
                                                        tmp_path: Path) -> None:
    """A crash right after epoch 1's checkpoint (raised inside eval_fn), then resume=True.

    The schedule is that of the full 2-epoch run throughout (same config), unlike training 1
    epoch and then 2, whose learning-rate schedules differ.
    """
    result, _ = reference

    def crash(folder: Path, epoch: int) -> float:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, progress=False, eval_fn=crash)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["checkpoint-3"]
    with pytest.raises(RetrieverError, match="already holds checkpoints .* pass resume=True"):
        train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, progress=False)
    longer = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 3})
    with pytest.raises(RetrieverError, match=r"changed: epochs \(2 -> 3\)"):
        train_pairs(tiny_model_path, PAIRS, tmp_path, longer, resume=True, progress=False)
    calls: list[tuple[int, int]] = []
    resumed = train_pairs(tiny_model_path, PAIRS, tmp_path, CONFIG, resume=True,
                          progress=lambda done, total: calls.append((done, total)))
    assert calls == [(3, 6), (4, 6), (5, 6), (6, 6)]  # continued at step 3, not from scratch
    assert (resumed.epochs_run, resumed.steps) == (2, 6)
    assert same_weights(resumed.model_dir, result.model_dir)
    assert [p.loss for p in resumed.curve] == pytest.approx([p.loss for p in result.curve])


def test_measure_training_speed(tiny_model_path: Path) -> None:
    speed = measure_training_speed(tiny_model_path, PAIRS[:4], CONFIG, steps=2)
    assert speed > 0


# --- speed options: bf16 autocast on CPU, length-grouped batches ------------------------------

def test_bf16_autocast_trains_on_cpu(tiny_model_path: Path, tmp_path: Path) -> None:
    config = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 1, "precision": "bf16"})
    result = train_pairs(tiny_model_path, PAIRS, tmp_path, config, progress=False)
    assert (result.precision, result.steps) == ("bf16", 3)
    assert all(torch.isfinite(torch.tensor(p.loss)) for p in result.curve)
    assert all(w.dtype == torch.float32 for w in weights(result.model_dir).values())


def test_group_by_length_is_seeded_and_recorded(tiny_model_path: Path, tmp_path: Path) -> None:
    config = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 1, "group_by_length": True})
    first = train_pairs(tiny_model_path, PAIRS, tmp_path / "a", config, progress=False)
    again = train_pairs(tiny_model_path, PAIRS, tmp_path / "b", config, progress=False)
    assert first.group_by_length and first.steps == 3
    assert same_weights(first.model_dir, again.model_dir)
    saved = json.loads((tmp_path / "a" / "train_config.json").read_text())
    assert saved["group_by_length"] is True


def test_a_recipe_sampler_wins_over_length_grouping(tiny_model_path: Path, tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    from retrievers.training import TripletExample, train_triplets

    config = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 1, "group_by_length": True})
    triplets = [TripletExample(q, doc, NEGATIVES[i % 2]) for i, (q, doc) in
                enumerate(QUERIES.items())]
    with caplog.at_level("WARNING", logger="retrievers"):
        result = train_triplets(tiny_model_path, triplets, tmp_path, config, progress=False)
    assert not result.group_by_length
    assert "group_by_length ignored: this recipe draws its own batches" in caplog.text


def test_a_run_saved_before_the_option_resumes(tiny_model_path: Path, tmp_path: Path) -> None:
    config = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 1})
    train_pairs(tiny_model_path, PAIRS, tmp_path, config, progress=False)
    saved = json.loads((tmp_path / "train_config.json").read_text())
    del saved["group_by_length"]  # as written before the option existed
    (tmp_path / "train_config.json").write_text(json.dumps(saved))
    resumed = train_pairs(tiny_model_path, PAIRS, tmp_path, config, resume=True, progress=False)
    assert resumed.epochs_run == 1


def test_compare_training_speed_times_every_setting(tiny_model_path: Path) -> None:
    from retrievers.training.trainer import compare_training_speed

    results = compare_training_speed(tiny_model_path, PAIRS, CONFIG, steps=2)
    assert [(r.precision, r.group_by_length) for r in results] == [
        ("fp32", False), ("fp32", True), ("bf16", False), ("bf16", True)]
    assert all(r.examples_per_second > 0 for r in results)
