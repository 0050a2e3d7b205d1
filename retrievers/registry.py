"""Registry of retrievers: name -> class, built from plain options.

Entries name their class as ``module:Class`` and are imported lazily, so listing retrievers
(``--help``) imports neither torch nor faiss. Every retriever class has ``from_options(**options)``
and ``load(folder)``.

Example::

    r = build_retriever("bm25", k1=1.2)
    r = build_retriever("dense", model="all-MiniLM-L6-v2", cache_dir="ws/cache")
    r = build_retriever("dense", backend="openvino", precision="int8", export_dir="ws/exports")
    r = build_retriever("hybrid", weights={"bm25": 1.0, "dense": 0.5},
                        dense={"model": "BAAI/bge-base-en-v1.5", "cache_dir": "ws/cache"})
    r.index([("pmid1", "title and abstract"), ...], progress=job.report)
    hits = r.search("Treatment for gene BRAF and variant V600E?", k=50)
    r.save("ws/indexes/hybrid")
    r = load_retriever("ws/indexes/hybrid")
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from kb_sources.plugins import Registry, load_target
from retrievers.base import Retriever, read_manifest
from retrievers.errors import RetrieverError, unknown_name


@dataclass(frozen=True)
class RetrieverSpec:
    """One registered retriever.

    Attributes:
        name: Name used in code, config and on the command line.
        target: ``module:Class`` implementing it.
        description: One line for ``--help``.
        options: Main options, for ``--help`` (``from_options`` lists all in its errors).
    """

    name: str
    target: str
    description: str
    options: tuple[str, ...] = ()

    def load_class(self) -> type[Retriever]:
        """Import and return the retriever class."""
        return load_target(self.target)


_SPECS: tuple[RetrieverSpec, ...] = (
    RetrieverSpec("bm25", "retrievers.bm25:BM25Retriever",
                  "BM25 (bm25s) with a tokenizer that keeps variants like V600E, EML4-ALK whole",
                  ("k1", "b", "method", "stopwords", "split_compounds")),
    RetrieverSpec("dense", "retrievers.dense:DenseRetriever",
                  "Bi-encoder + FAISS or Qdrant (default model: the packaged all-MiniLM-L6-v2)",
                  ("model", "query_model", "pooling", "query_prefix", "doc_prefix",
                   "max_seq_length", "batch_size", "device", "backend", "precision",
                   "export_dir", "index", "nlist", "nprobe", "cache_dir", "vector_store")),
    RetrieverSpec("hybrid", "retrievers.hybrid:HybridRetriever",
                  "Fusion of retrievers (default bm25 + dense) by RRF or min-max scores",
                  ("components", "fusion", "weights", "rrf_k", "depth")),
)


#: Retrievers whose engine is an optional extra, with (module, extra): listed only where the
#: module is installed, so menus never offer what cannot run (docs/SCALING.md).
_OPTIONAL: tuple[tuple[RetrieverSpec, str, str], ...] = (
    (RetrieverSpec("tantivy", "retrievers.tantivy_index:TantivyRetriever",
                   "BM25 on Tantivy: on disk, merged incrementally, for millions of documents "
                   "(pip install 'kbcurate[scale]')",
                   ("stopwords", "split_compounds", "heap_mb", "threads", "work_dir")),
     "tantivy", "scale"),
)

#: The registry of retrievers (the entry-point group ``kbcurate.retrievers`` adds plug-ins).
RETRIEVERS: Registry[RetrieverSpec] = Registry(
    "retriever", _SPECS + tuple(s for s, module, _ in _OPTIONAL if find_spec(module)),
    group="kbcurate.retrievers",
    accept=lambda e: None if isinstance(e, RetrieverSpec) else "expected a RetrieverSpec",
    error=unknown_name)


def retriever_specs() -> list[RetrieverSpec]:
    """Every registered retriever, in registration order."""
    return RETRIEVERS.entries()


def retriever_names() -> list[str]:
    """Names of every registered retriever."""
    return RETRIEVERS.names()


def get_spec(name: str) -> RetrieverSpec:
    """Look up a retriever by name.

    Raises:
        RetrieverError: No such retriever; the message lists the available ones (or names the
            extra that installs an optional one).
    """
    for spec, module, extra in _OPTIONAL:
        if name == spec.name and name not in RETRIEVERS.names():
            raise RetrieverError(f"retriever {name!r} needs the {module} package, which the "
                                 f"default install leaves out: pip install 'kbcurate[{extra}]'")
    return RETRIEVERS.get(name)


def build_retriever(name: str, **options: Any) -> Retriever:
    """Build an empty retriever by name.

    Args:
        name: A registered name ("bm25", "dense", "hybrid").
        **options: Plain options of that retriever (see ``RetrieverSpec.options``).

    Returns:
        The retriever, ready for ``index(docs)``.

    Raises:
        RetrieverError: Unknown name, option or option value.
    """
    return get_spec(name).load_class().from_options(**options)


def load_retriever(folder: str | Path) -> Retriever:
    """Load any saved retriever; its type is read from the folder's manifest. A dense one (also
    inside a hybrid) encodes queries with the backend and precision recorded with its index.

    Raises:
        RetrieverError: The folder holds no saved retriever, or an unknown type.
    """
    manifest = read_manifest(Path(folder))
    return get_spec(manifest["retriever"]).load_class().load(folder)
