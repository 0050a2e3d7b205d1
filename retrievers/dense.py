"""Dense retrieval: an :class:`~retrievers.encoder.Encoder` + a FAISS :class:`VectorIndex`.

Document vectors are cached by (model id, text hash) when a cache folder is given, so rebuilding
the index after new documents arrive encodes only the new texts. ``index``/``add`` report progress
(a bar, or ``fn(done, total)`` for a background job).

Files written by ``save``: ``faiss/`` (index.faiss, ids.json, params.json), ``ids.json`` and the
``retriever.json`` manifest holding the encoder and index configs, so ``load`` rebuilds the same
encoder (pass ``encoder=`` to reuse a model already in memory). The manifest also records the
``backend`` and ``precision`` that built the vectors; queries are encoded with the same ones, and
:meth:`DenseRetriever.load_with_encoder` refuses an encoder of another pair.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Self

import numpy as np

from retrievers.backends import DEFAULT as DEFAULT_BACKEND
from retrievers.base import Hit, Progress, Retriever, read_manifest
from retrievers.cache import EmbeddingCache, encode_with_cache
from retrievers.encoder import Encoder, EncoderConfig
from retrievers.errors import RetrieverError, check_options
from retrievers.faiss_index import IndexConfig, VectorIndex

logger = logging.getLogger(__name__)

_ENCODER_OPTIONS = tuple(f.name for f in fields(EncoderConfig))
_INDEX_OPTIONS = tuple(f.name for f in fields(IndexConfig))


class DenseRetriever(Retriever):
    """Bi-encoder retrieval over a FAISS index (exact inner product by default).

    Args:
        encoder: An :class:`Encoder` (or any object with ``model_id``, ``encode_documents`` and
            ``encode_queries``), or the :class:`EncoderConfig` to build one.
        index_config: FAISS settings (flat / ivf / hnsw).
        cache_dir: Folder of the embedding cache; ``None`` encodes without caching.
    """

    name = "dense"

    def __init__(self, encoder: Encoder | EncoderConfig | Any = None,
                 index_config: IndexConfig | None = None,
                 cache_dir: str | Path | None = None) -> None:
        super().__init__()
        if encoder is None or isinstance(encoder, EncoderConfig):
            encoder = Encoder(encoder)
        self.encoder = encoder
        self.index_config = index_config or IndexConfig()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._vectors: VectorIndex | None = None

    @classmethod
    def from_options(cls, **options: Any) -> Self:
        """Build from plain options: any :class:`EncoderConfig` field (``model``, ``pooling``,
        ``query_prefix``, ``device`` ...), any :class:`IndexConfig` field except ``kind``, which
        is given as ``index`` ("flat", "ivf", "hnsw"), and ``cache_dir``.

        Raises:
            RetrieverError: An unknown option or value.
        """
        index_options = tuple(o for o in _INDEX_OPTIONS if o != "kind")
        check_options(cls.name, options,
                      (*_ENCODER_OPTIONS, *index_options, "index", "cache_dir"))
        encoder = EncoderConfig(**{k: v for k, v in options.items() if k in _ENCODER_OPTIONS})
        index = IndexConfig(kind=options.get("index", "flat"),
                            **{k: v for k, v in options.items() if k in index_options})
        return cls(encoder, index, options.get("cache_dir"))

    @property
    def label(self) -> str:
        """``dense:<model id>``: identifies the model version behind each hit."""
        return f"dense:{self.encoder.model_id}"

    def document_vectors(self, texts: list[str], progress: Progress = False) -> np.ndarray:
        """Vectors of documents through the cache; shape (len(texts), dim)."""
        cache = EmbeddingCache(self.cache_dir, self.encoder.model_id) if self.cache_dir else None
        return encode_with_cache(texts, self.encoder, cache, progress=progress)

    def _reset(self) -> None:
        self._vectors = None

    def _add(self, ids: list[str], texts: list[str], progress: Progress) -> None:
        vectors = self.document_vectors(texts, progress)  # (n, dim)
        if self._vectors is None:
            self._vectors = VectorIndex(vectors.shape[1], self.index_config)
        self._vectors.add(ids, vectors)

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        assert self._vectors is not None  # non-empty index guaranteed by the base class
        q = self.encoder.encode_queries(queries)  # (n_queries, dim)
        scores, positions = self._vectors.search(q, k)  # (n_queries, k) each
        label = self.label
        results = []
        for row_scores, row_pos in zip(scores, positions, strict=True):
            kept = [(self._vectors.ids[p], float(s))
                    for s, p in zip(row_scores, row_pos, strict=True) if p >= 0]
            results.append([Hit(d, s, r, label) for r, (d, s) in enumerate(kept, start=1)])
        return results

    def _save(self, folder: Path) -> dict[str, Any]:
        if not isinstance(getattr(self.encoder, "config", None), EncoderConfig):
            raise RetrieverError(
                f"cannot save: encoder {type(self.encoder).__name__} has no EncoderConfig to "
                "rebuild it from; use retrievers.encoder.Encoder(EncoderConfig(...))")
        if self._vectors is not None:
            self._vectors.save(folder / "faiss")
        elif (folder / "faiss").is_dir():  # an empty index must not load an older one
            shutil.rmtree(folder / "faiss")
        config = self.encoder.config
        return {"encoder": asdict(config), "index": asdict(self.index_config),
                "model_id": self.encoder.model_id,
                "backend": config.backend, "precision": config.precision,
                "cache_dir": str(self.cache_dir) if self.cache_dir else None}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any]) -> Self:
        obj = cls(EncoderConfig.from_dict(manifest["encoder"]), IndexConfig(**manifest["index"]),
                  manifest.get("cache_dir"))
        check_backend(manifest, obj.encoder, folder)
        if (folder / "faiss").is_dir():
            obj._vectors = VectorIndex.load(folder / "faiss")
        obj._check_model(manifest.get("model_id"), folder)
        return obj

    def _check_model(self, saved_id: str | None, folder: Path) -> None:
        if saved_id != self.encoder.model_id:
            logger.warning("%s was indexed with model %s but searches with %s: re-index for "
                           "consistent scores", folder, saved_id, self.encoder.model_id)

    @classmethod
    def load_with_encoder(cls, folder: str | Path, encoder: Any) -> Self:
        """Load a saved index but encode queries with an encoder already in memory.

        Args:
            folder: Folder written by ``save``.
            encoder: The encoder to use (should be the model that built the index).

        Returns:
            The retriever.

        Raises:
            RetrieverError: The encoder's backend/precision differ from the index's.
        """
        manifest = read_manifest(Path(folder))
        check_backend(manifest, encoder, Path(folder))
        obj = cls.load(folder)
        obj.encoder = encoder
        obj._check_model(manifest.get("model_id"), Path(folder))
        return obj


def encoder_backend(encoder: Any) -> tuple[str, str]:
    """(backend, precision) of an encoder; torch fp32 for one without an EncoderConfig."""
    config = getattr(encoder, "config", None)
    if isinstance(config, EncoderConfig):
        return config.backend, config.precision
    return DEFAULT_BACKEND


def check_backend(manifest: dict[str, Any], encoder: Any, folder: Path) -> None:
    """Refuse a query encoder whose backend/precision differ from those that built the index.

    Indexes saved before backends were recorded carry no pair and are not checked.

    Raises:
        RetrieverError: The pairs differ; the message names both and how to fix it.
    """
    if "backend" not in manifest:
        return
    built = (manifest["backend"], manifest.get("precision", "fp32"))
    used = encoder_backend(encoder)
    if built != used:
        raise RetrieverError(
            f"{folder} was indexed with backend {built[0]} / precision {built[1]}, but the "
            f"query encoder uses backend {used[0]} / precision {used[1]}: vectors of different "
            "backends are never mixed. Rebuild the index with the query encoder's pair "
            f"(kbcurate index --backend {used[0]} --precision {used[1]}) or encode queries "
            f"with the index's (--backend {built[0]} --precision {built[1]})")
