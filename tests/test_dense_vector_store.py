"""The dense retriever over Qdrant (local mode): the same hits as over FAISS, saved as an alias
that a rebuild switches atomically; FAISS saves stay as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrievers import build_retriever, load_retriever
from retrievers.vector_store import URL_ENV, open_store

CORPUS = [
    ("d1", "BRAF V600E mutation in melanoma responds to vemurafenib"),
    ("d2", "BRAF V600K melanoma treated with dabrafenib and trametinib"),
    ("d3", "EGFR L858R lung cancer responds to erlotinib"),
    ("d4", "EML4-ALK fusion lung cancer treated with crizotinib"),
    ("d5", "AKT1 phosphorylation at Ser473 in breast cancer cells"),
]
QUERIES = ["BRAF melanoma", "lung cancer", "AKT1 Ser473"]


@pytest.fixture
def options(tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.delenv(URL_ENV, raising=False)
    return {"model": str(tiny_model_path), "cache_dir": str(tmp_path / "cache")}


def ranked(retriever, k: int = 5) -> list[list[tuple[str, float]]]:
    return [[(h.doc_id, h.score) for h in hits] for hits in retriever.search_batch(QUERIES, k)]


def assert_same_hits(got: list[list[tuple[str, float]]],
                     expected: list[list[tuple[str, float]]]) -> None:
    """The same documents in the same order, scores equal to float32 precision (the stores
    sum the products in their own order, so the last digits may differ: 0.79356 vs 0.79355)."""
    assert [[d for d, _ in hits] for hits in got] == [[d for d, _ in hits] for hits in expected]
    assert [[s for _, s in hits] for hits in got] == [
        pytest.approx([s for _, s in hits], abs=1e-4) for hits in expected]


def test_qdrant_gives_the_hits_of_faiss_and_survives_a_reload(options, tmp_path: Path) -> None:
    faiss = build_retriever("dense", **options)
    faiss.index(CORPUS, progress=False)
    store = {"kind": "qdrant", "path": str(tmp_path / "qdrant"), "namespace": "ws1"}
    qdrant = build_retriever("dense", **options, vector_store=store)
    qdrant.index(CORPUS, progress=False)
    assert_same_hits(ranked(qdrant), ranked(faiss))
    qdrant.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "retriever.json").read_text())
    alias = manifest["collection"]
    assert alias.startswith("ws1__") and manifest["vector_store"]["kind"] == "qdrant"
    assert not (tmp_path / "idx" / "faiss").exists()
    loaded = load_retriever(tmp_path / "idx")
    assert_same_hits(ranked(loaded), ranked(faiss))
    assert loaded.label == faiss.label


def test_a_rebuild_switches_the_alias_and_drops_the_old_collection(options, tmp_path) -> None:
    store = {"kind": "qdrant", "path": str(tmp_path / "qdrant")}
    first = build_retriever("dense", **options, vector_store=store)
    first.index(CORPUS[:2], progress=False)
    first.save(tmp_path / "idx")
    reader = load_retriever(tmp_path / "idx")
    old = reader._vectors.name
    second = build_retriever("dense", **options, vector_store=store)
    second.index(CORPUS, progress=False)
    second.save(tmp_path / "idx")
    qdrant = open_store(store)
    try:
        alias = second.collection_alias()
        assert qdrant.collections() == [second._vectors.name] != [old]
        assert qdrant.resolve(alias) == second._vectors.name
    finally:
        qdrant.close()
    # a reader loaded before the switch searches by alias: it sees the new collection
    assert reader._vectors.address == alias and len(reader._vectors) == len(CORPUS)


def test_faiss_saves_are_unchanged(options, tmp_path: Path) -> None:
    retriever = build_retriever("dense", **options)
    retriever.index(CORPUS, progress=False)
    retriever.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "retriever.json").read_text())
    assert "vector_store" not in manifest and "collection" not in manifest
    assert {p.name for p in (tmp_path / "idx" / "faiss").iterdir()} == \
        {"index.faiss", "ids.json", "params.json"}
    assert ranked(load_retriever(tmp_path / "idx")) == ranked(retriever)
