"""BM25 over :class:`~retrievers.tokenize.BiomedTokenizer` tokens, scored by bm25s.

Files written by ``save``: bm25s' own index files under ``bm25s/`` (npy + json), the tokenized
corpus as ``vocab.json`` + ``token_ids.npy`` + ``offsets.npy`` (so ``add`` after ``load`` can
rebuild), ``ids.json`` and the ``retriever.json`` manifest. Never pickle.

BM25 statistics (document frequencies, average length) depend on the whole corpus, so ``add``
re-scores the stored tokens of every document: cheap (seconds for 100k abstracts), no re-reading.
Only documents sharing at least one term with the query are returned.

Reference: Lù, "BM25S: Orders of magnitude faster lexical search via eager sparse scoring" (2024),
https://arxiv.org/abs/2407.03618.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

import numpy as np

from retrievers.base import (
    Hit,
    Progress,
    Retriever,
    progress_reporter,
    top_k_indices,
    write_json,
)
from retrievers.errors import RetrieverError, check_options, unknown_name
from retrievers.tokenize import BiomedTokenizer

logger = logging.getLogger(__name__)


class BM25Method(StrEnum):
    """BM25 variants implemented by bm25s."""

    LUCENE = "lucene"
    ROBERTSON = "robertson"
    ATIRE = "atire"
    BM25L = "bm25l"
    BM25PLUS = "bm25+"


@dataclass(frozen=True)
class BM25Config:
    """BM25 settings.

    Attributes:
        k1: Term-frequency saturation.
        b: Length normalisation.
        method: BM25 variant (:class:`BM25Method` name).
        stopwords: "en", "none" or a tuple of words (see :mod:`retrievers.tokenize`).
        split_compounds: Also index the parts of compound tokens (``EML4-ALK`` -> ``EML4``).
    """

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stopwords: str | tuple[str, ...] = "en"
    split_compounds: bool = True

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "method", BM25Method(str(self.method).lower()).value)
        except ValueError:
            raise unknown_name("BM25 method", self.method, [m.value for m in BM25Method]) from None
        if isinstance(self.stopwords, list):
            object.__setattr__(self, "stopwords", tuple(self.stopwords))

    def tokenizer(self) -> BiomedTokenizer:
        """The tokenizer these settings describe."""
        return BiomedTokenizer(stopwords=self.stopwords, split_compounds=self.split_compounds)


class BM25Retriever(Retriever):
    """Lexical retrieval with BM25 (bm25s) and a tokenizer that keeps variants whole.

    Example:
        >>> r = BM25Retriever()
        >>> r.index([("1", "BRAF V600E in melanoma"), ("2", "BRAF V600K in melanoma")],
        ...         progress=False)
        >>> r.search("BRAF V600E", k=1)[0].doc_id
        '1'
    """

    name = "bm25"

    def __init__(self, config: BM25Config | None = None) -> None:
        super().__init__()
        self.config = config or BM25Config()
        self._tokenize = self.config.tokenizer()
        self._vocab: dict[str, int] = {}
        self._docs: list[np.ndarray] = []  # token ids per document, each (len,) int32
        self._model: Any = None  # bm25s.BM25, built lazily

    @classmethod
    def from_options(cls, **options: Any) -> Self:
        """Build from plain options: ``k1``, ``b``, ``method``, ``stopwords``, ``split_compounds``.

        Raises:
            RetrieverError: An unknown option or value.
        """
        check_options(cls.name, options, BM25Config.__dataclass_fields__)
        return cls(BM25Config(**options))

    def _reset(self) -> None:
        self._vocab, self._docs, self._model = {}, [], None

    def _add(self, ids: list[str], texts: list[str], progress: Progress) -> None:
        with progress_reporter(len(texts), progress, "BM25 tokenize", 20_000) as advance:
            for text in texts:
                tokens = self._tokenize(text)
                ids_ = [self._vocab.setdefault(t, len(self._vocab)) for t in tokens]
                self._docs.append(np.asarray(ids_, dtype=np.int32))
                advance(1)
        self._model = None

    def _scorer(self) -> Any:
        if self._model is None:
            bm25s = _import_bm25s()
            cfg = self.config
            model = bm25s.BM25(k1=cfg.k1, b=cfg.b, method=cfg.method)
            # Pass (token ids, vocab): bm25s' own tokenizer is not used, empty documents are fine
            model.index((_TokenLists(self._docs), dict(self._vocab)), show_progress=False)
            self._model = model
        return self._model

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        model = self._scorer()
        results = []
        for query in queries:
            tokens = [t for t in self._tokenize(query) if t in self._vocab]
            if not tokens:
                results.append([])
                continue
            scores = model.get_scores(tokens)  # (n_docs,)
            top = [i for i in top_k_indices(scores, k) if scores[i] > 0]
            results.append([Hit(self._ids[i], float(scores[i]), r, self.label)
                            for r, i in enumerate(top, start=1)])
        return results

    def _save(self, folder: Path) -> dict[str, Any]:
        if self._docs:
            self._scorer().save(str(folder / "bm25s"), show_progress=False)
        vocab = sorted(self._vocab, key=self._vocab.__getitem__)
        write_json(folder / "vocab.json", vocab)
        lengths = np.array([len(d) for d in self._docs], dtype=np.int64)
        np.save(folder / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]))  # (n + 1,)
        flat = np.concatenate(self._docs) if self._docs else np.empty(0, dtype=np.int32)
        np.save(folder / "token_ids.npy", flat)  # (total tokens,)
        return {"config": asdict(self.config)}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any]) -> Self:
        obj = cls(BM25Config(**manifest["config"]))
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        obj._vocab = {t: i for i, t in enumerate(vocab)}
        offsets = np.load(folder / "offsets.npy", allow_pickle=False)
        flat = np.load(folder / "token_ids.npy", allow_pickle=False)
        obj._docs = [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        if obj._docs:
            obj._model = _load_bm25s(folder / "bm25s")
        return obj


class _TokenLists(list):  # bm25s takes (ids, vocab) only when ids is a list
    """A ``list``-typed view of the token-id arrays, converting one document at a time.

    bm25s reads its ``(corpus_token_ids, vocab)`` input only by ``len`` and iteration (document
    lengths, document frequencies, scores), but checks ``isinstance(ids, list)``. Converting
    every document up front held all postings as Python ints at once (about 60 bytes each:
    12.2M postings at 100k documents); here only the current document is converted.
    """

    def __init__(self, docs: list[np.ndarray]) -> None:
        super().__init__()
        self._docs = docs

    def __len__(self) -> int:
        return len(self._docs)

    def __iter__(self) -> Any:
        return (d.tolist() for d in self._docs)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [d.tolist() for d in self._docs[index]]
        return self._docs[index].tolist()


def _import_bm25s() -> Any:
    """Import bm25s and undo its import-time ``logger.setLevel(DEBUG)``.

    Left at DEBUG, its "Building index from IDs" records pass the application's WARNING level
    and reach the terminal; with the level reset, the ``bm25s`` logger follows the application's
    logging configuration like every other library (``--verbose`` still shows them).
    """
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


def _load_bm25s(folder: Path) -> Any:
    """Load bm25s' saved index files.

    Raises:
        RetrieverError: The files are missing (a save cut short).
    """
    bm25s = _import_bm25s()

    if not folder.is_dir():
        raise RetrieverError(f"BM25 index files missing in {folder}; rebuild and save the index")
    return bm25s.BM25.load(str(folder), show_progress=False)
