"""Embedding cache keyed by (model id, sha256 of the document text).

One SQLite file per model id under a cache folder (``<folder>/<model_id>.sqlite``, WAL mode; the
encoder's model id includes its backend and precision when they are not torch fp32, so vectors of
different backends never share a file):
rows of (text hash, float32 vector bytes). Plain data, never pickle; safe to read while a
background job writes. Re-indexing after adding documents encodes only texts not seen before, and
an interrupted encoding keeps every chunk finished so far.

Example:
    >>> cache = EmbeddingCache(tmp_path, encoder.model_id)            # doctest: +SKIP
    >>> vectors = encode_with_cache(texts, encoder, cache)            # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np

from retrievers.base import Progress, progress_reporter
from retrievers.errors import RetrieverError

logger = logging.getLogger(__name__)

_SQL_CHUNK = 500  # keys per "IN (...)" query, under SQLite's variable limit


class DocumentEncoder(Protocol):
    """What the cache needs from an encoder (:class:`retrievers.encoder.Encoder` fits)."""

    @property
    def model_id(self) -> str: ...

    def encode_documents(self, texts: Sequence[str], *, progress: Progress = False
                         ) -> np.ndarray: ...


def text_hash(text: str) -> str:
    """sha256 hex digest of a text (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors of one model, stored by text hash.

    Args:
        folder: Cache folder (created on first write).
        model_id: Model version key (``Encoder.model_id``); one SQLite file per id.
    """

    def __init__(self, folder: str | Path, model_id: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9._@-]+", model_id):
            raise RetrieverError(
                f"model id {model_id!r} cannot name a cache file; use letters, digits and . _ - @"
            )
        self.folder = Path(folder)
        self.model_id = model_id
        self.path = self.folder / f"{model_id}.sqlite"

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=30)) as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("CREATE TABLE IF NOT EXISTS vectors "
                        "(hash TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec BLOB NOT NULL)")
            with con:
                yield con

    def __len__(self) -> int:
        if not self.path.exists():
            return 0
        with self._connect() as con:
            return int(con.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def get_many(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the given text hashes (missing ones are left out).

        Returns:
            hash -> float32 vector of shape (dim,).
        """
        found: dict[str, np.ndarray] = {}
        if not self.path.exists():
            return found
        unique = list(dict.fromkeys(hashes))
        with self._connect() as con:
            for start in range(0, len(unique), _SQL_CHUNK):
                part = unique[start:start + _SQL_CHUNK]
                rows = con.execute(
                    f"SELECT hash, vec FROM vectors WHERE hash IN ({','.join('?' * len(part))})",
                    part)
                for h, blob in rows:
                    found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store vectors (shape (len(hashes), dim)), replacing any under the same hash."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(hashes):
            raise RetrieverError(
                f"put_many got {len(hashes)} hashes and vectors of shape {vectors.shape}; "
                "expected one row per hash"
            )
        dim = vectors.shape[1]
        with self._connect() as con:
            con.executemany("INSERT OR REPLACE INTO vectors (hash, dim, vec) VALUES (?, ?, ?)",
                            [(h, dim, v.tobytes()) for h, v in zip(hashes, vectors, strict=True)])


def encode_with_cache(texts: Sequence[str], encoder: DocumentEncoder,
                      cache: EmbeddingCache | None, *, progress: Progress = False,
                      chunk_size: int = 512) -> np.ndarray:
    """Document vectors, encoding only texts the cache lacks.

    Missing texts are de-duplicated, sorted by length (less padding) and encoded in chunks; each
    chunk is stored as soon as it is done.

    Args:
        texts: Document texts.
        encoder: Encodes texts; its ``model_id`` must match the cache's.
        cache: The cache, or None to encode everything.
        progress: ``True`` for a bar, or ``fn(done, total)`` over the distinct texts (cached ones
            are reported done at once).
        chunk_size: Texts per encoder call (and per cache write).

    Returns:
        float32 vectors in input order, shape (len(texts), dim).

    Raises:
        RetrieverError: The cache belongs to another model.
    """
    if cache is None:
        return encoder.encode_documents(list(texts), progress=progress)
    if cache.model_id != encoder.model_id:
        raise RetrieverError(
            f"cache is for model {cache.model_id!r} but the encoder is {encoder.model_id!r}; "
            "open EmbeddingCache(folder, encoder.model_id)"
        )
    hashes = [text_hash(t) for t in texts]
    found = cache.get_many(hashes)
    missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
    logger.info("embedding cache %s: %d of %d texts cached, encoding %d", cache.model_id,
                len(texts) - len(missing), len(texts), len(missing))
    todo = sorted(missing, key=lambda h: -len(missing[h]))
    with progress_reporter(len(found) + len(todo), progress, "encode documents", 64) as advance:
        if found:
            advance(len(found))  # cached texts count as done
        for start in range(0, len(todo), chunk_size):
            part = todo[start:start + chunk_size]
            vectors = encoder.encode_documents([missing[h] for h in part])  # (len(part), dim)
            cache.put_many(part, vectors)
            found.update(zip(part, vectors, strict=True))
            advance(len(part))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
