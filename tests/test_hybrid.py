"""Rank fusion (RRF, min-max) on hand-computed examples, and the hybrid retriever."""

from __future__ import annotations

import pytest

from retrievers import Hit, RetrieverError, build_retriever
from retrievers.bm25 import BM25Config, BM25Retriever
from retrievers.hybrid import HybridRetriever, fuse, minmax_fuse, rrf_fuse


def ranking(*pairs: tuple[str, float]) -> list[Hit]:
    return [Hit(d, s, r, "x") for r, (d, s) in enumerate(pairs, start=1)]


A = ranking(("x", 3.0), ("y", 2.0), ("z", 1.0))
B = ranking(("y", 10.0), ("w", 4.0))


def test_rrf_hand_computed() -> None:
    fused = rrf_fuse([A, B], k=60)
    assert [h.doc_id for h in fused] == ["y", "x", "w", "z"]
    assert [h.score for h in fused] == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63])
    assert [h.rank for h in fused] == [1, 2, 3, 4]
    assert {h.retriever for h in fused} == {"hybrid:rrf"}


def test_rrf_weights_and_top_k() -> None:
    fused = rrf_fuse([A, B], k=60, weights=[2.0, 1.0], top_k=3)
    # x = 2/61 = .03279, y = 2/62 + 1/61 = .04865, z = 2/63 = .03175, w = 1/62 = .01613
    assert [h.doc_id for h in fused] == ["y", "x", "z"]
    assert fused[0].score == pytest.approx(2 / 62 + 1 / 61)
    assert [h.doc_id for h in rrf_fuse([A, B], weights=[1.0, 0.0])] == ["x", "y", "z", "w"]


def test_minmax_hand_computed() -> None:
    fused = minmax_fuse([A, B])
    # A -> x 1, y .5, z 0; B -> y 1, w 0; ties (z, w) keep first-seen order
    assert [(h.doc_id, h.score) for h in fused] == [("y", 1.5), ("x", 1.0), ("z", 0.0),
                                                    ("w", 0.0)]
    weighted = minmax_fuse([A, B], weights=[3.0, 1.0])
    assert [(h.doc_id, h.score) for h in weighted][:2] == [("x", 3.0), ("y", 2.5)]


def test_equal_scores_and_empty_rankings() -> None:
    assert [h.score for h in minmax_fuse([ranking(("a", 5.0), ("b", 5.0))])] == [1.0, 1.0]
    assert minmax_fuse([[], []]) == [] and rrf_fuse([]) == []
    assert [h.doc_id for h in rrf_fuse([[], B])] == ["y", "w"]


def test_fusion_errors_say_how_to_fix() -> None:
    with pytest.raises(RetrieverError, match="got 1 weights for 2 rankings; give one weight"):
        rrf_fuse([A, B], weights=[1.0])
    with pytest.raises(RetrieverError, match="weights must be >= 0"):
        minmax_fuse([A, B], weights=[1.0, -1.0])
    with pytest.raises(RetrieverError, match="rrf_k must be >= 0"):
        rrf_fuse([A], k=-1)
    with pytest.raises(RetrieverError, match="Unknown fusion method 'borda'. Available options: "
                                             "rrf, score"):
        fuse([A], "borda")


DOCS = [("e", "BRAF V600E melanoma vemurafenib"), ("k", "BRAF V600K melanoma trametinib"),
        ("a", "EML4-ALK lung cancer crizotinib")]


def test_hybrid_of_any_retrievers_fuses_their_rankings() -> None:
    hybrid = HybridRetriever({"split": BM25Retriever(),
                              "whole": BM25Retriever(BM25Config(split_compounds=False))},
                             fusion="score", weights={"whole": 0.5})
    hybrid.index(DOCS, progress=False)
    assert len(hybrid) == 3 and all(len(c) == 3 for c in hybrid.components.values())
    per = hybrid.component_rankings(["EML4 ALK"], k=3)
    assert [h.doc_id for h in per["split"][0]] == ["a"] and per["whole"][0] == []
    hits = hybrid.search("BRAF V600E", k=2)
    assert [h.doc_id for h in hits] == ["e", "k"]
    assert hits[0].retriever == "hybrid:score(bm25+bm25)"
    assert hits[0].score == pytest.approx(1.5)


def test_hybrid_from_options(tiny_model_path) -> None:
    hybrid = build_retriever("hybrid", components=["bm25"], fusion="rrf", rrf_k=10, depth=5,
                             bm25={"k1": 1.2})
    assert isinstance(hybrid, HybridRetriever)
    assert hybrid.components["bm25"].config.k1 == 1.2
    hybrid.index(DOCS, progress=False)
    assert hybrid.search("V600E", k=1)[0].score == pytest.approx(1 / 11)
    default = build_retriever("hybrid", dense={"model": str(tiny_model_path)})
    assert list(default.components) == ["bm25", "dense"]


def test_hybrid_option_errors() -> None:
    with pytest.raises(RetrieverError, match="Unknown retriever 'splade'. Available options"):
        build_retriever("hybrid", components=["bm25", "splade"])
    with pytest.raises(RetrieverError, match="Unknown option .*'dense'.*Available options: .*bm25"):
        build_retriever("hybrid", components=["bm25"], weights={"dense": 2.0})
    with pytest.raises(RetrieverError, match="needs at least one component"):
        HybridRetriever({})
