"""Contract tests over every vector store (retrievers.vector_store): FAISS and Qdrant (local mode).

Each store: adds and counts vectors, finds exactly what FAISS flat (brute-force inner product)
finds on the same vectors (recall@10 = 1.0, same scores), overwrites a re-added id, deletes,
switches an alias between two model versions, and gives the same answers after reopening from
disk. Setting errors name the setting and the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from retrievers import RetrieverError
from retrievers.vector_store import (
    URL_ENV,
    StoreConfig,
    StoreKind,
    VectorCollection,
    VectorStore,
    collection_name,
    open_store,
)

DIM = 24
N = 600


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data() -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return [f"pmid{i}" for i in range(N)], unit(rng.normal(size=(N, DIM))), \
        unit(rng.normal(size=(25, DIM)))


@pytest.fixture(params=[k.value for k in StoreKind])
def config(request: pytest.FixtureRequest, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> StoreConfig:
    monkeypatch.delenv(URL_ENV, raising=False)
    return StoreConfig(request.param, path=str(tmp_path / "store"), batch_size=128)


@pytest.fixture
def store(config: StoreConfig):
    opened = open_store(config)
    yield opened
    opened.close()


def brute_force(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    sims = queries @ vectors.T  # (q, n)
    top = np.argsort(-sims, axis=1)[:, :k]
    return np.take_along_axis(sims, top, axis=1), top


def test_stores_satisfy_the_protocols(store: VectorStore) -> None:
    assert isinstance(store, VectorStore)
    assert isinstance(store.create("m1", DIM), VectorCollection)


def test_search_equals_faiss_flat(store: VectorStore, data) -> None:
    ids, vectors, queries = data
    collection = store.create("m1", DIM)
    collection.add(ids, vectors)
    assert len(collection) == N
    exact_scores, exact = brute_force(vectors, queries, 10)
    scores, found = collection.search(queries, 10)
    recall = np.mean([len(set(f) & {ids[p] for p in row}) / 10
                      for f, row in zip(found, exact, strict=True)])
    assert recall == 1.0
    assert [f for f in found] == [[ids[p] for p in row] for row in exact]
    assert np.allclose(np.stack(scores), exact_scores, atol=1e-5)


def test_progress_reports_every_vector(store: VectorStore, data) -> None:
    ids, vectors, _ = data
    seen: list[tuple[int, int]] = []
    store.create("m1", DIM).add(ids, vectors, progress=lambda done, total: seen.append(
        (done, total)))
    assert seen[-1] == (N, N) and len(seen) >= 1


def test_adding_an_id_again_replaces_its_vector(store: VectorStore, data) -> None:
    ids, vectors, _ = data
    collection = store.create("m1", DIM)
    collection.add(ids[:50], vectors[:50])
    collection.add([ids[0]], vectors[60:61])
    assert len(collection) == 50
    _, found = collection.search(vectors[60:61], 1)
    assert found == [[ids[0]]]


def test_delete_removes_only_the_given_ids(store: VectorStore, data) -> None:
    ids, vectors, _ = data
    collection = store.create("m1", DIM)
    collection.add(ids, vectors)
    assert collection.delete([ids[3], ids[4], "not-there"]) == 2
    assert len(collection) == N - 2
    _, found = collection.search(vectors[3:5], 1)
    assert all(f[0] not in (ids[3], ids[4]) for f in found)
    _, found = collection.search(vectors[5:6], 1)
    assert found == [[ids[5]]]


def test_empty_collection_finds_nothing(store: VectorStore, data) -> None:
    scores, found = store.create("m1", DIM).search(data[2][:2], 5)
    assert found == [[], []] and [len(s) for s in scores] == [0, 0]


def test_switch_version_via_alias(store: VectorStore, data) -> None:
    ids, vectors, _ = data
    old, new = store.create("model_v1", DIM), store.create("model_v2", DIM)
    old.add(ids[:10], vectors[:10])
    new.add(ids[10:30], vectors[10:30])
    old.save()
    new.save()
    assert store.switch("model", "model_v1") is None
    assert store.resolve("model") == "model_v1"
    assert len(store.open("model")) == 10
    assert store.switch("model", "model_v2") == "model_v1"
    active = store.open("model")
    assert active.name == "model_v2" and len(active) == 20
    assert active.search(vectors[12:13], 1).ids == [[ids[12]]]


def test_reopen_from_disk_gives_the_same_answers(config: StoreConfig, data) -> None:
    ids, vectors, queries = data
    store = open_store(config)
    collection = store.create("m1", DIM)
    collection.add(ids, vectors)
    collection.delete([ids[0]])
    collection.save()
    before = collection.search(queries, 10)
    store.switch("active", "m1")
    store.close()
    reopened = open_store(config)
    try:
        assert reopened.collections() == ["m1"]
        after = reopened.open("active").search(queries, 10)
        assert after.ids == before.ids
        assert np.allclose(np.stack(after.scores), np.stack(before.scores), atol=1e-6)
    finally:
        reopened.close()


def test_drop_removes_the_collection_and_its_alias(store: VectorStore, data) -> None:
    collection = store.create("m1", DIM)
    collection.add(data[0][:3], data[1][:3])
    collection.save()
    store.switch("active", "m1")
    store.drop("m1")
    assert store.collections() == [] and store.resolve("active") is None


def test_unknown_collection_lists_what_there_is(store: VectorStore, data) -> None:
    collection = store.create("m1", DIM)
    collection.add(data[0][:3], data[1][:3])
    collection.save()
    with pytest.raises(RetrieverError, match="no collection or alias 'm2'.*collections: m1"):
        store.open("m2")
    with pytest.raises(RetrieverError, match="no such .*collection"):
        store.switch("active", "m2")


def test_bad_shapes_and_names_say_what_was_expected(store: VectorStore) -> None:
    collection = store.create("m1", DIM)
    with pytest.raises(RetrieverError, match=r"expected shape \(2, 24\)"):
        collection.add(["a", "b"], np.zeros((2, 8)))
    with pytest.raises(RetrieverError, match="occur twice"):
        collection.add(["a", "a"], np.ones((2, DIM)))
    with pytest.raises(RetrieverError, match="not usable.*collection_name"):
        store.create("disease/gene@1", DIM)


@pytest.mark.parametrize("via_env", [False, True])
def test_unreachable_qdrant_url_names_the_setting(tmp_path: Path, via_env: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://127.0.0.1:9"  # the discard port: nothing listens there
    if via_env:
        monkeypatch.setenv(URL_ENV, url)
    config = StoreConfig("qdrant", path=str(tmp_path), url=None if via_env else url, timeout=5)
    setting = f"the environment variable {URL_ENV}" if via_env else "StoreConfig.url"
    with pytest.raises(RetrieverError, match=rf"cannot reach a Qdrant server at "
                                             rf"'http://127.0.0.1:9' \({setting}\)"):
        open_store(config)


def test_qdrant_without_url_or_path_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    with pytest.raises(RetrieverError, match=f"set the environment variable {URL_ENV}"):
        open_store({"kind": "qdrant"})


def test_missing_qdrant_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "qdrant_client", None)
    with pytest.raises(RetrieverError, match=r"pip install 'kbcurate\[qdrant\]'"):
        open_store(StoreConfig("qdrant", path=str(tmp_path)))


def test_unknown_kind_and_setting_list_the_options() -> None:
    with pytest.raises(RetrieverError, match="Unknown vector store 'milvus'. Available options: "
                                             "faiss, qdrant"):
        StoreConfig("milvus")
    with pytest.raises(RetrieverError, match="Unknown vector store setting 'host'"):
        StoreConfig.from_dict({"kind": "qdrant", "host": "x"})
    with pytest.raises(RetrieverError, match="needs a folder: set StoreConfig.path"):
        open_store()


def test_collection_names_are_safe_and_distinct() -> None:
    name = collection_name("disease_gene-edel@1", "openvino", "int8")
    assert name.startswith("kbcurate__disease_gene-edel_1__openvino__int8__")
    assert name == collection_name("disease_gene-edel@1", "openvino", "int8")
    assert name != collection_name("disease_gene-edel#1", "openvino", "int8")
    assert name != collection_name("disease_gene-edel@1", "openvino", "fp32")


@pytest.mark.parametrize("kind", ["flat", "ivf", "hnsw"])
def test_faiss_delete_keeps_kind_and_order(tmp_path: Path, data, kind: str) -> None:
    ids, vectors, _ = data
    store = open_store(StoreConfig("faiss", path=str(tmp_path), index=kind))
    collection = store.create("m1", DIM)
    collection.add(ids, vectors)
    assert collection.delete(ids[:100:2]) == 50
    assert collection.index.kind == kind and collection.ids == ids[1:100:2] + ids[100:]
    _, found = collection.search(vectors[101:102], 1)
    assert found == [[ids[101]]]
