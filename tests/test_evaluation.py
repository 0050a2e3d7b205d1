"""Evaluation harness: splits by query entity, trec metrics, EntityRecall, rerank, reports."""

from __future__ import annotations

import json

import pytest

from curation.evaluation.harness import (
    EvalQuery,
    assign_splits,
    build_task,
    entity_recall,
    format_table,
    trec_metrics,
)
from curation.evaluation.runner import evaluate_workspace
from curation.matching.matcher import EntityMatcher
from curation.search.rerank import EntityReranker, RerankConfig
from curation.store.importer import import_file
from kb_sources.errors import CurationError
from kb_sources.types import Entity
from retrievers.base import Hit


@pytest.fixture
def small_ws(tmp_workspace, fixtures_dir):
    import_file(tmp_workspace, "kb", "pubtator", fixtures_dir / "pubtator_sample.txt",
                progress=False)
    import_file(tmp_workspace, "docs", "jsonl", fixtures_dir / "docs_sample.jsonl",
                progress=False)
    return tmp_workspace


def test_assign_splits_seeded_and_by_fraction():
    groups = [f"gene:{i}" for i in range(100)]
    a, b = assign_splits(groups, seed=7), assign_splits(reversed(groups), seed=7)
    assert a == b
    counts = {s: sum(v == s for v in a.values()) for s in ("train", "dev", "test")}
    assert counts == {"train": 60, "dev": 20, "test": 20}
    assert assign_splits(groups, seed=8) != a
    with pytest.raises(CurationError, match="sum to 1"):
        assign_splits(groups, fractions=(0.5, 0.2, 0.2))


BRAF = Entity("BRAF", "gene")


def _query(qid="q", gold=("d1", "d2"), answers=(), anchor=BRAF):
    return EvalQuery(qid, "text", "g", "test", {"gene": (anchor,)}, tuple(answers), gold)


def test_trec_metrics_hand_computed():
    run = {"q": [Hit("d1", 3, 1), Hit("d3", 2, 2), Hit("d2", 1, 3)]}
    values = trec_metrics([_query()], run)["q"]
    # DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.6309
    assert values["ndcg@10"] == pytest.approx(1.5 / (1 + 1 / 1.584962500721156))
    assert values["map@10"] == pytest.approx((1 + 2 / 3) / 2)
    assert values["recall@100"] == 1.0
    assert trec_metrics([_query()], {"q": []})["q"]["ndcg@10"] == 0.0


def test_entity_recall_needs_answer_and_anchor_in_same_document():
    texts = {"a": "BRAF V600E responds to vemurafenib.", "b": "Dabrafenib was approved.",
             "c": "BRAF and dabrafenib."}
    q = _query(answers=[Entity("vemurafenib", "drug"), Entity("dabrafenib", "drug"),
                        Entity("trametinib", "drug")])
    matcher = EntityMatcher()
    hits = [Hit("a", 3, 1), Hit("b", 2, 2), Hit("c", 1, 3)]
    assert entity_recall(q, hits, 2, texts.__getitem__, matcher) == pytest.approx(1 / 3)
    assert entity_recall(q, hits, 3, texts.__getitem__, matcher) == pytest.approx(2 / 3)
    assert entity_recall(_query(), hits, 3, texts.__getitem__, matcher) is None


def test_rerank_promotes_documents_mentioning_query_entities():
    texts = {"x": "Kinase inhibitors in melanoma.", "y": "BRAF V600E and vemurafenib."}

    class Fixed:
        name = "fixed"

        def search(self, query, k):
            return [Hit("x", 2.0, 1), Hit("y", 1.9, 2)]

    reranker = EntityReranker(Fixed(), texts.__getitem__, config=RerankConfig(weight=0.5))
    hits = reranker.search("q", [Entity("BRAF", "gene"), Entity("V600E", "variant")], k=2)
    assert [h.doc_id for h in hits] == ["y", "x"] and hits[0].retriever == "fixed+rerank"
    no_weight = EntityReranker(Fixed(), texts.__getitem__, config=RerankConfig(weight=0.0))
    assert [h.doc_id for h in no_weight.search("q", [Entity("BRAF", "gene")], 2)] == ["x", "y"]


def test_build_task_groups_queries_by_entity(small_ws):
    task = build_task(small_ws, "disease_gene")
    assert task.queries and all(q.gold for q in task.queries)
    by_group = {}
    for q in task.queries:
        by_group.setdefault(q.group, set()).add(q.split)
    assert all(len(splits) == 1 for splits in by_group.values())
    assert {q.text for q in task.queries} >= {"Genes associated with melanoma?"}
    with pytest.raises(CurationError, match="Unknown split 'val'"):
        task.split("val")


def test_evaluate_bm25_and_dense_report(small_ws, tiny_model_path):
    report = evaluate_workspace(small_ws, "disease_gene", ["bm25", "dense", "bm25+rerank"],
                                split="all", options={"dense": {"model": str(tiny_model_path)}},
                                progress=False)
    assert set(report.retrievers) == {"bm25", "dense", "bm25+rerank"}
    for values in report.retrievers.values():
        assert values["queries"] == report.queries > 0
        assert 0.0 <= values["ndcg@10"] <= 1.0 and "entity_recall@10" in values
    assert report.retrievers["bm25"]["recall@100"] == 1.0  # tiny corpus: all gold found
    assert json.loads(json.dumps(report.to_json()))["retrievers"] == report.retrievers
    table = format_table(report)
    assert "bm25+rerank" in table and "ndcg@10" in table


def test_evaluate_errors(small_ws):
    with pytest.raises(CurationError, match="Unknown retriever 'bm26'. Available options: bm25"):
        evaluate_workspace(small_ws, "disease_gene", ["bm26"], progress=False)
    with pytest.raises(CurationError, match="No PO relation cites a document"):
        evaluate_workspace(small_ws, "PO", ["bm25"], progress=False)


def test_evaluate_a_kb_imported_through_the_generic_tsv_path(tmp_workspace, fixtures_dir,
                                                             tmp_path):
    from curation.store.importer import import_items
    from kb_sources.types import Document

    tmp_workspace.add_schema(fixtures_dir / "drug_target_schema.toml")
    import_file(tmp_workspace, "kb", "tsv", fixtures_dir / "generic_sample.tsv",
                mapping=str(fixtures_dir / "mapping_sample.toml"), progress=False)
    docs = [Document("17192538", "Lapatinib inhibits EGFR and ERBB2 (HER2).", "Dual kinase.",
                     source="t"),
            Document("11287972", "Imatinib (STI571) in CML.", "ABL1 and KIT inhibition.",
                     source="t"),
            Document("20818844", "Vemurafenib in BRAF V600E melanoma.", "PLX4032 trial.",
                     source="t"),
            Document("1", "Unrelated abstract on diabetes.", "Insulin.", source="t")]
    import_items(tmp_workspace, docs, reader="docs:test", path="mem", progress=False)
    report = evaluate_workspace(tmp_workspace, "drug_target", ["bm25", "bm25+rerank"],
                                split="all", progress=False)
    assert report.schema == "drug_target" and report.queries == 3
    assert report.retrievers["bm25"]["recall@100"] == 1.0
    assert report.retrievers["bm25+rerank"]["entity_recall@10"] > 0
