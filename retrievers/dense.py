"""Dense retrieval: an :class:`~retrievers.encoder.Encoder` + a vector collection.

The vectors go to a :mod:`retrievers.vector_store` collection: a FAISS :class:`VectorIndex`
(the default, saved with the retriever) or, with the option ``vector_store`` (a
:class:`~retrievers.vector_store.StoreConfig` table, ``{"kind": "qdrant", "path": ...}``), a
Qdrant collection named after the model version, backend and precision plus a build token;
``save`` points the alias without the token at it (the atomic switch) and drops the collection
it pointed at before, and the manifest records the alias and the store settings.

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
import secrets
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
from retrievers.faiss_index import PARAMS, IndexConfig, VectorIndex
from retrievers.faiss_store import FaissCollection
from retrievers.vector_store import (
    StoreConfig,
    StoreKind,
    VectorCollection,
    collection_name,
    open_store,
)

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
        store: Where the vectors go; ``None`` (or kind ``faiss``): a FAISS index saved with the
            retriever.
    """

    name = "dense"

    def __init__(self, encoder: Encoder | EncoderConfig | Any = None,
                 index_config: IndexConfig | None = None,
                 cache_dir: str | Path | None = None,
                 store: StoreConfig | None = None) -> None:
        super().__init__()
        if encoder is None or isinstance(encoder, EncoderConfig):
            encoder = Encoder(encoder)
        self.encoder = encoder
        self.index_config = index_config or IndexConfig()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.store_config = store if store is not None and store.kind != StoreKind.FAISS else None
        self._vectors: VectorCollection | None = None
        self._store: Any = None  # the open external store (Qdrant), when there is one

    @classmethod
    def from_options(cls, **options: Any) -> Self:
        """Build from plain options: any :class:`EncoderConfig` field (``model``, ``pooling``,
        ``query_prefix``, ``device`` ...), any :class:`IndexConfig` field except ``kind``, which
        is given as ``index`` ("flat", "ivf", "hnsw"), ``cache_dir`` and ``vector_store`` (a
        store kind or a :class:`StoreConfig` table).

        Raises:
            RetrieverError: An unknown option or value.
        """
        index_options = tuple(o for o in _INDEX_OPTIONS if o != "kind")
        check_options(cls.name, options,
                      (*_ENCODER_OPTIONS, *index_options, "index", "cache_dir", "vector_store"))
        encoder = EncoderConfig(**{k: v for k, v in options.items() if k in _ENCODER_OPTIONS})
        index = IndexConfig(kind=options.get("index", "flat"),
                            **{k: v for k, v in options.items() if k in index_options})
        store = options.get("vector_store")
        if store is not None:
            store = StoreConfig.from_dict({"kind": store} if isinstance(store, str) else store)
        return cls(encoder, index, options.get("cache_dir"), store)

    @property
    def label(self) -> str:
        """``dense:<model id>``: identifies the model version behind each hit."""
        return f"dense:{self.encoder.model_id}"

    def document_vectors(self, texts: list[str], progress: Progress = False) -> np.ndarray:
        """Vectors of documents through the cache; shape (len(texts), dim)."""
        cache = EmbeddingCache(self.cache_dir, self.encoder.model_id) if self.cache_dir else None
        return encode_with_cache(texts, self.encoder, cache, progress=progress)

    def collection_alias(self) -> str:
        """The external store's alias of this model version + backend + precision."""
        assert self.store_config is not None
        backend, precision = encoder_backend(self.encoder)
        return collection_name(self.encoder.model_id, backend, precision,
                               namespace=self.store_config.namespace)

    def _open_store(self) -> Any:
        if self._store is None:
            self._store = open_store(self.store_config)
        return self._store

    def _reset(self) -> None:
        self._vectors = None

    def _add(self, ids: list[str], texts: list[str], progress: Progress) -> None:
        vectors = self.document_vectors(texts, progress)  # (n, dim)
        if self._vectors is None:
            self._vectors = self._new_collection(vectors.shape[1])
        # a bar for the upserts of an external store; a callback already saw the encoding
        self._vectors.add(ids, vectors, progress=progress is True and self._store is not None)

    def _new_collection(self, dim: int) -> VectorCollection:
        if self.store_config is None:
            return FaissCollection(self.label, VectorIndex(dim, self.index_config))
        name = f"{self.collection_alias()}-{secrets.token_hex(4)}"  # live once save() switches
        return self._open_store().create(name, dim)

    def bulk_target(self, name: str, folder: Path) -> VectorCollection:
        """The collection a bulk encode (:mod:`retrievers.bulk_encode`) fills: FAISS files in
        ``folder`` or the Qdrant collection ``<alias>-<name>``, reopened when an interrupted run
        left one."""
        if self.store_config is None:
            if (folder / PARAMS).is_file():
                return FaissCollection(self.label, VectorIndex.load(folder), folder)
            return FaissCollection(self.label, VectorIndex(self.encoder.dim, self.index_config),
                                   folder)
        store = self._open_store()
        target = f"{self.collection_alias()}-{name}"
        if target in store.collections():
            return store.open(target)
        return store.create(target, self.encoder.dim)

    def adopt(self, ids: list[str], collection: VectorCollection) -> None:
        """Serve ``collection``, which holds exactly ``ids``, as this retriever's index."""
        if len(collection) != len(ids):
            raise RetrieverError(f"collection {collection.name!r} holds {len(collection):,} "
                                 f"vectors, not the {len(ids):,} documents given")
        self._vectors = collection
        self._set_ids(list(ids))

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        assert self._vectors is not None  # non-empty index guaranteed by the base class
        q = self.encoder.encode_queries(queries)  # (n_queries, dim)
        found = self._vectors.search(q, k)
        label = self.label
        return [[Hit(d, float(s), r, label) for r, (d, s) in
                 enumerate(zip(ids, scores, strict=True), start=1)]
                for scores, ids in zip(found.scores, found.ids, strict=True)]

    def _save(self, folder: Path) -> dict[str, Any]:
        if not isinstance(getattr(self.encoder, "config", None), EncoderConfig):
            raise RetrieverError(
                f"cannot save: encoder {type(self.encoder).__name__} has no EncoderConfig to "
                "rebuild it from; use retrievers.encoder.Encoder(EncoderConfig(...))")
        if self.store_config is not None:
            return {**self._manifest(), **self._switch_external()}
        if self._vectors is not None:
            self._vectors.save(folder / "faiss")
        elif (folder / "faiss").is_dir():  # an empty index must not load an older one
            shutil.rmtree(folder / "faiss")
        return self._manifest()

    def _manifest(self) -> dict[str, Any]:
        config = self.encoder.config
        return {"encoder": asdict(config), "index": asdict(self.index_config),
                "model_id": self.encoder.model_id,
                "backend": config.backend, "precision": config.precision,
                "cache_dir": str(self.cache_dir) if self.cache_dir else None}

    def _switch_external(self) -> dict[str, Any]:
        """Point the alias at this build's collection and drop the one it replaced."""
        alias = self.collection_alias()
        store = self._open_store()
        if self._vectors is not None and self._vectors.name != store.resolve(alias):
            self._vectors.save()
            before = store.switch(alias, self._vectors.name)
            if before is not None and before != self._vectors.name:
                store.drop(before)
        return {"vector_store": self.store_config.to_dict(),
                "collection": alias if self._vectors is not None else None}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any]) -> Self:
        store = manifest.get("vector_store")
        obj = cls(EncoderConfig.from_dict(manifest["encoder"]), IndexConfig(**manifest["index"]),
                  manifest.get("cache_dir"), StoreConfig.from_dict(store) if store else None)
        check_backend(manifest, obj.encoder, folder)
        if obj.store_config is not None and manifest.get("collection"):
            obj._vectors = obj._open_store().open(manifest["collection"])
        elif (folder / "faiss").is_dir():
            obj._vectors = FaissCollection(obj.label, VectorIndex.load(folder / "faiss"))
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
