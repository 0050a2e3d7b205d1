"""The Qdrant vector store: one Qdrant collection per model version, aliases for the switch.

Needs the ``qdrant`` extra (``pip install 'kbcurate[qdrant]'``). Where it runs:

- **local mode** (no URL): qdrant-client's embedded engine in the folder ``StoreConfig.path``;
  no server, exact (brute-force) search, one process at a time per folder. Meant for tests and
  small workspaces; qdrant-client itself advises a server above some 20,000 points.
- **server or cluster**: ``StoreConfig.url`` or the environment variable ``KBCURATE_QDRANT_URL``
  (``http://qdrant:6333``), with the API key from ``KBCURATE_QDRANT_API_KEY`` (never from a
  file). Collections use HNSW (``hnsw_m``, ``ef_construction``; ``ef_search`` per query), or
  exact search with ``StoreConfig.exact``.

Each collection uses cosine distance (Qdrant normalises vectors on insert, so on unit vectors
scores equal FAISS inner products). Qdrant point ids must be integers or UUIDs: a document id maps
to ``uuid5(NAMESPACE, doc_id)`` (:func:`point_id`), the same on every run, and the document id
itself is stored in the payload (``doc_id``). Upserts go in batches of ``batch_size`` with a
progress bar (or callback). :meth:`QdrantStore.switch` repoints an alias with one
``update_collection_aliases`` call (delete + create in one request), which Qdrant applies
atomically: a search by alias sees the old collection or the new one, never a mix.

Local-mode clients are shared per folder within a process (qdrant-client locks the folder), and
closed when the last store using the folder is closed.
"""

from __future__ import annotations

import atexit
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.base import Progress, progress_reporter
from retrievers.errors import RetrieverError
from retrievers.vector_store import (
    API_KEY_ENV,
    URL_ENV,
    Neighbours,
    StoreConfig,
    check_name,
    check_vectors,
)

logger = logging.getLogger(__name__)

#: Namespace of the UUIDs that stand for document ids (:func:`point_id`).
NAMESPACE = uuid.UUID("5b0c1d2e-6f7a-4b8c-9d0e-1f2a3b4c5d6e")
PAYLOAD_KEY = "doc_id"

_local_lock = threading.Lock()
_local_clients: dict[str, list[Any]] = {}  # resolved folder -> [client, users]


def _close_local_clients() -> None:
    """Close the local-mode clients still open (at exit: qdrant-client's own finaliser fails
    once the interpreter is shutting down)."""
    with _local_lock:
        for client, _ in _local_clients.values():
            client.close()
        _local_clients.clear()


def point_id(doc_id: str) -> str:
    """The Qdrant point id (a UUID string) of a document id; deterministic."""
    return str(uuid.uuid5(NAMESPACE, doc_id))


def _qdrant() -> tuple[Any, Any]:
    try:
        from qdrant_client import QdrantClient, models
    except ImportError as exc:
        raise RetrieverError(
            "vector_store = 'qdrant' needs the qdrant-client package, which is not installed "
            f"({exc}); install the extra: pip install 'kbcurate[qdrant]', or set the vector "
            "store back to 'faiss'") from exc
    return QdrantClient, models


def _env_api_key() -> str | None:
    import os

    return os.environ.get(API_KEY_ENV) or None


class QdrantCollection:
    """One Qdrant collection (or the one an alias points at) seen as a vector collection.

    Args:
        store: The store it belongs to (its client and settings).
        name: The collection's name (resolved, not an alias).
        dim: Vector dimension.
        address: What requests name: the alias it was opened by (so a search always sees the
            collection the alias points at now), else ``name``.
    """

    def __init__(self, store: QdrantStore, name: str, dim: int, address: str | None = None
                 ) -> None:
        self.store = store
        self.name = name
        self.dim = dim
        self.address = address or name

    def __len__(self) -> int:
        return int(self.store.call("count", self.address, exact=True).count)

    def add(self, ids: list[str], vectors: np.ndarray, *, progress: Progress = False) -> None:
        """Upsert vectors of shape (len(ids), dim) in batches; an existing id is overwritten.

        Raises:
            RetrieverError: Shape or count mismatch, or an id twice in ``ids``.
        """
        ids = list(ids)
        vectors = check_vectors(ids, vectors, self.dim, self.name)
        models = self.store.models
        size = self.store.config.batch_size
        with progress_reporter(len(ids), progress, f"upserting into {self.name}") as advance:
            for start in range(0, len(ids), size):
                chunk = ids[start:start + size]
                batch = models.Batch(ids=[point_id(d) for d in chunk],
                                     vectors=vectors[start:start + size].tolist(),
                                     payloads=[{PAYLOAD_KEY: d} for d in chunk])
                self.store.call("upsert", self.address, points=batch, wait=True)
                advance(len(chunk))

    def search(self, queries: np.ndarray, k: int) -> Neighbours:
        """Top-``k`` cosine similarities per query of shape (q, dim), best first."""
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        if not len(queries):
            return Neighbours([], [])
        models = self.store.models
        params = self.store.search_params()
        requests = [models.QueryRequest(query=q.tolist(), limit=k, params=params,
                                        with_payload=[PAYLOAD_KEY]) for q in queries]
        responses = self.store.call("query_batch_points", self.address, requests=requests)
        scores = [np.array([p.score for p in r.points], dtype=np.float32) for r in responses]
        ids = [[p.payload[PAYLOAD_KEY] for p in r.points] for r in responses]
        return Neighbours(scores, ids)

    def delete(self, ids: list[str]) -> int:
        """Remove the vectors of ``ids``; returns how many were there."""
        if not ids:
            return 0
        before = len(self)
        selector = self.store.models.PointIdsList(points=[point_id(d) for d in ids])
        self.store.call("delete", self.address, points_selector=selector, wait=True)
        return before - len(self)

    def save(self, folder: Any = None) -> None:
        """Nothing to do: every upsert and delete was written with ``wait=True``."""


class QdrantStore:
    """Collections and aliases in Qdrant: local mode at ``config.path`` or a server at the URL.

    Raises:
        RetrieverError: qdrant-client missing; neither a URL nor a path; the server cannot be
            reached or does not answer as Qdrant (the message names the setting to fix).
    """

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        client_cls, self.models = _qdrant()
        self.url = config.resolved_url()
        self._local_key: str | None = None
        if self.url:
            self.client = self._remote(client_cls)
        elif config.path:
            self.client = self._local(client_cls, Path(config.path))
        else:
            raise RetrieverError(
                "vector_store = 'qdrant' needs a server or a folder: set the environment "
                f"variable {URL_ENV} (e.g. http://localhost:6333) or StoreConfig.url, or "
                "StoreConfig.path for local mode")

    @property
    def where(self) -> str:
        """The server URL or the local-mode folder, for messages."""
        return self.url or f"local mode at {self.config.path}"

    def _remote(self, client_cls: Any) -> Any:
        setting = "StoreConfig.url" if self.config.url else f"the environment variable {URL_ENV}"
        try:
            client = client_cls(url=self.url, api_key=_env_api_key(),
                                timeout=self.config.timeout)
            client.get_collections()  # a request now: a wrong URL fails here, not mid-build
        except Exception as exc:  # httpx, grpc and qdrant errors all mean the same here
            raise RetrieverError(
                f"cannot reach a Qdrant server at {self.url!r} ({setting}): "
                f"{type(exc).__name__}: {str(exc)[:200]}. Start the server, fix the URL (e.g. "
                f"http://localhost:6333), set {API_KEY_ENV} when the server needs a key, or "
                f"unset {URL_ENV} to use local mode") from exc
        logger.info("Qdrant server at %s", self.url)
        return client

    def _local(self, client_cls: Any, path: Path) -> Any:
        key = str(path.resolve())
        with _local_lock:
            entry = _local_clients.get(key)
            if entry is None:
                try:
                    entry = [client_cls(path=key), 0]
                except RuntimeError as exc:  # another process holds the folder's lock
                    raise RetrieverError(
                        f"Qdrant local mode cannot open {key}: {exc} Close the other process, "
                        f"or run a Qdrant server and set {URL_ENV}") from exc
                if not _local_clients:
                    atexit.register(_close_local_clients)  # before interpreter teardown
                _local_clients[key] = entry
            entry[1] += 1
        self._local_key = key
        return entry[0]

    def close(self) -> None:
        """Release the client (a shared local-mode client when its last user closes)."""
        if self._local_key is None:
            self.client.close()
            return
        with _local_lock:
            entry = _local_clients.get(self._local_key)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    entry[0].close()
                    del _local_clients[self._local_key]
        self._local_key = None

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``client.<method>(*args, **kwargs)`` with a server's failure turned into a
        :class:`RetrieverError` naming where the store is."""
        try:
            return getattr(self.client, method)(*args, **kwargs)
        except (ValueError, RetrieverError):
            raise
        except Exception as exc:
            raise RetrieverError(f"Qdrant ({self.where}) failed in {method}: "
                                 f"{type(exc).__name__}: {str(exc)[:300]}") from exc

    def search_params(self) -> Any:
        """Per-query parameters: exact or ``hnsw_ef`` on a server; none in local mode (always
        exact there, and qdrant-client warns about ignored parameters)."""
        if not self.url:
            return None
        return self.models.SearchParams(hnsw_ef=self.config.ef_search, exact=self.config.exact)

    def create(self, name: str, dim: int) -> QdrantCollection:
        """A new, empty collection ``name`` (cosine); an existing one of that name is dropped.

        Raises:
            RetrieverError: A bad name, or ``name`` is an alias.
        """
        check_name(name)
        if name in self._aliases():
            raise RetrieverError(f"{name!r} is an alias in Qdrant ({self.where}); pick another "
                                 "collection name")
        self.drop(name)
        models = self.models
        self.call("create_collection", name,
                  vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
                  hnsw_config=models.HnswConfigDiff(m=self.config.hnsw_m,
                                                    ef_construct=self.config.ef_construction))
        logger.info("Qdrant collection %s (%d-d, cosine) created in %s", name, dim, self.where)
        return QdrantCollection(self, name, dim)

    def open(self, name: str) -> QdrantCollection:
        """The collection ``name``, or the one the alias ``name`` points at.

        Raises:
            RetrieverError: No such collection or alias; the message lists those there are.
        """
        target = self.resolve(name) or name
        if target not in self.collections():
            raise RetrieverError(
                f"no collection or alias {name!r} in Qdrant ({self.where}); collections: "
                f"{', '.join(self.collections()) or '(none)'}; aliases: "
                f"{', '.join(sorted(self._aliases())) or '(none)'}")
        info = self.call("get_collection", target)
        vectors = info.config.params.vectors
        return QdrantCollection(self, target, int(vectors.size), address=name)

    def drop(self, name: str) -> None:
        """Delete collection ``name`` (its aliases go with it)."""
        if name in self.collections():
            self.call("delete_collection", name)

    def collections(self) -> list[str]:
        """Names of the collections."""
        return sorted(c.name for c in self.call("get_collections").collections)

    def _aliases(self) -> dict[str, str]:
        return {a.alias_name: a.collection_name for a in self.call("get_aliases").aliases}

    def resolve(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or ``None``."""
        return self._aliases().get(alias)

    def switch(self, alias: str, name: str) -> str | None:
        """Point ``alias`` at collection ``name`` in one request (delete + create).

        Raises:
            RetrieverError: ``name`` is not a collection, or ``alias`` is a collection.
        """
        check_name(alias, "alias")
        collections = self.collections()
        if name not in collections:
            raise RetrieverError(f"cannot point alias {alias!r} at {name!r}: no such collection "
                                 f"in Qdrant ({self.where}); collections: "
                                 f"{', '.join(collections) or '(none)'}")
        if alias in collections:
            raise RetrieverError(f"alias {alias!r} would hide the collection of that name in "
                                 f"Qdrant ({self.where}); pick another alias")
        before = self.resolve(alias)
        models = self.models
        operations = [models.CreateAliasOperation(create_alias=models.CreateAlias(
            collection_name=name, alias_name=alias))]
        if before is not None:
            operations.insert(0, models.DeleteAliasOperation(
                delete_alias=models.DeleteAlias(alias_name=alias)))
        self.call("update_collection_aliases", change_aliases_operations=operations)
        logger.info("Qdrant alias %s: %s -> %s", alias, before, name)
        return before
