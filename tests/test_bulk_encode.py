"""Bulk encoding (retrievers.bulk_encode): shards into a vector collection, resumable, with the
vectors of a single-process encode; the Ray engine runs (2 workers on this machine)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrievers import RetrieverError
from retrievers.bulk_encode import BulkConfig, ShardManifest, bulk_encode, shard_ranges
from retrievers.encoder import Encoder, EncoderConfig
from retrievers.vector_store import URL_ENV, StoreConfig, open_store

WORDS = "BRAF V600E melanoma EGFR lung cancer erlotinib AKT1 Ser473 kinase tumour cells".split()
DOCS = [(f"pmid{i}", " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(3 + i % 9)))
        for i in range(23)]


@pytest.fixture
def encoder_config(tiny_model_path: Path) -> EncoderConfig:
    return EncoderConfig(model=str(tiny_model_path), device="cpu")


@pytest.fixture
def reference(encoder_config: EncoderConfig) -> dict[str, np.ndarray]:
    vectors = Encoder(encoder_config).encode_documents([t for _, t in DOCS])
    return {d: v for (d, _), v in zip(DOCS, vectors, strict=True)}


@pytest.fixture(params=["faiss", "qdrant"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(URL_ENV, raising=False)
    opened = open_store(StoreConfig(request.param, path=str(tmp_path / "store"), index="flat"))
    yield opened
    opened.close()


def stored(collection, reference: dict[str, np.ndarray]) -> dict[str, list[str]]:
    """Each document's nearest stored id when searching with its own reference vector."""
    ids = list(reference)
    found = collection.search(np.stack([reference[d] for d in ids]), 1)
    return {d: f for d, f in zip(ids, found.ids, strict=True)}


def test_shards_cover_the_corpus_in_order() -> None:
    assert shard_ranges(23, 5) == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]
    assert shard_ranges(0, 5) == []


def test_vectors_equal_a_single_process_encode(store, encoder_config, reference, tmp_path):
    collection = store.create("bulk", 32)
    report = bulk_encode(DOCS, encoder_config, collection, tmp_path / "m.json",
                         BulkConfig(shard_size=5, engine="local"), progress=False)
    assert (report.shards, report.encoded, report.skipped, report.vectors) == (5, 5, 0, 23)
    assert stored(collection, reference) == {d: [d] for d, _ in DOCS}
    scores = collection.search(np.stack(list(reference.values())), 1).scores
    assert np.allclose([s[0] for s in scores], 1.0, atol=1e-5)  # the very same vectors


def test_an_interrupted_run_resumes_with_the_missing_shards(store, encoder_config, reference,
                                                            tmp_path, monkeypatch):
    collection = store.create("bulk", 32)
    manifest = tmp_path / "m.json"
    real_mark = ShardManifest.mark_done
    calls = []

    def killed_on_third(self, shard, count):
        calls.append(shard)
        if len(calls) == 3:  # shard 2 is in the collection, not yet in the manifest
            raise KeyboardInterrupt("killed")
        real_mark(self, shard, count)

    monkeypatch.setattr(ShardManifest, "mark_done", killed_on_third)
    config = BulkConfig(shard_size=5, engine="local")
    with pytest.raises(KeyboardInterrupt):
        bulk_encode(DOCS, encoder_config, collection, manifest, config, progress=False)
    assert json.loads(manifest.read_text())["done"] == {"0": 5, "1": 5}
    assert len(collection) == 15
    monkeypatch.setattr(ShardManifest, "mark_done", real_mark)
    seen: list[tuple[int, int]] = []
    report = bulk_encode(DOCS, encoder_config, collection, manifest, config,
                         progress=lambda done, total: seen.append((done, total)))
    assert (report.encoded, report.skipped, report.vectors) == (3, 2, 23)
    assert seen[0] == (10, 23) and seen[-1] == (23, 23)
    assert stored(collection, reference) == {d: [d] for d, _ in DOCS}
    again = bulk_encode(DOCS, encoder_config, collection, manifest, config, progress=False)
    assert (again.encoded, again.skipped, again.vectors) == (0, 5, 23)


def test_a_manifest_of_another_corpus_is_refused(store, encoder_config, tmp_path) -> None:
    collection = store.create("bulk", 32)
    manifest = tmp_path / "m.json"
    config = BulkConfig(shard_size=10, engine="local")
    bulk_encode(DOCS[:10], encoder_config, collection, manifest, config, progress=False)
    with pytest.raises(RetrieverError, match=r"records shards of another run \(documents, "
                                             r"corpus differ\); delete it to encode from the"):
        bulk_encode(DOCS, encoder_config, collection, manifest, config, progress=False)


def test_a_collection_that_lost_vectors_is_refused(store, encoder_config, tmp_path) -> None:
    collection = store.create("bulk", 32)
    manifest = tmp_path / "m.json"
    config = BulkConfig(shard_size=10, engine="local")
    bulk_encode(DOCS, encoder_config, collection, manifest, config, progress=False)
    collection.delete(["pmid0"])
    with pytest.raises(RetrieverError, match="records 23 encoded documents but collection "
                                             "'bulk' holds 22 vectors"):
        bulk_encode(DOCS, encoder_config, collection, manifest, config, progress=False)


def test_bad_settings_list_the_options() -> None:
    with pytest.raises(RetrieverError, match="Unknown bulk encoding engine 'dask'. Available "
                                             "options: auto, local, ray"):
        BulkConfig(engine="dask")
    with pytest.raises(RetrieverError, match="shard_size must be an integer >= 1"):
        BulkConfig(shard_size=0)
    assert BulkConfig(workers=1).resolved_engine() == "local"


def test_ray_workers_give_the_same_vectors(encoder_config, reference, tmp_path) -> None:
    pytest.importorskip("ray")
    store = open_store(StoreConfig("faiss", path=str(tmp_path / "store"), index="flat"))
    collection = store.create("bulk", 32)
    report = bulk_encode(DOCS, encoder_config, collection, tmp_path / "m.json",
                         BulkConfig(shard_size=8, workers=2, engine="ray"), progress=False)
    assert (report.engine, report.encoded, report.vectors) == ("ray", 3, 23)
    assert stored(collection, reference) == {d: [d] for d, _ in DOCS}
    import ray

    assert not ray.is_initialized()  # the run's own Ray was shut down
