"""BiCA and BioHiCL rounds end to end on the tiny BERT: data -> engine -> registry -> dense use."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curation.cli.main import main
from curation.store.models import Models, verify_weights
from curation.training.recipes import recipe_options
from curation.training.rounds import run_round
from kb_sources.errors import CurationError
from tests.loop_fixtures import PAIRS, make_loop_workspace

SMALL = {"epochs": 1, "batch_size": 4, "max_seq_length": 32, "dev_depth": 2, "dev_random": 5}

#: A small MeSH tree: the loop workspace's diseases under neoplasms / genetic diseases.
TREE = [("Neoplasms", "C04"), ("Neoplasms by Site", "C04.588"),
        ("Skin Neoplasms", "C04.588.805"), ("Melanoma", "C04.557.465.151.697"),
        ("Neoplasms by Histologic Type", "C04.557"), ("Glioma", "C04.557.465.625.600"),
        ("Breast Neoplasms", "C04.588.180"), ("Lung Neoplasms", "C04.588.894.797.520"),
        ("Colonic Neoplasms", "C04.588.274.476.411.307"), ("Leukemia", "C04.557.337"),
        ("Genetic Diseases, Inborn", "C16.320"), ("Cystic Fibrosis", "C16.320.190"),
        ("Humans", "B01.050.150.900.649.313.988.400.112.400.400"),
        ("Diet", "G07.203.300"), ("Sleep", "G11.561.803")]
HEADINGS = {"melanoma": ["Melanoma", "Skin Neoplasms", "Humans"], "glioma": ["Glioma"],
            "breast cancer": ["Breast Neoplasms", "Humans"], "lung cancer": ["Lung Neoplasms"],
            "colon cancer": ["Colonic Neoplasms"], "leukemia": ["Leukemia"],
            "cystic fibrosis": ["Cystic Fibrosis", "Genetic Diseases, Inborn"]}


def _with_mesh(ws):
    make_loop_workspace(ws)
    with ws.transaction() as conn:
        conn.executemany("INSERT INTO mesh_tree(term, tree_number) VALUES (?, ?)", TREE)
        for i, (disease, _) in enumerate(PAIRS, 1):
            for doc in (100 + i, 200 + i):
                conn.execute("UPDATE documents SET mesh = ? WHERE doc_id = ?",
                             (json.dumps(HEADINGS.get(disease, [])), str(doc)))
        for i in range(1, 21):
            conn.execute("UPDATE documents SET mesh = ? WHERE doc_id = ?",
                         (json.dumps(["Diet", "Humans"] if i % 2 else ["Sleep"]), str(300 + i)))
    return ws


def test_bica_round_on_a_knn_graph_registers_a_usable_version(tmp_workspace, tiny_model_path):
    ws = make_loop_workspace(tmp_workspace)
    options = recipe_options("bica", {**SMALL, "base": str(tiny_model_path), "graph": "knn",
                                      "knn_k": 4})
    result = run_round(ws, "disease_gene", "bica", options, actor="root", progress=False)
    version = result.version
    assert version.id == "disease_gene-bica@1" and version.recipe == "bica"
    # the round ends with the test metrics of kbcurate evaluate (whole corpus)
    from curation.evaluation.runner import evaluate_workspace

    report = evaluate_workspace(ws, "disease_gene", ["dense"], split="test",
                                options={"dense": {"model": version.id}}, progress=False)
    assert result.test_queries == report.retrievers["dense"]["queries"] > 0
    assert version.metrics["test_ndcg@10"] == report.retrievers["dense"]["ndcg@10"]
    m = version.manifest
    assert m["recipe"] == "bica" and m["options"]["graph"] == "knn"
    assert m["examples"]["graph"]["kind"] == "knn"
    assert m["examples"]["triplets"] == m["examples"]["examples"] > 0
    assert m["examples"]["walked"] > 0 and m["examples"]["negatives"]["walk"] > 0
    assert m["train_config"]["learning_rate"] == 2e-5 and m["train_config"]["warmup_ratio"] == 0.1
    assert len(m["dev_scores"]) == 1 and 0 <= m["dev_scores"][0] <= 1
    verify_weights(Models(ws).get(version.id))
    assert Models(ws).options(version.id)["document_format"] == "{title} [SEP] {abstract}"
    assert not (ws.root / "cache" / "training").exists() or not list(
        (ws.root / "cache" / "training").iterdir())  # the run folder is gone once registered


def test_bica_citation_graph_without_edges_falls_back_and_counts(tmp_workspace,
                                                                  tiny_model_path):
    ws = make_loop_workspace(tmp_workspace)  # no citation edges at all
    options = recipe_options("bica", {**SMALL, "base": str(tiny_model_path), "dev_depth": 0})
    version = run_round(ws, "disease_gene", "bica", options, actor="root", progress=False).version
    data = version.manifest["examples"]
    assert data["queries_with_citation_edges"] == 0
    assert sum(data["fallbacks"].values()) == data["queries"] > 0
    assert data["negatives"]["walk"] == 0 and data["negatives"]["bm25"] > 0


def test_biohicl_round_merges_lora_and_changes_the_model(tmp_workspace, tiny_model_path):
    from sentence_transformers import SentenceTransformer

    ws = _with_mesh(tmp_workspace)
    options = recipe_options("biohicl", {**SMALL, "base": str(tiny_model_path),
                                         "batch_size": 8, "learning_rate": 1e-2})
    version = run_round(ws, "disease_gene", "biohicl", options, actor="root",
                        progress=False).version
    assert version.id == "disease_gene-biohicl@1"
    m = version.manifest
    assert m["examples"]["documents"] == 44  # 24 disease documents with headings + 20 cohorts
    assert 0 < m["lora"]["trainable_parameters"] < 10_000  # LoRA only
    assert m["lora"]["merged"] is True and m["lora"]["targets"] == ["query", "value"]
    assert not (version.model_dir / "adapter_config.json").exists()
    text = ["BRAF in melanoma"]
    before = SentenceTransformer(str(tiny_model_path), device="cpu").encode(text)
    after = SentenceTransformer(str(version.model_dir), device="cpu").encode(text)
    assert before.shape == after.shape and not np.allclose(before, after, atol=1e-5)


def test_biohicl_entity_mesh_with_names_derived_from_mentions(tmp_workspace, tiny_model_path):
    ws = _with_mesh(tmp_workspace)
    with ws.transaction() as conn:  # two cohort documents also mention melanoma (MeSH D008545)
        conn.executemany("INSERT INTO annotations(doc_id, start, end, text, type, ids) VALUES "
                         "(?, 0, 8, ?, 'Disease', ?)",
                         [("301", "melanoma", '["MESH:D008545"]'),
                          ("302", "Melanomas", '["D008545"]'),
                          ("303", "skin lesion", '["D012871"]')])  # spells no heading
    options = recipe_options("biohicl", {**SMALL, "base": str(tiny_model_path), "batch_size": 8,
                                         "entity_mesh": True, "mesh_descriptors": "annotations"})
    version = run_round(ws, "disease_gene", "biohicl", options, actor="root",
                        progress=False).version
    m = version.manifest["examples"]
    assert m["entity_mesh"] is True
    assert m["descriptor_names"] == {"source": "annotations", "descriptor_ids": 2,
                                     "descriptor_ids_named": 1, "descriptor_ids_unnamed": 1,
                                     "mentions_matched": 2}
    assert m["labels"]["entity_descriptor_assignments"] == 2
    assert m["labels"]["entity_ids_unmapped"] == 1
    assert m["documents"] == 44  # the annotated documents already had headings


def test_biohicl_without_mesh_is_a_clear_error(tmp_workspace, tiny_model_path):
    ws = make_loop_workspace(tmp_workspace)
    with pytest.raises(CurationError, match="MeSH"):
        run_round(ws, "disease_gene", "biohicl",
                     recipe_options("biohicl", {**SMALL, "base": str(tiny_model_path)}),
                     actor="root", progress=False)
    with pytest.raises(CurationError, match="entity_mesh needs mesh_descriptors"):
        recipe_options("biohicl", {"entity_mesh": True})
    assert Models(ws).versions() == []


def test_cli_train_recipe_biohicl_full_finetune(tmp_workspace, tiny_model_path, capsys):
    ws = _with_mesh(tmp_workspace)
    root = str(ws.root)
    ws.close()
    assert main(["train", "-w", root, "-q", "--schema", "disease_gene", "--recipe", "biohicl",
                 "--base", str(tiny_model_path), "--epochs", "1", "--batch-size", "8",
                 "--max-seq-length", "32", "--dev-depth", "0", "--full-finetune"]) == 0
    out = capsys.readouterr().out
    assert "registered disease_gene-biohicl@1: 44 training rows" in out
    assert main(["train", "-w", root, "-q", "--schema", "disease_gene", "--graph", "knn"]) != 0
    assert "Unknown edel training option(s) graph" in capsys.readouterr().err


def test_train_bench_reports_variants_and_gains(tmp_workspace, tiny_model_path, tmp_path):
    from curation.training.benchmarks.train_bench import train_bench
    from curation.training.recipes.edel import EdelOptions

    ws = _with_mesh(tmp_workspace)
    tiny = {**SMALL, "base": str(tiny_model_path)}
    edel = EdelOptions(**{**tiny, "negatives_per_class": 1})
    out = tmp_path / "bench.json"
    summary = train_bench(ws, ["disease_gene"], edel, zero_shot=True, progress=False, out=out,
                          variants=["bica-knn", "biohicl"], second_stage=True,
                          recipe_values={"bica": {**tiny, "knn_k": 4},
                                         "biohicl": {**tiny, "batch_size": 8}})
    task = summary["tasks"]["disease_gene"]
    names = set(task["report"]["retrievers"])
    for label in ("bica-knn", "biohicl", "edel>bica-knn", "edel>biohicl"):
        assert {f"dense ({label})", f"hybrid+rerank ({label})"} <= names
    assert {"bm25", "dense", "hybrid+rerank", "dense (zero-shot)"} <= names
    assert task["training"]["edel>bica-knn"]["version"] == "disease_gene-bica@2"
    assert Models(ws).get("disease_gene-bica@2").manifest["base_model"] == "disease_gene-edel@1"
    gains = task["targets"]["gain_over_zero_shot_pp"]
    zero = task["report"]["retrievers"]["dense (zero-shot)"]["ndcg@10"]
    bica = task["report"]["retrievers"]["dense (bica-knn)"]["ndcg@10"]
    assert gains["dense (bica-knn)"] == pytest.approx(round(100 * (bica - zero), 2))
    assert task["targets"]["best_edel"] in ("dense", "dense+rerank", "hybrid", "hybrid+rerank")
    assert json.loads(out.read_text())["tasks"]["disease_gene"]["targets"] == task["targets"]
