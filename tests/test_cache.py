"""Embedding cache: (model id, text hash) -> vector; only new texts are encoded."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from retrievers import RetrieverError
from retrievers.base import Progress
from retrievers.cache import EmbeddingCache, encode_with_cache, text_hash
from retrievers.dense import DenseRetriever


class CountingEncoder:
    """Deterministic fake encoder that records every text it encodes."""

    def __init__(self, model_id: str = "fake-v1", dim: int = 8) -> None:
        self.model_id = model_id
        self.dim = dim
        self.encoded: list[str] = []

    def _vector(self, text: str) -> np.ndarray:
        seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        v = np.random.default_rng(seed).normal(size=self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def encode_documents(self, texts: Sequence[str], *, progress: Progress = False
                         ) -> np.ndarray:
        self.encoded.extend(texts)
        return np.stack([self._vector(t) for t in texts]) if texts else \
            np.zeros((0, self.dim), np.float32)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.encode_documents(queries)


TEXTS = ["BRAF V600E melanoma", "EGFR L858R lung", "EML4-ALK crizotinib"]


def test_second_run_encodes_nothing_and_returns_same_vectors(tmp_path: Path) -> None:
    encoder = CountingEncoder()
    cache = EmbeddingCache(tmp_path, encoder.model_id)
    first = encode_with_cache(TEXTS, encoder, cache)
    assert sorted(encoder.encoded) == sorted(TEXTS)
    encoder.encoded.clear()
    second = encode_with_cache(TEXTS, encoder, EmbeddingCache(tmp_path, encoder.model_id))
    assert encoder.encoded == []
    assert np.array_equal(first, second)
    assert first.shape == (3, 8) and first.dtype == np.float32


def test_only_new_texts_are_encoded_and_order_is_kept(tmp_path: Path) -> None:
    encoder = CountingEncoder()
    cache = EmbeddingCache(tmp_path, encoder.model_id)
    encode_with_cache(TEXTS, encoder, cache)
    encoder.encoded.clear()
    texts = ["new text", TEXTS[2], "new text", TEXTS[0]]
    vectors = encode_with_cache(texts, encoder, cache)
    assert encoder.encoded == ["new text"]  # duplicates encoded once
    expected = np.stack([encoder._vector(t) for t in texts])
    assert np.allclose(vectors, expected)
    assert len(cache) == 4


def test_cache_is_per_model(tmp_path: Path) -> None:
    a, b = CountingEncoder("model-a"), CountingEncoder("model-b")
    encode_with_cache(TEXTS, a, EmbeddingCache(tmp_path, "model-a"))
    encode_with_cache(TEXTS, b, EmbeddingCache(tmp_path, "model-b"))
    assert len(b.encoded) == 3
    assert {p.name for p in tmp_path.glob("*.sqlite")} == {"model-a.sqlite", "model-b.sqlite"}
    with pytest.raises(RetrieverError, match="cache is for model 'model-a' but the encoder is "
                                             "'model-b'"):
        encode_with_cache(TEXTS, b, EmbeddingCache(tmp_path, "model-a"))


def test_storage_is_plain_sqlite_rows(tmp_path: Path) -> None:
    encoder = CountingEncoder()
    cache = EmbeddingCache(tmp_path, encoder.model_id)
    encode_with_cache(TEXTS[:1], encoder, cache)
    with sqlite3.connect(cache.path) as con:
        (h, dim, blob), = con.execute("SELECT hash, dim, vec FROM vectors").fetchall()
    assert h == text_hash(TEXTS[0]) and dim == 8
    assert np.array_equal(np.frombuffer(blob, np.float32), encoder._vector(TEXTS[0]))


def test_chunks_are_stored_as_they_finish(tmp_path: Path) -> None:
    class FailsOnSecondChunk(CountingEncoder):
        def encode_documents(self, texts, *, progress=False):
            if self.encoded:
                raise RuntimeError("interrupted")
            return super().encode_documents(texts)

    encoder = FailsOnSecondChunk()
    cache = EmbeddingCache(tmp_path, encoder.model_id)
    with pytest.raises(RuntimeError):
        encode_with_cache([f"text {i}" for i in range(10)], encoder, cache, chunk_size=4)
    assert len(cache) == 4  # the finished chunk survived


def test_bad_model_id_and_shapes(tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match="cannot name a cache file"):
        EmbeddingCache(tmp_path, "../escape")
    with pytest.raises(RetrieverError, match="expected one row per hash"):
        EmbeddingCache(tmp_path, "m").put_many(["a", "b"], np.zeros((1, 4)))


def test_dense_reindex_after_new_documents_encodes_only_those(tmp_path: Path) -> None:
    encoder = CountingEncoder()
    docs = [(f"d{i}", t) for i, t in enumerate(TEXTS)]
    retriever = DenseRetriever(encoder, cache_dir=tmp_path)
    retriever.index(docs, progress=False)
    encoder.encoded.clear()
    rebuilt = DenseRetriever(encoder, cache_dir=tmp_path)
    rebuilt.index([*docs, ("d9", "KRAS G12C sotorasib")], progress=False)
    assert encoder.encoded == ["KRAS G12C sotorasib"]
    encoder.encoded.clear()
    rebuilt.add([("d10", "PIK3CA H1047R")], progress=False)
    assert encoder.encoded == ["PIK3CA H1047R"]
    assert rebuilt.search("PIK3CA H1047R", k=1)[0].doc_id == "d10"
    assert rebuilt.label == "dense:fake-v1"


def test_progress_counts_cached_texts_as_done(tmp_path: Path) -> None:
    encoder = CountingEncoder()
    cache = EmbeddingCache(tmp_path, encoder.model_id)
    encode_with_cache(TEXTS[:2], encoder, cache)
    calls: list[tuple[int, int]] = []
    encode_with_cache(TEXTS, encoder, cache, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(2, 3), (3, 3)]
