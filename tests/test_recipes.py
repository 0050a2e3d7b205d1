"""The recipe layer: options per recipe, the train job's recipe, multiple-negatives training
(BiCA's loss) on the tiny BERT, and ``kbcurate models import`` of published-checkpoint folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file

from curation.access.users import Role, User
from curation.cli.main import build_parser, main
from curation.cli.train_commands import train_values
from curation.store.models import Models, verify_weights
from curation.training.recipes import RECIPES, recipe_options
from kb_sources.errors import CurationError
from retrievers.errors import RetrieverError
from retrievers.training import TrainConfig, TripletExample, train_triplets
from tests.loop_fixtures import make_loop_workspace

CONFIG = TrainConfig(epochs=1, batch_size=4, max_seq_length=32, learning_rate=1e-3,
                     warmup_ratio=0.0, seed=3)
TRIPLETS = [
    TripletExample("BRAF melanoma", "BRAF V600E mutation in melanoma.", "Aspirin and statins.",
                   "walk"),
    TripletExample("BRAF melanoma", "Dabrafenib for BRAF melanoma.", "Sleep in a cohort.", "walk"),
    TripletExample("EGFR lung", "EGFR L858R lung cancer.", "Diet and metformin.", "random"),
    TripletExample("EGFR lung", "Erlotinib in EGFR lung cancer.", "TNF-alpha in colitis.",
                   "walk"),
    TripletExample("KRAS pancreas", "KRAS G12C in pancreatic cancer.", "Placebo trial.", "bm25"),
    TripletExample("PIK3CA breast", "PIK3CA H1047R in breast cancer.", "Apoptosis in cells.",
                   "walk"),
    TripletExample("AKT1 Ser473", "AKT1 is phosphorylated at Ser473.", "Gene expression.",
                   "walk"),
    TripletExample("ALK lung", "EML4-ALK fusion and crizotinib.", "Survival improved.", "walk"),
]


def test_every_recipe_has_validated_options() -> None:
    assert RECIPES == ("edel", "bica", "biohicl", "cross")
    assert recipe_options("bica").graph == "citations"  # the paper's graph is the default
    assert recipe_options("bica", {"graph": "knn", "knn_k": 7}).knn_k == 7
    hicl = recipe_options("biohicl")
    assert (hicl.beta, hicl.lam, hicl.lora_rank, hicl.batch_size) == (0.3, 0.1, 8, 32)
    with pytest.raises(CurationError, match="Unknown edel training option.*graph"):
        recipe_options("edel", {"graph": "knn"})
    with pytest.raises(CurationError, match="Unknown training recipe 'dpr'.*edel, bica"):
        recipe_options("dpr")
    with pytest.raises(CurationError, match="beta must be in"):
        recipe_options("biohicl", {"beta": 1.5})
    with pytest.raises(CurationError, match="variant must be one of printed, tempered"):
        recipe_options("biohicl", {"variant": "inside"})
    with pytest.raises(CurationError, match="scale must be a number > 0"):
        recipe_options("bica", {"scale": 0})
    with pytest.raises(CurationError, match="epochs"):
        recipe_options("bica", {"epochs": 0})


def test_cli_passes_only_given_options_so_each_recipe_keeps_its_defaults() -> None:
    parser = build_parser()
    args = parser.parse_args(["train", "--schema", "disease_gene", "--recipe", "biohicl",
                              "--lora-rank", "4", "--entity-mesh", "-q"])
    assert train_values(args) == {"lora_rank": 4, "entity_mesh": True}
    assert train_values(parser.parse_args(["train", "--schema", "disease_gene"])) == {}
    args = parser.parse_args(["train", "--schema", "disease_gene", "--graph", "knn"])
    with pytest.raises(CurationError, match="Unknown edel training option.*graph"):
        recipe_options(args.recipe, train_values(args))


def test_train_job_validates_the_recipe_before_queueing(tmp_workspace) -> None:
    from curation.jobs.queue import list_jobs
    from curation.training.jobs import start_training

    ws = make_loop_workspace(tmp_workspace)
    admin = User("root", Role.ADMIN)
    with pytest.raises(CurationError, match="Unknown bica training option.*negatives_per_class"):
        start_training(ws, admin, "disease_gene", {"negatives_per_class": 2}, recipe="bica")
    with pytest.raises(CurationError, match="Unknown training recipe"):
        start_training(ws, admin, "disease_gene", {}, recipe="colbert")
    assert list_jobs(ws, "train") == []
    job = start_training(ws, admin, "disease_gene", {"graph": "knn"}, recipe="bica")
    assert job.params["recipe"] == "bica"
    assert job.params["options"]["graph"] == "knn"
    from curation.access.users import PermissionDenied
    with pytest.raises(PermissionDenied):
        start_training(ws, User("cur", Role.CURATOR), "disease_gene", {}, recipe="biohicl")


def test_train_triplets_learns_and_never_batches_a_query_twice(tiny_model_path, tmp_path,
                                                                monkeypatch) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler

    batches: list[list[int]] = []
    original = NoDuplicatesBatchSampler.__iter__

    def spy(self):  # record the batches the trainer draws
        for batch in original(self):
            batches.append(list(batch))
            yield batch

    monkeypatch.setattr(NoDuplicatesBatchSampler, "__iter__", spy)
    result = train_triplets(str(tiny_model_path), TRIPLETS, tmp_path / "run", CONFIG,
                            progress=False)
    assert result.steps >= 2 and result.epochs_run == 1
    assert batches, "the NO_DUPLICATES sampler was not used"
    for batch in batches:
        queries = [TRIPLETS[i].query for i in batch]
        assert len(queries) == len(set(queries)), f"query repeated in a batch: {queries}"
    assert sorted(i for b in batches for i in b) == list(range(len(TRIPLETS)))
    before = SentenceTransformer(str(tiny_model_path), device="cpu")
    after = SentenceTransformer(str(result.model_dir), device="cpu")
    a = before.encode(["BRAF melanoma"], normalize_embeddings=True)
    b = after.encode(["BRAF melanoma"], normalize_embeddings=True)
    assert not np.allclose(a, b, atol=1e-4)  # the weights moved
    assert result.curve[0].learning_rate == pytest.approx(1e-3)  # explicit lr, no warm-up
    assert all(np.isfinite(p.loss) for p in result.curve)
    assert not list(result.model_dir.glob("*.bin")) and (result.model_dir / "model.safetensors"
                                                         ).is_file()


def test_triplets_are_checked() -> None:
    with pytest.raises(RetrieverError, match="negative is the positive"):
        TripletExample("q", "same text", "same text")
    with pytest.raises(RetrieverError, match="no training triplets"):
        train_triplets("unused", [], "/nonexistent")
    with pytest.raises(RetrieverError, match="scale must be a number > 0"):
        train_triplets("unused", TRIPLETS, "/nonexistent", scale=-1)


# -- kbcurate models import -------------------------------------------------------------------
def _plain_transformers_folder(tiny_model_path: Path, dest: Path) -> Path:
    """The tiny model's BERT as a plain transformers folder (no modules.json, no pooling)."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_model_path), device="cpu")
    st[0].auto_model.save_pretrained(dest, safe_serialization=True)
    st.tokenizer.save_pretrained(dest)
    return dest


def test_import_sentence_transformers_folder_round_trip(tmp_workspace, tiny_model_path) -> None:
    from sentence_transformers import SentenceTransformer

    from curation.training.imports import import_checkpoint

    ws = make_loop_workspace(tmp_workspace)
    v = import_checkpoint(ws, str(tiny_model_path), schema="disease_gene", name="tiny",
                          max_seq_length=64, actor="root")
    assert v.id == "disease_gene-tiny@1" and v.status.value == "candidate"
    assert v.manifest["imported"] is True and v.manifest["imported_from"] == str(
        tiny_model_path)
    verify_weights(Models(ws).get(v.id))
    text = ["BRAF V600E in melanoma"]
    original = SentenceTransformer(str(tiny_model_path), device="cpu").encode(text)
    imported = SentenceTransformer(str(v.model_dir), device="cpu").encode(text)
    np.testing.assert_allclose(original, imported, atol=1e-6)
    assert Models(ws).options(v.id)["max_seq_length"] == 64



def test_an_imported_version_ends_with_the_test_metrics_a_trained_one_gets(
        tmp_workspace, tiny_model_path) -> None:
    """Issue 26 item 3: train, retrain and import all end with the same evaluation, so an
    imported version is listed with test metrics (the loop KB has 2 test queries: warned)."""
    from curation.evaluation.runner import evaluate_workspace
    from curation.training.imports import import_checkpoint

    ws = make_loop_workspace(tmp_workspace)
    v = import_checkpoint(ws, str(tiny_model_path), schema="disease_gene", name="tiny",
                          max_seq_length=64, actor="root")
    report = evaluate_workspace(ws, "disease_gene", ["dense"], split="test",
                                options={"dense": {"model": v.id}}, progress=False)
    assert v.metrics["test_ndcg@10"] == pytest.approx(report.metric("dense", "ndcg@10"))
    assert v.metrics["test_entity_recall@10"] == pytest.approx(
        report.metric("dense", "entity_recall@10"))
    assert any("only 2 test queries" in w for w in v.metrics["warnings"])
    assert Models(ws).get(v.id).metrics == v.metrics  # recorded in the registry
    pooled = import_checkpoint(ws, str(tiny_model_path), schema="disease_gene", name="tiny",
                               max_seq_length=64, actor="root", evaluation="pool")
    assert 0.0 <= pooled.metrics["testpool_ndcg@10"] <= 1.0 and "testpool_spec" in pooled.metrics
    bare = import_checkpoint(ws, str(tiny_model_path), schema="disease_gene", name="tiny",
                             max_seq_length=64, actor="root", evaluation=None)
    assert "test_ndcg@10" not in bare.metrics and "testpool_ndcg@10" not in bare.metrics


def test_import_plain_transformers_folder_gets_the_pooling(tmp_workspace, tiny_model_path,
                                                           tmp_path) -> None:
    from curation.training.imports import import_checkpoint

    ws = make_loop_workspace(tmp_workspace)
    plain = _plain_transformers_folder(tiny_model_path, tmp_path / "plain-bert")
    assert not (plain / "modules.json").exists()
    v = import_checkpoint(ws, str(plain), schema="disease_gene", name="plain", pooling="cls",
                          actor="root")
    pooling = json.loads((v.model_dir / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode"] == "cls"
    assert v.manifest["pooling"] == "cls"
    assert set(load_file(v.model_dir / "model.safetensors"))  # real weights, safetensors


def test_import_query_and_article_encoder_pair(tmp_workspace, tiny_model_path, tmp_path) -> None:
    """MedCPT-style: the query encoder sits in the version's query/ folder and is used."""
    from curation.training.imports import import_checkpoint

    ws = make_loop_workspace(tmp_workspace)
    plain = _plain_transformers_folder(tiny_model_path, tmp_path / "MedCPT-Article-Encoder")
    v = import_checkpoint(ws, str(plain), schema="disease_gene", name="medcpt",
                          query_model=str(tiny_model_path), actor="root")
    options = Models(ws).options(v.id)
    assert options["query_model"] == str(v.model_dir / "query")
    assert (v.model_dir / "query" / "model.safetensors").is_file()
    assert options["pooling"] == "cls"  # MedCPT's profile: [CLS]
    assert options["query_max_seq_length"] == 64
    verify_weights(Models(ws).get(v.id))  # the query encoder's files are checksummed too
    (v.model_dir / "query" / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(CurationError, match="query/model.safetensors of disease_gene-medcpt@1"):
        verify_weights(Models(ws).get(v.id))


def test_import_errors_name_the_source_and_the_offline_route(tmp_workspace, tmp_path) -> None:
    from curation.training.imports import import_checkpoint

    ws = make_loop_workspace(tmp_workspace)
    with pytest.raises(CurationError, match="no such folder"):
        import_checkpoint(ws, str(tmp_path / "missing"), schema="disease_gene", actor="root")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CurationError, match=r"Cannot import .*empty.*copy FOLDER here"):
        import_checkpoint(ws, str(empty), schema="disease_gene", actor="root")
    assert not list((ws.root / "models").glob("*@*"))


def test_cli_models_import(tmp_workspace, tiny_model_path, capsys) -> None:
    ws = make_loop_workspace(tmp_workspace)
    root = str(ws.root)
    ws.close()
    assert main(["models", "import", str(tiny_model_path), "--schema", "disease_gene",
                 "--name", "bica_small", "-w", root, "-q"]) == 0
    assert "as disease_gene-bica_small@1" in capsys.readouterr().out
    assert main(["models", "import", "-w", root, "-q"]) != 0
    assert "needs a SOURCE" in capsys.readouterr().err
