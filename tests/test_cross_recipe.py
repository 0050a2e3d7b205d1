"""The cross-encoder recipe (issue 45): the scorer, EDEL-graded rows, seeded and resumable
training, the round that measures by re-ranking and gates, activation and ``models import``.

Everything runs on tiny random BERTs (``tiny_cross_encoder``, ``tiny_model_path``): mechanics,
never quality."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from curation.access.users import Role, User
from curation.store.importer import import_items
from curation.store.models import Models
from curation.training.recipes import recipe_options
from kb_sources.errors import CurationError
from kb_sources.types import Entity, Relation
from retrievers.cross import CrossScorer, is_cross_encoder_folder
from retrievers.errors import RetrieverError
from retrievers.training.config import PairExample, TrainConfig
from tests.loop_fixtures import PAIRS, make_loop_workspace

DOCS = ["BRAF V600E mutation in melanoma responds to vemurafenib.", "Aspirin and statins.",
        "EGFR L858R in lung cancer treated with erlotinib and gefitinib " * 5, "Sleep."]
PAIRS_TRAIN = [
    PairExample("BRAF melanoma", "BRAF V600E mutation in melanoma.", True, 0.0, "pos:11"),
    PairExample("BRAF melanoma", "Clinical course of melanoma.", True, 0.6, "pos:10"),
    PairExample("BRAF melanoma", "Aspirin and statins.", False, 0.8, "neg:bm25"),
    PairExample("EGFR lung", "EGFR L858R lung cancer.", True, 0.0, "pos:11"),
    PairExample("EGFR lung", "Diet and metformin.", False, 1.0, "neg:random"),
    PairExample("KRAS pancreas", "KRAS G12C in pancreatic cancer.", True, 0.0, "pos:11"),
    PairExample("KRAS pancreas", "Placebo trial.", False, 0.8, "neg:bm25"),
    PairExample("AKT1 Ser473", "AKT1 is phosphorylated at Ser473.", True, 0.0, "pos:11"),
]
CONFIG = TrainConfig(epochs=2, batch_size=4, max_seq_length=32, learning_rate=1e-3,
                     warmup_ratio=0.0, seed=3, precision="fp32")
SMALL = {"epochs": 1, "batch_size": 4, "max_seq_length": 32, "dev_depth": 3,
         "learning_rate": 1e-3, "rerank_depth": 10}


def weights(folder: Path) -> dict[str, np.ndarray]:
    return load_file(str(folder / "model.safetensors"))


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(np.allclose(wa[k], wb[k], atol=1e-6) for k in wa)


# -- the scorer ------------------------------------------------------------------------------
def test_scorer_gives_one_logit_per_document_in_input_order(tiny_cross_encoder: Path) -> None:
    scorer = CrossScorer.load(tiny_cross_encoder, precision="fp32", max_length=64)
    scores = scorer.score("BRAF melanoma", DOCS)
    assert scores.shape == (4,) and scores.dtype == np.float32
    one_by_one = [scorer.score("BRAF melanoma", [d])[0] for d in DOCS]
    assert np.allclose(scores, one_by_one, atol=1e-5)  # length-sorted batches keep the order
    reversed_scores = scorer.score("BRAF melanoma", DOCS[::-1], batch_size=3)
    assert np.allclose(scores, reversed_scores[::-1], atol=1e-5)
    assert np.array_equal(scores, scorer.score("BRAF melanoma", DOCS))  # deterministic
    assert len(set(np.round(scores, 6))) > 1  # not a constant
    assert scorer.score("BRAF melanoma", []).shape == (0,)
    again = CrossScorer.load(tiny_cross_encoder, precision="fp32")
    assert scorer.fingerprint == again.fingerprint and len(scorer.fingerprint) == 16
    with pytest.raises(RetrieverError, match="query must be non-empty"):
        scorer.score("  ", DOCS)


def test_bf16_scores_stay_close_to_fp32(tiny_cross_encoder: Path) -> None:
    fp32 = CrossScorer.load(tiny_cross_encoder, precision="fp32").score("BRAF", DOCS)
    bf16 = CrossScorer.load(tiny_cross_encoder, device="cpu", precision="bf16")
    assert bf16.precision == "bf16"
    assert np.allclose(bf16.score("BRAF", DOCS), fp32, atol=0.05)


def test_scorer_refuses_pickle_only_and_non_cross_folders(tiny_cross_encoder: Path,
                                                          tiny_model_path: Path,
                                                          tmp_path: Path) -> None:
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_cross_encoder, pickled)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(RetrieverError, match=r"pickled.*no safetensors|no safetensors.*pickled"):
        CrossScorer.load(pickled)
    with pytest.raises(RetrieverError, match="save_pretrained.*safe_serialization=True"):
        CrossScorer.load(pickled)
    assert is_cross_encoder_folder(tiny_cross_encoder)
    assert not is_cross_encoder_folder(tiny_model_path)  # a bi-encoder
    with pytest.raises(RetrieverError, match="does not exist"):
        CrossScorer.load(tmp_path / "missing")


# -- training --------------------------------------------------------------------------------
def test_graded_rows_become_margins_and_targets() -> None:
    from retrievers.training.cross import cross_dataset, graded_target

    rows = cross_dataset(PAIRS_TRAIN, CONFIG, "margin")
    assert rows["label"][0] == [1.0, 0.0]  # complete positive: no margin
    assert rows["label"][1] == pytest.approx([1.0, 1 - math.cos(0.6 * math.pi / 2)])
    assert rows["label"][2] == pytest.approx([0.0, 1 - math.cos(0.8 * math.pi / 2)])
    assert graded_target(True, 0.0) == 1.0 and graded_target(False, 0.2) == 0.0
    assert graded_target(True, 0.6) == pytest.approx(0.588, abs=1e-3)
    assert cross_dataset(PAIRS_TRAIN, CONFIG, "bce")["label"][1] == pytest.approx(0.588, abs=1e-3)
    with pytest.raises(RetrieverError, match="all 1 training pairs are negatives"):
        cross_dataset(PAIRS_TRAIN[2:3], CONFIG, "margin")


def test_seeded_training_is_reproducible_and_learns(tiny_model_path: Path,
                                                    tmp_path: Path) -> None:
    from retrievers.training.cross import train_cross

    one = train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "a", CONFIG, progress=False)
    two = train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "b", CONFIG, progress=False)
    assert same_weights(one.model_dir, two.model_dir)
    other = TrainConfig.from_dict({**CONFIG.to_dict(), "seed": 4})
    three = train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "c", other, progress=False)
    assert not same_weights(one.model_dir, three.model_dir)
    assert (one.epochs_run, one.steps, one.precision) == (2, 4, "fp32")
    assert is_cross_encoder_folder(one.model_dir)
    assert not list(one.model_dir.glob("*.bin")) and not list(one.model_dir.glob("*.pt"))
    # longer, both losses lower the training loss; graded BCE separates a trained pair
    longer = TrainConfig.from_dict({**CONFIG.to_dict(), "epochs": 25, "learning_rate": 5e-3})
    for loss in ("margin", "bce"):
        learned = train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / loss, longer,
                              progress=False, loss=loss)
        first, last = learned.curve[0].loss, learned.curve[-1].loss
        assert last < 0.7 * first, (loss, first, last)
    scorer = CrossScorer.load(learned.model_dir, precision="fp32")
    pos, neg = scorer.score("BRAF melanoma", ["BRAF V600E mutation in melanoma.",
                                              "Aspirin and statins."])
    assert pos > neg + 1.0


def test_resume_after_interruption_equals_uninterrupted(tiny_model_path: Path,
                                                        tmp_path: Path) -> None:
    from retrievers.training.cross import train_cross

    full = train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "full", CONFIG, progress=False)

    def crash(folder: Path, epoch: int) -> float:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "run", CONFIG, progress=False,
                    eval_fn=crash)
    with pytest.raises(RetrieverError, match="pass resume=True"):
        train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "run", CONFIG, progress=False)
    calls: list[tuple[int, int]] = []
    resumed = train_cross(tiny_model_path, PAIRS_TRAIN, tmp_path / "run", CONFIG, resume=True,
                          progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (2, 4) and calls[-1] == (4, 4)  # continued after epoch 1
    assert same_weights(resumed.model_dir, full.model_dir)


# -- the recipe and the round ----------------------------------------------------------------
def _partial_workspace(ws):
    """The loop KB plus relations citing an abstract that names the disease but not the gene."""
    make_loop_workspace(ws)
    extra = [Relation("disease_gene", "handmade", f"p{i}",
                      {"disease": (Entity(d, "disease"),), "gene": (Entity(g, "gene"),)},
                      (str(200 + i),))
             for i, (d, g) in enumerate(PAIRS, 1)]
    import_items(ws, extra, reader="test", path="partial", progress=False)
    return ws


def test_build_data_grades_cited_abstracts_and_draws_uncited_negatives(tmp_workspace) -> None:
    from curation.evaluation.harness import build_task
    from curation.matching.matcher import EntityMatcher
    from curation.training.recipes import RoundInput, get_recipe

    ws = _partial_workspace(tmp_workspace)
    task = build_task(ws, "disease_gene")
    options = recipe_options("cross", {"negatives_per_class": 2})
    data = get_recipe("cross").build_data(RoundInput(ws, "disease_gene", task, EntityMatcher()),
                                          options)
    rows = data.rows.examples
    train = {q.qid: q for q in task.split("train")}
    assert rows and {e.qid for e in rows} <= set(train)  # no dev or test query trains
    positives = [e for e in rows if e.positive]
    for e in positives:  # every positive is an abstract the KB cites for that query
        assert e.doc_id in train[e.qid].gold
    complete = {e.doc_id for e in positives if e.mu == 0.0}
    partial = [e for e in positives if e.mu > 0]
    assert complete and all(d.startswith("1") for d in complete)  # gene + disease named
    assert partial and all(e.doc_id.startswith("2") and e.cls == "pos:10" for e in partial)
    assert {e.mu for e in partial} == {0.6}  # binary table: query entity, no answer
    negatives = [e for e in rows if not e.positive]
    assert negatives and all(e.doc_id not in train[e.qid].gold for e in negatives)
    assert data.extra_manifest["kind"] == "cross" and data.manifest["recipe"] == "cross"
    assert data.document_format == "{title} [SEP] {abstract}"


def test_first_stage_negatives_are_bm25_hits_the_kb_does_not_cite(tmp_workspace) -> None:
    from curation.evaluation.harness import build_task
    from curation.search.indexing import get_index
    from curation.training.recipes.edel.examples import build_examples

    ws = _partial_workspace(tmp_workspace)
    task = build_task(ws, "disease_gene")
    train = {q.qid: q for q in task.split("train")}
    bm25 = get_index(ws, "bm25", progress=False)
    config = recipe_options("cross", {"first_stage_negatives": 2, "bm25_depth": 10}
                            ).example_config()
    rows = build_examples(ws, "disease_gene", config, task=task, progress=False).examples
    first = [e for e in rows if e.cls == "neg:first-stage"]
    assert first and all(not e.positive and e.mu == 0.8 for e in first)
    for qid in {e.qid for e in first}:
        mine = [e.doc_id for e in first if e.qid == qid]
        ranked = [h.doc_id for h in bm25.search(train[qid].text, 10)]
        assert len(mine) <= 2 and set(mine) <= set(ranked)  # BM25's top 10, at most 2
        assert not set(mine) & set(train[qid].gold)  # never a cited abstract
    # EDEL's own rows (the option at 0) have none, and the draw is seeded
    edel = build_examples(ws, "disease_gene", recipe_options(
        "cross", {"first_stage_negatives": 0, "bm25_depth": 10}).example_config(), task=task,
        progress=False).examples
    assert not [e for e in edel if e.cls == "neg:first-stage"]
    assert rows == build_examples(ws, "disease_gene", config, task=task, progress=False).examples


def test_round_registers_gates_against_bm25_then_the_active_cross(tmp_workspace,
                                                                  tiny_model_path) -> None:
    from curation.training.cross_versions import activate_cross, active_cross
    from curation.training.rounds import GateSettings, run_round

    ws = make_loop_workspace(tmp_workspace)
    options = recipe_options("cross", {**SMALL, "base": str(tiny_model_path)})
    # decide, never switch here: a switch hands the scoring job to a worker process
    gate = GateSettings(small_test_reason="tiny test workspace", promote=False)
    first = run_round(ws, "disease_gene", "cross", options, actor="root", progress=False,
                      gate=gate)
    v = first.version
    assert v.id == "disease_gene-cross@1" and v.manifest["kind"] == "cross"
    assert v.manifest["rerank_depth"] == 10 and len(v.manifest["dev_scores"]) == 1
    assert 0 <= v.metrics["test_ndcg@10"] <= 1 and first.test_queries > 0
    assert v.metrics["gate"]["against"] == "bm25@10"  # the first is compared with BM25 alone
    assert first.decision is not None and first.previous is None and not first.promoted
    assert first.decision.active  # BM25's metrics on the same test queries
    assert active_cross(ws, "disease_gene") is None
    activate_cross(ws, v.id, user=User("root", Role.ADMIN), reason="test", start_scoring=False)
    assert active_cross(ws, "disease_gene").id == v.id
    assert Models(ws).active("disease_gene") is None  # the dense slot is never touched
    from curation.jobs.queue import list_jobs

    assert [j.params.get("version") for j in list_jobs(ws, "cross_scores")] == [v.id]
    second = run_round(ws, "disease_gene", "cross", recipe_options(
        "cross", {**SMALL, "base": str(tiny_model_path), "seed": 7}), actor="root",
        progress=False, gate=gate)
    assert second.version.id == "disease_gene-cross@2" and second.previous == v.id
    assert "against" not in second.version.metrics["gate"]  # compared with the active cross
    assert second.decision.active  # the active version's metrics were measured


def test_activating_a_dense_version_is_refused_as_cross(tmp_workspace, tiny_model_path) -> None:
    from curation.training.cross_versions import activate_cross

    ws = make_loop_workspace(tmp_workspace)
    dense = Models(ws).register(schema="disease_gene", recipe="edel", base_model="tiny",
                                model_dir=tiny_model_path, manifest={}, created_by="root")
    with pytest.raises(CurationError, match="not a cross-encoder version"):
        activate_cross(ws, dense.id, user=User("root", Role.ADMIN))
    # and a cross version never takes the dense slot, whoever asks
    cross = Models(ws).register(schema="disease_gene", recipe="cross", base_model="tiny",
                                model_dir=tiny_model_path, manifest={"kind": "cross"},
                                created_by="root")
    with pytest.raises(CurationError, match="is a cross-encoder version: it re-ranks; activate"):
        Models(ws).activate(cross.id, User("root", Role.ADMIN))
    assert Models(ws).active("disease_gene") is None


def test_models_import_of_a_cross_folder_registers_a_cross_version(tmp_workspace,
                                                                   tiny_cross_encoder,
                                                                   capsys, tmp_path) -> None:
    from curation.cli.main import main
    from curation.training.cross_versions import active_cross

    ws = make_loop_workspace(tmp_workspace)
    ws.close()
    root = str(ws.root)
    assert main(["models", "import", str(tiny_cross_encoder), "--schema", "disease_gene",
                 "-w", root, "-q"]) == 0
    assert "as disease_gene-cross_imported@1" in capsys.readouterr().out
    from curation.store.workspace import Workspace

    with Workspace.open(root) as ws2:
        v = Models(ws2).get("disease_gene-cross_imported@1")
        assert v.manifest["kind"] == "cross" and "test_ndcg@10" in v.metrics
        assert is_cross_encoder_folder(v.model_dir)
    from curation.training.activation import NO_INDEX, IndexBuild

    assert "no index to build" in IndexBuild(v.id, 0, 0, NO_INDEX, 0.0, 0.0, True).summary()
    assert active_cross(ws2 := Workspace.open(root), "disease_gene") is None
    ws2.close()
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_cross_encoder, pickled)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    assert main(["models", "import", str(pickled), "--schema", "disease_gene", "--kind",
                 "cross", "-w", root, "-q"]) != 0
    assert "pickle" in capsys.readouterr().err
