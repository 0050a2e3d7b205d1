"""A FAISS vector index that maps positions to document ids and saves as plain files.

Kinds (:class:`IndexKind`):

- ``flat``: exact inner product (IndexFlatIP); with L2-normalised vectors that is cosine. Default;
  fine to a few million vectors on a GPU, ~16 ms per query at 100k x 384 on 2 CPU cores.
- ``ivf``: IndexIVFFlat, ``nlist`` k-means cells (default 4 * sqrt(N), at most N / 39 so each cell
  has training points), ``nprobe`` cells searched per query. Trained on the first batch added.
- ``hnsw``: IndexHNSWFlat graph (``hnsw_m`` links, ``ef_search``); CPU only.

Flat and IVF indexes move to the GPU when faiss was built with GPU support and sees one
(``faiss.get_num_gpus() > 0``); ``use_gpu=False`` keeps them on the CPU, ``fp16=True`` stores
GPU vectors as float16 (half the memory: 36M x 384 is 27.6 GB). Nothing here needs a GPU.

Files written by ``save``: ``index.faiss`` (faiss.write_index, CPU copy), ``ids.json`` and
``params.json`` (last), into a temporary folder swapped in when complete. Never pickle.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from retrievers.errors import RetrieverError, unknown_name
from retrievers.saved import complete_folder, replace_folder

logger = logging.getLogger(__name__)

#: Written last by :meth:`VectorIndex.write_to`: its presence marks a complete save.
PARAMS = "params.json"

_TRAIN_POINTS_PER_LIST = 64


class IndexKind(StrEnum):
    """FAISS index structure."""

    FLAT = "flat"
    IVF = "ivf"
    HNSW = "hnsw"


@dataclass(frozen=True)
class IndexConfig:
    """FAISS index settings.

    Attributes:
        kind: :class:`IndexKind` name.
        nlist: IVF cells; ``None``: 4 * sqrt(N) at training time.
        nprobe: IVF cells searched per query (recall vs speed).
        hnsw_m: HNSW links per node.
        ef_construction: HNSW build-time candidate list.
        ef_search: HNSW search-time candidate list.
        use_gpu: ``None``: GPU when faiss has one; ``False``: always CPU.
        fp16: Store vectors as float16 on the GPU.
    """

    kind: str = "flat"
    nlist: int | None = None
    nprobe: int = 16
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 128
    use_gpu: bool | None = None
    fp16: bool = False

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", IndexKind(str(self.kind).lower()).value)
        except ValueError:
            raise unknown_name("index kind", self.kind, [k.value for k in IndexKind]) from None


def _faiss() -> Any:
    import faiss

    return faiss


def auto_nlist(n: int) -> int:
    """IVF cells for ``n`` vectors: 4 * sqrt(n), kept to at most n / 39 (faiss' minimum
    training points per cell) and at least 1."""
    return max(1, min(int(4 * math.sqrt(n)), n // 39))


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

    def __len__(self) -> int:
        return len(self.ids)

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
        scores, positions = self._index.search(queries, k)  # (q, k), (q, k)
        return scores, positions

    def _build(self, train: np.ndarray) -> Any:
        faiss = _faiss()
        cfg = self.config
        if cfg.kind == IndexKind.HNSW:
            index = faiss.IndexHNSWFlat(self.dim, cfg.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = cfg.ef_construction
            return index
        if cfg.kind == IndexKind.FLAT:
            return faiss.IndexFlatIP(self.dim)
        self._nlist = min(cfg.nlist or auto_nlist(len(train)), len(train))
        if cfg.nlist and self._nlist < cfg.nlist:
            logger.warning("IVF nlist=%d > %d training vectors; using nlist=%d", cfg.nlist,
                           len(train), self._nlist)
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(quantizer, self.dim, self._nlist, faiss.METRIC_INNER_PRODUCT)
        cap = _TRAIN_POINTS_PER_LIST * self._nlist
        if len(train) > cap:  # k-means on a sample: 64 points per cell is plenty
            train = train[np.random.default_rng(0).choice(len(train), cap, replace=False)]
        index.train(train)
        return index

    def _set_search_params(self) -> None:
        index = self._index
        if self.config.kind == IndexKind.IVF:
            index.nprobe = self.config.nprobe
        elif self.config.kind == IndexKind.HNSW:
            index.hnsw.efSearch = max(self.config.ef_search, 1)

    def _to_device(self, index: Any) -> Any:
        faiss = _faiss()
        wants = self.config.use_gpu
        has_gpu = hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
        if wants is False or not has_gpu or self.config.kind == IndexKind.HNSW:
            if wants and not has_gpu:
                logger.warning("use_gpu=True but faiss sees no GPU (faiss-cpu build?); on CPU")
            return index
        options = faiss.GpuClonerOptions()
        options.useFloat16 = self.config.fp16
        self._gpu_resources = faiss.StandardGpuResources()  # must outlive the GPU index
        logger.info("FAISS %s index on GPU (fp16=%s)", self.config.kind, self.config.fp16)
        return faiss.index_cpu_to_gpu(self._gpu_resources, 0, index, options)

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
        params = {"dim": self.dim, "config": asdict(self.config), "nlist": self._nlist}
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
        obj.ids = json.loads((folder / "ids.json").read_text(encoding="utf-8"))
        if (folder / "index.faiss").is_file():
            obj._index = obj._to_device(_faiss().read_index(str(folder / "index.faiss")))
        return obj
