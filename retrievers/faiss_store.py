"""The embedded vector store: FAISS collections as folders of plain files (the default).

A :class:`FaissStore` lives in one folder (``StoreConfig.path``)::

    <path>/<collection>/      index.faiss, ids.json, params.json (retrievers.faiss_index)
    <path>/aliases.json       {"alias": "collection", ...}, replaced atomically

A :class:`FaissCollection` wraps today's :class:`~retrievers.faiss_index.VectorIndex`, unchanged:
vectors are held in memory and written by ``save()`` into a temporary sibling folder swapped in
when complete (:mod:`retrievers.saved`). Adding an id that is already there replaces its vector,
as a Qdrant upsert does; ``delete`` refills the index with the kept vectors (O(N), for
occasional deletes).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from retrievers.base import Progress, progress_reporter
from retrievers.errors import RetrieverError
from retrievers.faiss_index import PARAMS, IndexConfig, VectorIndex
from retrievers.saved import complete_folder
from retrievers.vector_store import Neighbours, StoreConfig, check_name, check_vectors

logger = logging.getLogger(__name__)

ALIASES = "aliases.json"


class FaissCollection:
    """One FAISS index under a name, saved to ``folder``.

    Args:
        name: Collection name.
        index: The index (empty or loaded).
        folder: Where :meth:`save` writes; ``None``: only ``save(folder)`` with a folder.
    """

    def __init__(self, name: str, index: VectorIndex, folder: Path | None = None) -> None:
        self.name = name
        self.index = index
        self.folder = folder

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self.index.dim

    @property
    def ids(self) -> list[str]:
        """Document ids in position order."""
        return self.index.ids

    def __len__(self) -> int:
        return len(self.index)

    def add(self, ids: list[str], vectors: np.ndarray, *, progress: Progress = False) -> None:
        """Add vectors of shape (len(ids), dim); an id already present gets the new vector.

        Raises:
            RetrieverError: Shape or count mismatch, or an id twice in ``ids``.
        """
        ids = list(ids)
        vectors = check_vectors(ids, vectors, self.dim, self.name)
        present = set(self.index.ids).intersection(ids)
        if present:
            self.index.remove(sorted(present))
        with progress_reporter(len(ids), progress, f"adding to {self.name}") as advance:
            # one call: the first add decides an ``auto`` index's kind and trains IVF cells
            self.index.add(ids, vectors)
            advance(len(ids))

    def search(self, queries: np.ndarray, k: int) -> Neighbours:
        """Top-``k`` inner products per query of shape (q, dim), best first."""
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        scores, positions = self.index.search(queries, k)  # (q, k), (q, k)
        ids = self.index.ids
        out_scores, out_ids = [], []
        for row_scores, row_pos in zip(scores, positions, strict=True):
            found = row_pos >= 0
            out_scores.append(np.asarray(row_scores[found], dtype=np.float32))
            out_ids.append([ids[p] for p in row_pos[found]])
        return Neighbours(out_scores, out_ids)

    def delete(self, ids: list[str]) -> int:
        """Remove the vectors of ``ids``; returns how many were there."""
        return self.index.remove(ids)

    def save(self, folder: str | Path | None = None) -> None:
        """Write the index to ``folder`` (default: the collection's own), all at once.

        Raises:
            RetrieverError: No folder given and the collection has none.
        """
        target = Path(folder) if folder is not None else self.folder
        if target is None:
            raise RetrieverError(f"collection {self.name!r} has no folder: pass save(folder)")
        self.index.save(target)


class FaissStore:
    """FAISS collections and aliases in the folder ``config.path``.

    Raises:
        RetrieverError: ``config.path`` is not set.
    """

    def __init__(self, config: StoreConfig) -> None:
        if not config.path:
            raise RetrieverError("vector store 'faiss' needs a folder: set StoreConfig.path "
                                 "(the workspace's indexes folder, for instance)")
        self.config = config
        self.root = Path(config.path)
        self.index_config = IndexConfig(kind=config.index, hnsw_m=config.hnsw_m,
                                        ef_construction=config.ef_construction,
                                        ef_search=config.ef_search)

    def create(self, name: str, dim: int) -> FaissCollection:
        """A new, empty collection; it replaces one of the same name when saved."""
        check_name(name)
        if name in self._aliases():
            raise RetrieverError(f"{name!r} is an alias in {self.root}; pick another "
                                 "collection name")
        return FaissCollection(name, VectorIndex(dim, self.index_config), self.root / name)

    def open(self, name: str) -> FaissCollection:
        """The collection ``name`` (or the alias ``name``'s), loaded from its folder.

        Raises:
            RetrieverError: No such collection or alias; the message lists those there are.
        """
        target = self.resolve(name) or check_name(name)
        folder = complete_folder(self.root / target, PARAMS)
        if not (folder / PARAMS).is_file():
            raise RetrieverError(
                f"no collection or alias {name!r} in the FAISS store {self.root}; collections: "
                f"{', '.join(self.collections()) or '(none)'}; aliases: "
                f"{', '.join(sorted(self._aliases())) or '(none)'}")
        return FaissCollection(target, VectorIndex.load(folder), self.root / target)

    def drop(self, name: str) -> None:
        """Delete collection ``name`` and the aliases pointing at it."""
        shutil.rmtree(self.root / check_name(name), ignore_errors=True)
        aliases = {a: c for a, c in self._aliases().items() if c != name}
        self._write_aliases(aliases)

    def collections(self) -> list[str]:
        """Names of the saved collections."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if not p.name.startswith(".") and (p / PARAMS).is_file())

    def resolve(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or ``None``."""
        return self._aliases().get(alias)

    def switch(self, alias: str, name: str) -> str | None:
        """Point ``alias`` at the saved collection ``name`` (one atomic file replace).

        Raises:
            RetrieverError: ``name`` is not a saved collection, or ``alias`` is a collection.
        """
        check_name(alias, "alias")
        if name not in self.collections():
            raise RetrieverError(f"cannot point alias {alias!r} at {name!r}: no such saved "
                                 f"collection in {self.root} (save() it first); collections: "
                                 f"{', '.join(self.collections()) or '(none)'}")
        if alias in self.collections():
            raise RetrieverError(f"alias {alias!r} would hide the collection of that name in "
                                 f"{self.root}; pick another alias")
        aliases = self._aliases()
        before = aliases.get(alias)
        aliases[alias] = name
        self._write_aliases(aliases)
        logger.info("alias %s: %s -> %s", alias, before, name)
        return before

    def close(self) -> None:
        """Nothing to release: collections are plain files."""

    def _aliases(self) -> dict[str, str]:
        path = self.root / ALIASES
        if not path.is_file():
            return {}
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise RetrieverError(f"{path} is not valid JSON ({exc}); fix or delete it and "
                                 "switch the aliases again") from exc

    def _write_aliases(self, aliases: dict[str, str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{ALIASES}.{os.getpid()}"
        tmp.write_text(json.dumps(aliases, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.root / ALIASES)
