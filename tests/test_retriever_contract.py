"""Contract tests over every registered retriever (retrievers.registry).

Each retriever: returns at most k hits sorted by score with ranks 1..n; gives identical results
after save -> load; handles an empty index and k larger than the corpus as documented; rejects
k <= 0 with a message naming the fix; finds a document added incrementally. Dense and hybrid run
on the tiny random model (mechanics, not quality).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from retrievers import Hit, Retriever, RetrieverError, build_retriever, load_retriever
from retrievers.registry import retriever_names

#: Every document mentions "cancer", so every retriever can return all of them.
CORPUS = [
    ("d1", "BRAF V600E mutation in melanoma cancer responds to vemurafenib"),
    ("d2", "BRAF V600K melanoma cancer treated with dabrafenib and trametinib"),
    ("d3", "EGFR L858R lung cancer responds to erlotinib"),
    ("d4", "EML4-ALK fusion lung cancer treated with crizotinib"),
    ("d5", "AKT1 phosphorylation at Ser473 in breast cancer cells"),
    ("d6", "Aspirin and metformin reduce cancer risk in diabetes"),
]
QUERIES = ["BRAF V600E melanoma", "lung cancer erlotinib", "cancer", "AKT1 Ser473"]
NEW_DOC = ("d7", "KRAS G12C sotorasib pancreatic adenocarcinoma")


def options_for(name: str, model: Path, cache: Path) -> dict[str, object]:
    dense = {"model": str(model), "cache_dir": str(cache)}
    # tantivy: registered only where its extra is installed (pip install 'kbcurate[scale]')
    return {"bm25": {}, "dense": dense, "hybrid": {"dense": dense}, "tantivy": {}}[name]


@pytest.fixture(params=retriever_names())
def make(request: pytest.FixtureRequest, tiny_model_path: Path,
         tmp_path: Path) -> Callable[[], Retriever]:
    """A factory of empty retrievers of one registered kind."""
    return lambda: build_retriever(request.param,
                                   **options_for(request.param, tiny_model_path, tmp_path / "c"))


@pytest.fixture
def indexed(make: Callable[[], Retriever]) -> Retriever:
    retriever = make()
    retriever.index(CORPUS, progress=False)
    return retriever


def assert_well_formed(hits: list[Hit], k: int, retriever: Retriever) -> None:
    assert len(hits) <= k
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len({h.doc_id for h in hits}) == len(hits)
    assert {h.doc_id for h in hits} <= set(retriever.doc_ids)
    assert all(h.retriever == retriever.label for h in hits)


def test_every_retriever_has_test_options(tiny_model_path: Path, tmp_path: Path) -> None:
    for name in retriever_names():
        assert isinstance(options_for(name, tiny_model_path, tmp_path), dict)


@pytest.mark.parametrize("k", [1, 3])
def test_hits_sorted_ranked_and_at_most_k(indexed: Retriever, k: int) -> None:
    assert len(indexed) == len(CORPUS)
    for query in QUERIES:
        hits = indexed.search(query, k=k)
        assert hits, f"{indexed.name} found nothing for {query!r}"
        assert_well_formed(hits, k, indexed)


def test_search_batch_equals_single_searches(indexed: Retriever) -> None:
    batch = indexed.search_batch(QUERIES, k=4)
    single = [indexed.search(q, k=4) for q in QUERIES]
    assert [[h.doc_id for h in hits] for hits in batch] == \
        [[h.doc_id for h in hits] for hits in single]
    for b, s in zip(batch, single, strict=True):
        assert [h.score for h in b] == pytest.approx([h.score for h in s], abs=1e-5)


def test_k_larger_than_corpus_returns_every_document(indexed: Retriever) -> None:
    hits = indexed.search("cancer", k=1000)
    assert sorted(h.doc_id for h in hits) == sorted(d for d, _ in CORPUS)


def test_empty_index_returns_no_hits_and_logs(make: Callable[[], Retriever],
                                              caplog: pytest.LogCaptureFixture) -> None:
    retriever = make()
    retriever.index([], progress=False)
    with caplog.at_level(logging.WARNING, logger="retrievers"):
        assert retriever.search("BRAF V600E", k=5) == []
        assert retriever.search_batch(["a", "b"], k=5) == [[], []]
    assert "empty index" in caplog.text
    assert len(retriever) == 0


@pytest.mark.parametrize("k", [0, -3])
def test_k_not_positive_raises_with_fix(indexed: Retriever, k: int) -> None:
    with pytest.raises(RetrieverError, match=rf"k must be a positive integer.*k={k}.*set k to 1"):
        indexed.search("BRAF", k=k)


def test_non_int_k_and_non_str_query_raise(indexed: Retriever) -> None:
    with pytest.raises(RetrieverError, match="got 2.5 of type float"):
        indexed.search("BRAF", k=2.5)  # type: ignore[arg-type]
    with pytest.raises(RetrieverError, match="expected a string"):
        indexed.search(["BRAF"], k=2)  # type: ignore[arg-type]


def test_save_then_load_gives_identical_results(indexed: Retriever, tmp_path: Path) -> None:
    indexed.save(tmp_path / "saved")
    assert not list((tmp_path / "saved").rglob("*.pkl")) and \
        not list((tmp_path / "saved").rglob("*.pickle"))
    loaded = load_retriever(tmp_path / "saved")
    assert type(loaded) is type(indexed)
    assert loaded.doc_ids == indexed.doc_ids
    assert loaded.label == indexed.label
    for query in QUERIES:
        before, after = indexed.search(query, k=4), loaded.search(query, k=4)
        assert [h.doc_id for h in after] == [h.doc_id for h in before]
        assert [h.score for h in after] == pytest.approx([h.score for h in before], abs=1e-5)


def test_incremental_add_finds_the_new_document(indexed: Retriever) -> None:
    indexed.add([NEW_DOC], progress=False)
    assert len(indexed) == len(CORPUS) + 1 and NEW_DOC[0] in indexed
    assert indexed.search(NEW_DOC[1], k=3)[0].doc_id == NEW_DOC[0]


def test_add_after_load_finds_the_new_document(indexed: Retriever, tmp_path: Path) -> None:
    loaded = load_retriever(indexed.save(tmp_path / "saved"))
    loaded.add([NEW_DOC], progress=False)
    assert loaded.search(NEW_DOC[1], k=3)[0].doc_id == NEW_DOC[0]


def test_adding_an_indexed_id_raises(indexed: Retriever) -> None:
    with pytest.raises(RetrieverError, match=r"already indexed \(first: 'd1'\).*index\(all_docs\)"):
        indexed.add([("d1", "new text")], progress=False)


def test_index_replaces_previous_documents(indexed: Retriever) -> None:
    indexed.index([NEW_DOC], progress=False)
    assert indexed.doc_ids == [NEW_DOC[0]]
    assert [h.doc_id for h in indexed.search(NEW_DOC[1], k=5)] == [NEW_DOC[0]]


def test_bad_documents_raise(make: Callable[[], Retriever]) -> None:
    retriever = make()
    with pytest.raises(RetrieverError, match="expected a \\(doc_id, text\\) pair"):
        retriever.index(["just a text"], progress=False)  # type: ignore[list-item]
    with pytest.raises(RetrieverError, match="'x' occurs twice"):
        retriever.index([("x", "a"), ("x", "b")], progress=False)
    with pytest.raises(RetrieverError, match="expected a string"):
        retriever.index([("x", None)], progress=False)  # type: ignore[list-item]


def test_progress_callback_reaches_total(make: Callable[[], Retriever]) -> None:
    calls: list[tuple[int, int]] = []
    make().index(CORPUS, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]


def test_unknown_option_lists_the_valid_ones() -> None:
    for name in retriever_names():
        with pytest.raises(RetrieverError, match=r"Unknown option .*'bogus'.*Available options:"):
            build_retriever(name, bogus=1)


def test_unknown_retriever_lists_the_registry() -> None:
    with pytest.raises(RetrieverError, match="Unknown retriever 'bm26'. Available options: "
                                             + ", ".join(sorted(retriever_names()))):
        build_retriever("bm26")


def test_loading_a_folder_without_an_index_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match=r"no saved retriever in .*retriever.save\(folder\)"):
        load_retriever(tmp_path)


def test_resaving_an_emptied_index_does_not_revive_old_files(indexed: Retriever,
                                                              tmp_path: Path) -> None:
    indexed.save(tmp_path / "saved")
    indexed.index([], progress=False)
    loaded = load_retriever(indexed.save(tmp_path / "saved"))
    assert len(loaded) == 0 and loaded.search("cancer", k=5) == []


def test_integer_ids_become_strings(make: Callable[[], Retriever]) -> None:
    import numpy as np

    retriever = make()
    retriever.index([(12345, "BRAF V600E cancer"), (np.int64(678), "EGFR cancer")],
                    progress=False)
    assert retriever.doc_ids == ["12345", "678"]
