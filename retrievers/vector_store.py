"""The vector-store interface: collections of (document id, vector) behind one engine.

Two levels, both small:

- a :class:`VectorStore` holds named collections (one per model version + backend + precision,
  see :func:`collection_name`) and aliases that point at one of them; :meth:`VectorStore.switch`
  repoints an alias atomically, which is how a new model version's vectors go live;
- a :class:`VectorCollection` holds the vectors: ``add(ids, vectors, progress=...)``,
  ``search(queries, k) -> (scores, ids)``, ``delete(ids)``, ``len()`` and ``save()``.

Implementations, picked by :class:`StoreConfig` (``kind``) through :func:`open_store`:

- ``faiss`` (the default, embedded): :mod:`retrievers.faiss_store`; a collection is a folder of
  plain files under the store's ``path``, held in memory and written by ``save()``; aliases live
  in ``aliases.json`` (replaced atomically);
- ``qdrant``: :mod:`retrievers.qdrant_store`; a collection is a Qdrant collection (cosine
  distance, document id in the payload); aliases are Qdrant collection aliases. Without a URL it
  runs qdrant-client's local mode in the ``path`` folder (no server); with ``url`` (or the
  environment variable :data:`URL_ENV`) it talks to a server or cluster, with the API key from
  :data:`API_KEY_ENV` (never from a file).

Only :mod:`retrievers.faiss_index` imports faiss and only :mod:`retrievers.qdrant_store` imports
qdrant_client (tests/test_import_rules.py checks it); everything else goes through this module.

Vectors are compared by inner product; Qdrant's cosine distance normalises vectors on insert, so
the two agree on L2-normalised vectors (every encoder here normalises by default).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from kb_sources.plugins import Registry, load_target
from retrievers.base import Progress
from retrievers.errors import RetrieverError, unknown_name

#: Environment variable with the Qdrant server or cluster URL (``http://host:6333``).
URL_ENV = "KBCURATE_QDRANT_URL"
#: Environment variable with the Qdrant API key (never stored in a file of the repository).
API_KEY_ENV = "KBCURATE_QDRANT_API_KEY"

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_MAX = 120


class StoreKind(StrEnum):
    """Vector-store engines (see the module docstring)."""

    FAISS = "faiss"
    QDRANT = "qdrant"


@dataclass(frozen=True)
class VectorStoreSpec:
    """One registered vector-store engine: its kind and the ``module:Class`` of its
    :class:`VectorStore`, imported only when a store of that kind is opened."""

    name: str
    target: str
    description: str = ""


#: The vector-store engines (issue 27: one registry mechanism, kb_sources/plugins.py).
VECTOR_STORES: Registry[VectorStoreSpec] = Registry("vector store", [
    VectorStoreSpec(StoreKind.FAISS.value, "retrievers.faiss_store:FaissStore",
                    "FAISS files in the workspace (default)"),
    VectorStoreSpec(StoreKind.QDRANT.value, "retrievers.qdrant_store:QdrantStore",
                    "a Qdrant server, cluster or local folder (pip install 'kbcurate[qdrant]')"),
], error=unknown_name)


class Neighbours(NamedTuple):
    """What :meth:`VectorCollection.search` returns, one row per query.

    Attributes:
        scores: Per query, the scores (float32, descending), shape (k_found,).
        ids: Per query, the document ids in the same order.
    """

    scores: list[np.ndarray]
    ids: list[list[str]]


@dataclass(frozen=True)
class StoreConfig:
    """Which vector store, and its settings.

    Attributes:
        kind: :class:`StoreKind` name, ``"faiss"`` (default) or ``"qdrant"``.
        path: Folder of the store: FAISS collections, or Qdrant's local mode (when no URL).
        url: Qdrant server or cluster URL; ``None`` reads :data:`URL_ENV`, and without it the
            store runs in local mode at ``path``.
        exact: Qdrant: exact (brute-force) search, the equivalent of FAISS ``flat``; local mode
            is always exact.
        hnsw_m: HNSW links per node (Qdrant ``m``; FAISS ``hnsw_m``).
        ef_construction: HNSW build-time candidate list.
        ef_search: HNSW search-time candidate list (Qdrant ``hnsw_ef``).
        index: FAISS index kind ("auto", "flat", "ivf", "hnsw"); see
            :class:`retrievers.faiss_index.IndexConfig`.
        batch_size: Vectors per upsert request (Qdrant).
        timeout: Seconds a Qdrant request may take.
        namespace: First part of collection names (:func:`collection_name`): keeps the
            collections of two workspaces on one server apart.
    """

    kind: str = "faiss"
    path: str | None = None
    url: str | None = None
    exact: bool = False
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 128
    index: str = "auto"
    batch_size: int = 1024
    timeout: int = 60
    namespace: str = "kbcurate"

    def __post_init__(self) -> None:
        try:
            kind = StoreKind(str(self.kind).lower())
        except ValueError:
            raise unknown_name("vector store", self.kind, list(StoreKind)) from None
        object.__setattr__(self, "kind", kind.value)
        for name in ("hnsw_m", "ef_construction", "ef_search", "batch_size", "timeout"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise RetrieverError(f"StoreConfig.{name} must be an integer >= 1, got "
                                     f"{value!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoreConfig:
        """Build from a plain table, refusing unknown keys with the list of known ones.

        Raises:
            RetrieverError: An unknown key or value.
        """
        known = [f.name for f in fields(cls)]
        for key in data:
            if key not in known:
                raise unknown_name("vector store setting", key, known)
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain table (no secret is ever part of it)."""
        return asdict(self)

    def resolved_url(self) -> str | None:
        """``url``, else :data:`URL_ENV` from the environment, else ``None`` (local mode)."""
        return self.url or os.environ.get(URL_ENV) or None


@runtime_checkable
class VectorCollection(Protocol):
    """Vectors under document ids, searched by inner product (cosine on unit vectors)."""

    name: str
    dim: int

    def __len__(self) -> int:
        """Number of vectors."""
        ...

    def add(self, ids: list[str], vectors: np.ndarray, *, progress: Progress = False) -> None:
        """Add (or, for Qdrant, overwrite) vectors of shape (len(ids), dim) under ``ids``."""
        ...

    def search(self, queries: np.ndarray, k: int) -> Neighbours:
        """Top-``k`` documents for each query of shape (q, dim), best first."""
        ...

    def delete(self, ids: list[str]) -> int:
        """Remove the vectors of ``ids`` (unknown ids are ignored); returns how many went."""
        ...

    def save(self) -> None:
        """Make every change durable (FAISS writes its files; Qdrant writes as it goes)."""
        ...


@runtime_checkable
class VectorStore(Protocol):
    """Named collections and the aliases that point at them."""

    config: StoreConfig

    def create(self, name: str, dim: int) -> VectorCollection:
        """A new, empty collection ``name`` (an existing one of that name is replaced)."""
        ...

    def open(self, name: str) -> VectorCollection:
        """The collection called ``name``, or the one the alias ``name`` points at."""
        ...

    def drop(self, name: str) -> None:
        """Delete collection ``name`` (nothing when it does not exist)."""
        ...

    def collections(self) -> list[str]:
        """Names of the collections, sorted."""
        ...

    def resolve(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or ``None``."""
        ...

    def switch(self, alias: str, name: str) -> str | None:
        """Point ``alias`` at collection ``name`` in one atomic step; returns the previous one."""
        ...

    def close(self) -> None:
        """Release the engine (files, client)."""
        ...


def open_store(config: StoreConfig | dict[str, Any] | None = None) -> VectorStore:
    """The :class:`VectorStore` that ``config`` names.

    Args:
        config: A :class:`StoreConfig`, a plain table of its fields, or ``None`` (FAISS).

    Raises:
        RetrieverError: Unknown kind or setting; a missing extra or an unreachable server (the
            message names the setting and how to fix it).
    """
    if config is None:
        config = StoreConfig()
    elif isinstance(config, dict):
        config = StoreConfig.from_dict(config)
    return load_target(VECTOR_STORES.get(StoreKind(config.kind).value).target)(config)


def collection_name(model: str, backend: str = "torch", precision: str = "fp32",
                    *, namespace: str = "kbcurate") -> str:
    """The collection of one model version's vectors made with one backend and precision.

    Names keep letters, digits, ``_ . -`` only, with a short hash of the raw parts so two
    versions whose names differ only in other characters never share a collection, e.g.
    ``kbcurate__disease_gene-edel_1__torch__fp32__5c1e0a9b``.
    """
    raw = "\x1f".join((namespace, model, backend, precision))
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    parts = [_NAME_CHARS.sub("_", p).strip("_")[:40] or "_" for p in
             (namespace, Path(model).name or model, backend, precision)]
    return "__".join([*parts, digest])[:_NAME_MAX]


def check_name(name: object, what: str = "collection") -> str:
    """``name`` when it is a usable collection or alias name.

    Raises:
        RetrieverError: Empty, too long, or with characters outside ``A-Z a-z 0-9 _ . -``.
    """
    if not isinstance(name, str) or not name or len(name) > _NAME_MAX \
            or _NAME_CHARS.search(name) or name.startswith("."):
        raise RetrieverError(
            f"{what} name {name!r} is not usable: expected 1-{_NAME_MAX} characters of "
            "A-Z a-z 0-9 _ . - not starting with '.'; build one with "
            "retrievers.vector_store.collection_name(model, backend, precision)")
    return name


def check_vectors(ids: list[str], vectors: np.ndarray, dim: int, collection: str) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 array of shape (len(ids), dim), for unique ids.

    Raises:
        RetrieverError: Count or shape mismatch, or an id twice in ``ids``.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape != (len(ids), dim):
        raise RetrieverError(
            f"got {len(ids)} ids and vectors of shape {vectors.shape}; expected shape "
            f"({len(ids)}, {dim}): one {dim}-d vector per id")
    if len(set(ids)) != len(ids):
        raise RetrieverError(f"{len(ids) - len(set(ids))} id(s) occur twice in one add to "
                             f"collection {collection!r}; ids must be unique")
    return vectors
