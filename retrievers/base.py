"""The retriever interface: documents in, ranked hits out.

A retriever knows documents only as ``(doc_id, text)`` pairs and returns :class:`Hit` lists. It
knows nothing about knowledge bases, entities or workspaces. Every engine (BM25, dense, hybrid)
implements :class:`Retriever`; callers build one through :mod:`retrievers.registry`.

Behaviour shared by every retriever (the contract tests check it):

- ``search(query, k)`` returns at most ``k`` hits sorted by score, descending, ranked 1..n.
- An empty index returns ``[]`` (and logs a warning); ``k`` larger than the index returns every
  document that scores (BM25 leaves out documents sharing no term with the query).
- ``k <= 0`` (or a non-int ``k``) raises :class:`~retrievers.errors.RetrieverError`.
- ``add(docs)`` appends documents; adding an id that is already indexed is an error
  (rebuild with ``index(docs)``: with an embedding cache only changed texts are re-encoded).
- ``save(folder)`` writes plain files (npy / json / faiss), never pickle, plus a
  ``retriever.json`` manifest, into a temporary folder swapped in when complete;
  ``load(folder)`` restores identical results.
"""

from __future__ import annotations

import json
import logging
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from retrievers.errors import RetrieverError, check_k
from retrievers.saved import (
    FORMAT_VERSION,
    MANIFEST,
    clean_leftovers,
    complete_folder,
    read_manifest,
    replace_folder,
    same_save,
    write_json,
)

logger = logging.getLogger(__name__)

#: One document: (doc id, text).
Doc = tuple[str, str]
#: Progress callback: ``fn(done, total)``, called as work advances.
ProgressFn = Callable[[int, int], None]
#: ``True`` shows a tqdm bar, ``False`` nothing, a callable receives ``(done, total)``.
Progress = bool | ProgressFn

_LOAD_ATTEMPTS = 3


@dataclass(frozen=True)
class Hit:
    """One ranked document.

    Attributes:
        doc_id: The document id given at indexing time.
        score: Retriever score; higher is better. Only comparable within one ranking.
        rank: 1-based position in the ranking.
        retriever: Label of what produced the hit ("bm25", "dense:<model id>", "hybrid:rrf").
    """

    doc_id: str
    score: float
    rank: int
    retriever: str = ""


def coerce_docs(docs: Iterable[Doc]) -> tuple[list[str], list[str]]:
    """Split ``(doc_id, text)`` pairs into ids and texts, validating them.

    Args:
        docs: Pairs of (id, text). Integer ids (PMIDs) are turned into strings.

    Returns:
        ``(ids, texts)``, two lists of equal length.

    Raises:
        RetrieverError: An item is not a pair, an id is empty, a text is not a string, or an id
            occurs twice.
    """
    ids: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    for n, item in enumerate(docs, start=1):
        if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) != 2:
            raise RetrieverError(
                f"document #{n} is {type(item).__name__} {str(item)[:60]!r}; expected a "
                "(doc_id, text) pair: pass [(id, text), ...]"
            )
        doc_id, text = item
        if isinstance(doc_id, Integral) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise RetrieverError(
                f"document #{n} has id {doc_id!r}; expected a non-empty string id such as a PMID"
            )
        if not isinstance(text, str):
            raise RetrieverError(
                f"document {doc_id!r} has text of type {type(text).__name__}; expected a string "
                "(use '' for a document without text)"
            )
        if doc_id in seen:
            raise RetrieverError(
                f"document id {doc_id!r} occurs twice in one batch; ids must be unique: "
                "drop or merge the duplicates"
            )
        seen.add(doc_id)
        ids.append(doc_id)
        texts.append(text)
    return ids, texts


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, best first; ties keep index order.

    Args:
        scores: Scores of every document, shape (n,).
        k: How many positions to return (clamped to n).

    Returns:
        Integer positions, shape (min(k, n),).
    """
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    candidates = np.arange(n) if k >= n else np.argpartition(-scores, k - 1)[:k]
    if k < n:  # include every document tied with the k-th score, so ties break by position
        threshold = scores[candidates].min()
        candidates = np.flatnonzero(scores >= threshold)
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][:k]


def make_hits(pairs: Iterable[tuple[str, float]], label: str, k: int | None = None) -> list[Hit]:
    """Rank ``(doc_id, score)`` pairs into hits: score descending, ranks 1..n.

    Args:
        pairs: Document ids with scores, in any order; ties keep their given order.
        label: The ``retriever`` label stored on every hit.
        k: Keep at most this many hits (all when None).

    Returns:
        The ranked hits.
    """
    ranked = sorted(pairs, key=lambda p: -p[1])
    if k is not None:
        ranked = ranked[:k]
    return [Hit(d, float(s), r, label) for r, (d, s) in enumerate(ranked, start=1)]


@contextmanager
def progress_reporter(total: int, progress: Progress, desc: str, min_bar: int = 500
                      ) -> Iterator[Callable[[int], None]]:
    """Report progress of a long step to a tqdm bar or a callback.

    Args:
        total: Units of work in the step.
        progress: ``True`` for a tqdm bar, ``False`` for silence, or ``fn(done, total)``.
        desc: Label of the tqdm bar.
        min_bar: Show the bar only for at least this many units (short steps stay quiet).

    Yields:
        ``advance(n)``: call it after finishing ``n`` more units.
    """
    done = 0
    bar = None
    if progress is True and total >= min_bar:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=desc, leave=False)

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if bar is not None:
            bar.update(n)
        elif callable(progress):
            progress(done, total)

    try:
        yield advance
    finally:
        if bar is not None:
            bar.close()


class Retriever(ABC):
    """Index ``(doc_id, text)`` documents and rank them for text queries.

    Subclasses implement ``_reset``, ``_add``, ``_search``, ``_save``, ``_load`` and
    ``from_options``; this base class validates input and keeps the id list.
    """

    #: Registry name of the retriever type ("bm25", "dense", "hybrid").
    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._id_set: set[str] = set()

    @classmethod
    @abstractmethod
    def from_options(cls, **options: Any) -> Self:
        """Build an empty retriever from plain keyword options (see the registry)."""

    @property
    def label(self) -> str:
        """What produced a hit; stored on every :class:`Hit` (the model version for dense)."""
        return self.name

    @property
    def doc_ids(self) -> list[str]:
        """Indexed document ids, in indexing order."""
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._id_set

    def index(self, docs: Iterable[Doc], *, progress: Progress = True) -> None:
        """Replace the index with ``docs``.

        Args:
            docs: ``(doc_id, text)`` pairs; ids unique.
            progress: ``True`` for a progress bar, ``False`` for none, or ``fn(done, total)``.

        Raises:
            RetrieverError: A document is malformed or an id repeats.
        """
        ids, texts = coerce_docs(docs)
        self._reset()
        self._set_ids([])
        if ids:
            self._add(ids, texts, progress)
        self._set_ids(ids)
        logger.info("%s: indexed %d documents", self.label, len(ids))

    def add(self, docs: Iterable[Doc], *, progress: Progress = True) -> None:
        """Add new documents to the index.

        Args:
            docs: ``(doc_id, text)`` pairs whose ids are not indexed yet.
            progress: As for :meth:`index`.

        Raises:
            RetrieverError: A document is malformed or its id is already indexed.
        """
        ids, texts = coerce_docs(docs)
        clash = [i for i in ids if i in self._id_set]
        if clash:
            raise RetrieverError(
                f"{len(clash)} document id(s) already indexed (first: {clash[0]!r}); add() only "
                "takes new documents: to change a text, rebuild with index(all_docs)"
            )
        if ids:
            self._add(ids, texts, progress)
            self._set_ids(self._ids + ids)
        logger.info("%s: added %d documents (%d in all)", self.label, len(ids), len(self))

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """Rank documents for one query.

        Args:
            query: Query text.
            k: Maximum number of hits; larger than the index returns all matching documents.

        Returns:
            At most ``k`` hits, score descending, ranks 1..n; ``[]`` for an empty index.

        Raises:
            RetrieverError: ``k`` is not a positive integer or the query is not a string.
        """
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """Rank documents for several queries at once (faster than a loop for dense models).

        Args:
            queries: Query texts.
            k: Maximum number of hits per query.

        Returns:
            One hit list per query, as :meth:`search` returns.

        Raises:
            RetrieverError: ``k`` is not a positive integer or a query is not a string.
        """
        k = check_k(k)
        queries = list(queries)
        for q in queries:
            if not isinstance(q, str):
                raise RetrieverError(
                    f"query {q!r} is of type {type(q).__name__}; expected a string"
                )
        if not self._ids:
            logger.warning("%s: search on an empty index returns no hits; call index(docs) "
                           "first", self.label)
            return [[] for _ in queries]
        if not queries:
            return []
        return self._search(queries, min(k, len(self._ids)))

    def save(self, folder: str | Path) -> Path:
        """Write the index to ``folder`` as plain files (never pickle), all at once.

        The files go to a temporary sibling that replaces ``folder`` only when complete
        (:mod:`retrievers.saved`): a save that fails or is killed leaves the previous index.

        Args:
            folder: Target folder; created if missing, replaced if present.

        Returns:
            The folder.
        """
        folder = Path(folder)
        with replace_folder(folder) as tmp:
            self.write_to(tmp)
        logger.info("%s: saved %d documents to %s", self.label, len(self), folder)
        return folder

    def write_to(self, folder: Path) -> None:
        """Write the index files into ``folder`` in place, the manifest last (no swap: callers
        use :meth:`save`, or write inside their own :func:`~retrievers.saved.replace_folder`)."""
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "ids.json", self._ids)
        manifest = {"retriever": self.name, "format": FORMAT_VERSION, "documents": len(self),
                    "label": self.label, "save_id": secrets.token_hex(8), **self._save(folder)}
        write_json(folder / MANIFEST, manifest)

    @classmethod
    def load(cls, folder: str | Path) -> Self:
        """Read an index written by :meth:`save` (retried when a new save is swapped in while
        reading; a save that was killed mid-swap is recovered, see :mod:`retrievers.saved`).

        Args:
            folder: Folder passed to ``save``.

        Returns:
            The retriever, giving the same results as the one saved.

        Raises:
            RetrieverError: The folder holds no complete saved retriever, or one of another type.
        """
        folder = Path(folder)
        clean_leftovers(folder, MANIFEST)
        for _ in range(_LOAD_ATTEMPTS):
            path = complete_folder(folder, MANIFEST)
            manifest = read_manifest(path)
            if manifest["retriever"] != cls.name:
                raise RetrieverError(
                    f"{folder} holds a {manifest['retriever']!r} retriever, not {cls.name!r}: "
                    "load it with retrievers.registry.load_retriever(folder)")
            try:
                obj = cls._load(path, manifest)
                obj._set_ids(json.loads((path / "ids.json").read_text(encoding="utf-8")))
            except Exception:
                if same_save(path, manifest):
                    raise
            else:
                if same_save(path, manifest):  # no new save was swapped in meanwhile
                    return obj
            logger.info("%s was replaced while loading; reading the new index", folder)
        raise RetrieverError(f"{folder} was replaced {_LOAD_ATTEMPTS} times while loading; "
                             "retry when the index build writing it has finished")

    def _set_ids(self, ids: list[str]) -> None:
        self._ids = list(ids)
        self._id_set = set(ids)

    @abstractmethod
    def _reset(self) -> None:
        """Drop every indexed document."""

    @abstractmethod
    def _add(self, ids: list[str], texts: list[str], progress: Progress) -> None:
        """Index new documents (ids already validated and unseen)."""

    @abstractmethod
    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Rank for validated queries; ``1 <= k <= len(self)``."""

    @abstractmethod
    def _save(self, folder: Path) -> dict[str, Any]:
        """Write engine files to ``folder``; return the settings to store in the manifest."""

    @classmethod
    @abstractmethod
    def _load(cls, folder: Path, manifest: dict[str, Any]) -> Self:
        """Rebuild from ``folder`` and its manifest (ids are restored by the caller)."""
