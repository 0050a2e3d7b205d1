"""A FAISS vector index that maps positions to document ids and saves as plain files.

Kinds (:class:`~retrievers.index_config.IndexKind`, set in
:class:`~retrievers.index_config.IndexConfig`):

- ``flat``: exact inner product (IndexFlatIP); with L2-normalised vectors that is cosine. Fine to
  a few million vectors on a GPU; on 2 CPU cores one query takes ~0.2 ms per 1,000 vectors.
- ``ivf``: IndexIVFFlat, ``nlist`` k-means cells (default 4 * sqrt(N), at most N / 39 so each cell
  has training points), ``nprobe`` cells searched per query. Trained on the first batch added.
- ``hnsw``: IndexHNSWFlat graph (``hnsw_m`` links, ``ef_search``); CPU only; no training.
- ``auto`` (the default): ``flat`` up to ``auto_flat_max`` vectors (:data:`AUTO_FLAT_MAX`,
  25,000), ``auto_kind`` (HNSW) above; exact at any size when the index goes to a GPU. Decided by
  the size of the first batch added (:func:`~retrievers.index_config.resolve_kind`; the rule and
  its measurements are in :mod:`retrievers.index_config`); an index grown later by ``add`` keeps
  its kind until rebuilt.

The kind actually built is recorded in ``params.json`` (``"kind"``) next to the requested
config, and :attr:`VectorIndex.kind` reports it after a load.

Flat and IVF indexes move to the GPU when faiss was built with GPU support and sees one
(``faiss.get_num_gpus() > 0``); ``use_gpu=False`` keeps them on the CPU. ``fp16=True`` stores
vectors as float16, half the memory (36M x 384 is 27.6 GB): on the GPU through the cloner, on
the CPU through a float16 scalar quantizer (IndexScalarQuantizer, IndexIVFScalarQuantizer,
IndexHNSWSQ), as fast as float32 there. Nothing here needs a GPU.

Searches of fewer than :data:`ONE_THREAD_BELOW` queries on the CPU run on one OpenMP thread
(set for the calling thread only, libgomp keeps it per thread): on 2 busy cores faiss' threads
wait for each other, and one query over 10k-100k flat vectors took 7x / 2.5x longer with 2
threads than with 1 (17 vs 2.6 ms, 55 vs 22 ms at load average 3-6).

Files written by ``save``: ``index.faiss`` (faiss.write_index, CPU copy), ``ids.json`` and
``params.json`` (last), into a temporary folder swapped in when complete. Never pickle.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.errors import RetrieverError
from retrievers.index_config import (
    AUTO_FLAT_MAX,
    AUTO_KIND,
    IndexConfig,
    IndexKind,
    auto_nlist,
    resolve_kind,
)
from retrievers.saved import complete_folder, replace_folder

# The settings and the kind rule live in retrievers.index_config; AUTO_FLAT_MAX and AUTO_KIND
# stay importable from here for callers that import them with the index (curation/cli/main.py).
__all__ = ["AUTO_FLAT_MAX", "AUTO_KIND", "ONE_THREAD_BELOW", "PARAMS", "IndexConfig", "IndexKind",
           "VectorIndex", "auto_nlist", "describe_saved", "omp_threads", "resolve_kind"]

logger = logging.getLogger(__name__)

#: Written last by :meth:`VectorIndex.write_to`: its presence marks a complete save.
PARAMS = "params.json"

_TRAIN_POINTS_PER_LIST = 64
#: CPU searches of fewer queries than this run on one OpenMP thread (module docstring).
ONE_THREAD_BELOW = 20


def _faiss() -> Any:
    import faiss

    return faiss


@contextmanager
def omp_threads(threads: int | None) -> Iterator[None]:
    """Run faiss with ``threads`` OpenMP threads in the calling thread (``None``: unchanged)."""
    if threads is None:
        yield
        return
    faiss = _faiss()
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class VectorIndex:
    """Vectors + document ids behind one FAISS index.

    Args:
        dim: Vector dimension.
        config: Index settings.
    """

    def __init__(self, dim: int, config: IndexConfig | None = None) -> None:
        self.dim = dim
        self.config = config or IndexConfig()
        self.ids: list[str] = []
        self._index: Any = None  # faiss index (CPU or GPU), created on first add
        self._nlist: int | None = None
        self._kind: IndexKind | None = None  # resolved on first add (``auto``) or load

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def kind(self) -> str | None:
        """The kind built ("flat", "ivf", "hnsw"); ``None`` before the first add."""
        return None if self._kind is None else self._kind.value

    @property
    def nlist(self) -> int | None:
        """IVF cells actually used (after training); ``None`` for other kinds."""
        return self._nlist

    @property
    def on_gpu(self) -> bool:
        """Whether the index lives on a GPU."""
        return self._index is not None and "Gpu" in type(self._index).__name__

    @property
    def nbytes(self) -> int:
        """Size of the serialised index in bytes (about its memory use)."""
        if self._index is None:
            return 0
        faiss = _faiss()
        return int(faiss.serialize_index(self._cpu_index()).nbytes)

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add vectors (shape (n, dim)) under the given ids.

        Raises:
            RetrieverError: Shape or count mismatch.
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(ids), self.dim):
            raise RetrieverError(
                f"got {len(ids)} ids and vectors of shape {vectors.shape}; expected shape "
                f"({len(ids)}, {self.dim}): one {self.dim}-d vector per id"
            )
        if not len(ids):
            return
        if self._index is None:
            self._index = self._to_device(self._build(vectors))
        self._index.add(vectors)
        self.ids.extend(ids)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` inner products for each query.

        Args:
            queries: Query vectors, shape (q, dim).
            k: Neighbours per query.

        Returns:
            ``(scores, positions)``, both shape (q, min(k, len)); missing slots have position -1.
        """
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, len(self.ids))
        if self._index is None or k <= 0:
            empty = np.zeros((queries.shape[0], 0))
            return empty.astype(np.float32), empty.astype(np.int64)
        self._set_search_params()
        threads = 1 if len(queries) < ONE_THREAD_BELOW and not self.on_gpu else None
        with omp_threads(threads):
            scores, positions = self._index.search(queries, k)  # (q, k), (q, k)
        return scores, positions

    def vectors(self) -> np.ndarray:
        """The stored vectors in position order, shape (len, dim) (float16-rounded for
        ``fp16``; IVF indexes get a direct map for this, kept until the next :meth:`remove`)."""
        if self._index is None:
            return np.zeros((0, self.dim), dtype=np.float32)
        index = self._cpu_index()
        if self._kind == IndexKind.IVF:
            _faiss().extract_index_ivf(index).make_direct_map()
        return index.reconstruct_n(0, index.ntotal)  # (len, dim)

    def remove(self, ids: Sequence[str]) -> int:
        """Remove the vectors of ``ids`` (unknown ids are ignored).

        The index is emptied and refilled with the kept vectors in their order, keeping its
        kind and training (IVF cells): O(len) per call, meant for occasional deletes.

        Returns:
            How many vectors were removed.
        """
        drop = set(ids)
        keep = [p for p, doc_id in enumerate(self.ids) if doc_id not in drop]
        removed = len(self.ids) - len(keep)
        if not removed:
            return 0
        kept = self.vectors()[keep]  # (len(keep), dim)
        index = self._cpu_index()
        if self._kind == IndexKind.IVF:
            _faiss().extract_index_ivf(index).make_direct_map(False)
        index.reset()
        if len(keep):
            index.add(np.ascontiguousarray(kept))
        self._index = self._to_device(index) if self.on_gpu else index
        self.ids = [self.ids[p] for p in keep]
        return removed

    def _build(self, train: np.ndarray) -> Any:
        faiss = _faiss()
        cfg = self.config
        gpu = self._gpu_available()
        self._kind = resolve_kind(cfg, len(train), gpu=gpu)
        if cfg.kind == IndexKind.AUTO:
            logger.info("index kind auto: %s for %d vectors (flat up to %d%s)", self._kind,
                        len(train), cfg.auto_flat_max, "; a GPU: flat" if gpu else "")
        # float16 on the CPU: a scalar quantizer stores the vectors; a GPU copy uses the cloner's
        ip, fp16 = faiss.METRIC_INNER_PRODUCT, faiss.ScalarQuantizer.QT_fp16
        sq16 = cfg.fp16 and not (gpu and self._kind != IndexKind.HNSW)
        if self._kind == IndexKind.HNSW:
            index = faiss.IndexHNSWSQ(self.dim, fp16, cfg.hnsw_m, ip) if sq16 else \
                faiss.IndexHNSWFlat(self.dim, cfg.hnsw_m, ip)
            index.hnsw.efConstruction = cfg.ef_construction
            return index
        if self._kind == IndexKind.FLAT:
            return faiss.IndexScalarQuantizer(self.dim, fp16, ip) if sq16 else \
                faiss.IndexFlatIP(self.dim)
        self._nlist = min(cfg.nlist or auto_nlist(len(train)), len(train))
        if cfg.nlist and self._nlist < cfg.nlist:
            logger.warning("IVF nlist=%d > %d training vectors; using nlist=%d", cfg.nlist,
                           len(train), self._nlist)
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFScalarQuantizer(quantizer, self.dim, self._nlist, fp16, ip) \
            if sq16 else faiss.IndexIVFFlat(quantizer, self.dim, self._nlist, ip)
        cap = _TRAIN_POINTS_PER_LIST * self._nlist
        if len(train) > cap:  # k-means on a sample: 64 points per cell is plenty
            train = train[np.random.default_rng(0).choice(len(train), cap, replace=False)]
        index.train(train)
        return index

    def _set_search_params(self) -> None:
        index = self._index
        if self._kind == IndexKind.IVF:
            index.nprobe = self.config.nprobe
        elif self._kind == IndexKind.HNSW:
            index.hnsw.efSearch = self.config.ef_search

    def _gpu_available(self, warn: bool = False) -> bool:
        """faiss has GPU support and sees a GPU, and ``use_gpu`` does not say no."""
        faiss = _faiss()
        has_gpu = hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
        if warn and self.config.use_gpu and not has_gpu:
            logger.warning("use_gpu=True but faiss sees no GPU (faiss-cpu build?); on CPU")
        return has_gpu and self.config.use_gpu is not False

    def _to_device(self, index: Any) -> Any:
        faiss = _faiss()
        if not self._gpu_available(warn=True) or self._kind == IndexKind.HNSW:
            return index
        options = faiss.GpuClonerOptions()
        options.useFloat16 = self.config.fp16
        self._gpu_resources = faiss.StandardGpuResources()  # must outlive the GPU index
        try:
            gpu_index = faiss.index_cpu_to_gpu(self._gpu_resources, 0, index, options)
        except RuntimeError as exc:  # e.g. a CPU float16 scalar quantizer loaded on a GPU box
            logger.warning("FAISS %s index stays on the CPU: %s", type(index).__name__, exc)
            return index
        logger.info("FAISS %s index on GPU (fp16=%s)", self._kind, self.config.fp16)
        return gpu_index

    def _cpu_index(self) -> Any:
        return _faiss().index_gpu_to_cpu(self._index) if self.on_gpu else self._index

    def save(self, folder: str | Path) -> None:
        """Write ``index.faiss``, ``ids.json`` and ``params.json`` to ``folder``, all at once (a
        temporary sibling swapped in when complete, see :mod:`retrievers.saved`)."""
        with replace_folder(folder) as tmp:
            self.write_to(tmp)

    def write_to(self, folder: Path) -> None:
        """Write the index files into ``folder`` in place, ``params.json`` last (no swap)."""
        folder.mkdir(parents=True, exist_ok=True)
        if self._index is not None:
            _faiss().write_index(self._cpu_index(), str(folder / "index.faiss"))
        (folder / "ids.json").write_text(json.dumps(self.ids), encoding="utf-8")
        params = {"dim": self.dim, "config": asdict(self.config), "kind": self.kind,
                  "nlist": self._nlist}
        (folder / PARAMS).write_text(json.dumps(params), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path, *, use_gpu: bool | None = None) -> VectorIndex:
        """Read an index written by :meth:`save`.

        Args:
            folder: The folder.
            use_gpu: Override the saved GPU choice (``None`` keeps it).

        Raises:
            RetrieverError: The folder has no ``params.json``.
        """
        folder = complete_folder(folder, PARAMS)
        if not (folder / PARAMS).is_file():
            raise RetrieverError(f"no FAISS index in {folder} (missing {PARAMS}); build and "
                                 "save one first")
        params = json.loads((folder / PARAMS).read_text(encoding="utf-8"))
        config = IndexConfig(**params["config"])
        if use_gpu is not None:
            config = IndexConfig(**{**asdict(config), "use_gpu": use_gpu})
        obj = cls(params["dim"], config)
        obj._nlist = params.get("nlist")
        kind = params.get("kind", config.kind)  # saves before "kind" was recorded: as asked
        obj._kind = None if kind in (None, IndexKind.AUTO) else IndexKind(kind)
        obj.ids = json.loads((folder / "ids.json").read_text(encoding="utf-8"))
        if (folder / "index.faiss").is_file():
            obj._index = obj._to_device(_faiss().read_index(str(folder / "index.faiss")))
        return obj


def describe_saved(folder: str | Path) -> list[str]:
    """One line per FAISS index saved under ``folder`` (a dense retriever's, or each of a
    hybrid's), e.g. ``"hnsw of 250,000 vectors (auto: flat up to 25,000), hnsw_m=32,
    ef_search=128"``; empty when there is none."""
    lines = []
    for path in sorted(Path(folder).rglob(PARAMS)):
        params = json.loads(path.read_text(encoding="utf-8"))
        config = IndexConfig(**params["config"])
        kind = IndexKind(params.get("kind") or config.kind)
        count = len(json.loads((path.parent / "ids.json").read_text(encoding="utf-8")))
        text = f"{kind} of {count:,} vectors"
        if config.kind == IndexKind.AUTO:
            text += f" (auto: flat up to {config.auto_flat_max:,})"
        if config.fp16:
            text += ", fp16"
        if kind == IndexKind.IVF:
            text += f", nlist={params.get('nlist')}, nprobe={config.nprobe}"
        elif kind == IndexKind.HNSW:
            text += f", hnsw_m={config.hnsw_m}, ef_search={config.ef_search}"
        lines.append(text)
    return lines
