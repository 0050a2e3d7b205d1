"""BM25 on Tantivy: the lexical index for corpora past one machine's bm25s (all of PubMed).

bm25s keeps every posting in memory and scores every posting of the query's terms, so its memory
and query time grow with the corpus (measured in docs/SCALING.md: 15 ms a query at 1M abstracts,
~0.5 s projected at 36M). Tantivy (a Rust search library in the Lucene family; ``pip install
'kbcurate[scale]'``) keeps its index on disk, memory-maps it, answers top-k queries with
block-max WAND (it skips the postings that cannot reach the top k), and merges its segments
incrementally: adding a day of PubMed updates writes a new segment instead of re-scoring the
corpus. Its distributed form is Quickwit (a cluster of Tantivy indexes on object storage).

Tokens are the project's :class:`~retrievers.tokenize.BiomedTokenizer`'s (the same as the
``bm25`` retriever's, so ``V600E`` and ``EML4-ALK`` stay whole), computed in Python and indexed
with Tantivy's whitespace tokenizer; a query is the OR of its tokens' term queries (never
Tantivy's query language, so query text cannot inject operators). Scoring is Tantivy's BM25
(Lucene's formula with k1 = 1.2 and b = 0.75, fixed by Tantivy; document lengths quantised to one
byte as in Lucene), so scores differ slightly from bm25s' (k1 = 1.5 by default); the rankings
agree closely (``benchmarks/lexical_scale.py`` prints the overlap).

Files: ``save`` writes Tantivy's segment files under ``tantivy/`` (hard links of the working
index when it lives on the same file system, copies otherwise), ``ids.json`` and the manifest.
``load`` searches the saved files in place (memory-mapped, nothing copied); the first ``add``
after a load copies them to a private working folder first, so the saved index never changes.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

from retrievers.base import Hit, Progress, Retriever, progress_reporter
from retrievers.errors import RetrieverError, check_options
from retrievers.tokenize import BiomedTokenizer

logger = logging.getLogger(__name__)

#: The optional dependency group that installs Tantivy.
EXTRA = "scale"
_ENGINE_DIR = "tantivy"
_LOCKS = (".tantivy-writer.lock", ".tantivy-meta.lock")
_BODY, _ORD = "body", "ord"


def import_tantivy() -> Any:
    """Import the ``tantivy`` package.

    Raises:
        RetrieverError: It is not installed; the message names the extra that installs it.
    """
    try:
        import tantivy
    except ImportError:
        raise RetrieverError(
            "the 'tantivy' retriever needs the tantivy package, which the default install "
            f"leaves out; install it with: pip install 'kbcurate[{EXTRA}]'") from None
    return tantivy


@dataclass(frozen=True)
class TantivyConfig:
    """Settings of the Tantivy retriever.

    Attributes:
        stopwords: As for the ``bm25`` retriever ("en", "none" or the words).
        split_compounds: Also index the parts of compound tokens (``EML4-ALK`` -> ``EML4``).
        heap_mb: Memory of Tantivy's index writer, shared by its threads (at least 15 MB per
            thread); more memory means fewer, larger segments while building.
        threads: Indexing threads (0: Tantivy's choice, one per core up to 8).
        work_dir: Folder for the working index before ``save`` (default: the system's temporary
            folder); on the save folder's file system, saving hard-links instead of copying.
    """

    stopwords: str | tuple[str, ...] = "en"
    split_compounds: bool = True
    heap_mb: int = 256
    threads: int = 0
    work_dir: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.stopwords, list):
            object.__setattr__(self, "stopwords", tuple(self.stopwords))
        if self.threads < 0 or self.heap_mb < 15 * max(1, self.threads):
            raise RetrieverError(
                f"tantivy: heap_mb={self.heap_mb}, threads={self.threads}; give threads >= 0 "
                "and heap_mb of at least 15 per thread (for example heap_mb=256)")

    def tokenizer(self) -> BiomedTokenizer:
        return BiomedTokenizer(stopwords=self.stopwords, split_compounds=self.split_compounds)


class TantivyRetriever(Retriever):
    """Lexical retrieval with Tantivy's BM25 over the project's biomedical tokens.

    Example:
        >>> r = TantivyRetriever()
        >>> r.index([("1", "BRAF V600E in melanoma"), ("2", "EGFR in lung cancer")],
        ...         progress=False)
        >>> r.search("BRAF V600E", k=1)[0].doc_id
        '1'
    """

    name = "tantivy"

    def __init__(self, config: TantivyConfig | None = None) -> None:
        super().__init__()
        self.config = config or TantivyConfig()
        self._tantivy = import_tantivy()
        self._tokenize = self.config.tokenizer()
        self._index: Any = None
        self._schema: Any = None
        self._searcher: Any = None
        self._path: Path | None = None  # the folder the open index lives in
        self._owned = False  # _path is our private working folder (removed when dropped)
        self._cleanup: weakref.finalize | None = None

    @classmethod
    def from_options(cls, **options: Any) -> Self:
        """Build from plain options: ``stopwords``, ``split_compounds``, ``heap_mb``,
        ``threads``, ``work_dir``.

        Raises:
            RetrieverError: An unknown option or value, or tantivy is not installed.
        """
        check_options(cls.name, options, TantivyConfig.__dataclass_fields__)
        return cls(TantivyConfig(**options))

    # -- the working index ----------------------------------------------------------------
    def _build_schema(self) -> Any:
        builder = self._tantivy.SchemaBuilder()
        builder.add_text_field(_BODY, stored=False, tokenizer_name="whitespace",
                               index_option="freq")
        builder.add_unsigned_field(_ORD, stored=False, indexed=False, fast=True)
        return builder.build()

    def _open(self, path: Path, *, owned: bool, create: bool) -> None:
        self._drop()
        if create:
            self._schema = self._build_schema()
            self._index = self._tantivy.Index(self._schema, path=str(path))
        else:
            self._index = self._tantivy.Index.open(str(path))
            self._schema = self._index.schema
        self._path, self._owned = path, owned
        if owned:
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(path), True)
        self._index.reload()
        self._searcher = self._index.searcher()

    def _new_work_dir(self) -> Path:
        root = self.config.work_dir or None
        if root:
            Path(root).mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="kbcurate-tantivy-", dir=root))

    def _drop(self) -> None:
        self._index = self._searcher = None
        if self._cleanup is not None:
            self._cleanup()  # removes our working folder now
        self._cleanup, self._path, self._owned = None, None, False

    def _writable(self) -> None:
        """Make sure the open index is our own working copy (copy a loaded one first)."""
        if self._index is not None and self._owned:
            return
        work = self._new_work_dir()
        if self._index is None:
            self._open(work, owned=True, create=True)
            return
        assert self._path is not None
        _copy_index(self._path, work)
        self._open(work, owned=True, create=False)

    def _reset(self) -> None:
        self._drop()

    def _add(self, ids: list[str], texts: list[str], progress: Progress) -> None:
        self._writable()
        tantivy, first = self._tantivy, len(self._ids)
        writer = self._index.writer(heap_size=self.config.heap_mb * 1_000_000,
                                    num_threads=self.config.threads)
        try:
            with progress_reporter(len(texts), progress, "Tantivy index", 20_000) as advance:
                for offset, text in enumerate(texts):
                    doc = tantivy.Document()
                    doc.add_unsigned(_ORD, first + offset)
                    doc.add_text(_BODY, " ".join(self._tokenize(text)))
                    writer.add_document(doc)
                    advance(1)
            writer.commit()
        except BaseException:
            writer.rollback()
            raise
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    # -- search ---------------------------------------------------------------------------
    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [self._search_one(query, k) for query in queries]

    def _search_one(self, query: str, k: int) -> list[Hit]:
        tokens = self._tokenize(query)
        if not tokens:
            return []
        q = self._tantivy.Query
        terms = [(self._tantivy.Occur.Should, q.term_query(self._schema, _BODY, t))
                 for t in tokens]
        found = self._searcher.search(q.boolean_query(terms), limit=k, count=False).hits
        ords = self._searcher.fast_field_values(_ORD, [addr for _, addr in found])
        return [Hit(self._ids[o], float(score), rank, self.label)
                for rank, ((score, _), o) in enumerate(zip(found, ords, strict=True), start=1)]

    # -- files ----------------------------------------------------------------------------
    def _save(self, folder: Path) -> dict[str, Any]:
        if self._ids and self._path is not None:
            _copy_index(self._path, folder / _ENGINE_DIR)
        return {"config": asdict(self.config), "engine": "tantivy",
                "engine_version": _version()}

    @classmethod
    def _load(cls, folder: Path, manifest: dict[str, Any]) -> Self:
        obj = cls(TantivyConfig(**manifest["config"]))
        engine = folder / _ENGINE_DIR
        if manifest.get("documents"):
            if not (engine / "meta.json").is_file():
                raise RetrieverError(f"Tantivy index files missing in {engine}; rebuild and "
                                     "save the index")
            obj._open(engine, owned=False, create=False)
        return obj


def _copy_index(source: Path, target: Path) -> None:
    """Hard-link (or copy, across file systems) Tantivy's files, leaving out its lock files.

    Tantivy never rewrites a segment file in place and replaces ``meta.json`` by renaming a new
    file over it, so a hard link stays a faithful snapshot.
    """
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name in _LOCKS or not item.is_file():
            continue
        try:
            os.link(item, target / item.name)
        except OSError:
            shutil.copy2(item, target / item.name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tantivy")
    except PackageNotFoundError:  # pragma: no cover - imported but without metadata
        return ""
