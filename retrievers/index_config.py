"""Settings of a FAISS vector index (:class:`IndexConfig`) and the rule that picks its kind.

``auto`` (the default kind) searches exactly (``flat``) up to ``auto_flat_max`` vectors
(:data:`AUTO_FLAT_MAX`, 25,000) and builds ``auto_kind`` (:data:`AUTO_KIND`, HNSW) above; exact at
any size when the index goes to a GPU (:func:`resolve_kind`). IVF indexes get :func:`auto_nlist`
cells unless ``nlist`` is set. The index itself is :class:`retrievers.faiss_index.VectorIndex`.

The rule, measured on 2 CPU cores shared with other jobs (benchmarks/faiss_scaling.py, tables in
benchmarks/README.md; 384-d, k = 50, one query at a time): exact search costs ~0.15-0.25 ms per
1,000 vectors on top of ~1-4 ms of scheduling noise (p50 10k / 25k / 50k / 100k: 2.5 / 4.1 / 15 /
26 ms), so it stays under ~5 ms (the dense query budget) up to about 25,000 vectors. Above that
HNSW (M 32, efSearch 128) answers in 0.4-0.9 ms at 25k-100k and ~1-2 ms at 1M, with recall@10
against exact 1.000 on MiniLM vectors of the 12k pool (IVF: 0.93 at nprobe 16, 0.97 at 32) and
0.999 on 100k synthetic vectors with the pool's neighbour structure. IVF needs k-means training
(75 s at 100k, 17 min at 1M on the busy cores) and more probes for the same recall, so it is not
the automatic choice. Exact search keeps small workspaces reproducible to the last digit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from retrievers.errors import RetrieverError, unknown_name

#: ``auto``: exact search up to this many vectors (the rule in the module docstring).
AUTO_FLAT_MAX = 25_000
#: ``auto``: the approximate kind above :data:`AUTO_FLAT_MAX`.
AUTO_KIND = "hnsw"


class IndexKind(StrEnum):
    """FAISS index structure (``auto``: chosen by size, see :func:`resolve_kind`)."""

    FLAT = "flat"
    IVF = "ivf"
    HNSW = "hnsw"
    AUTO = "auto"


@dataclass(frozen=True)
class IndexConfig:
    """FAISS index settings.

    Attributes:
        kind: :class:`IndexKind` name; ``"auto"`` picks by size (:func:`resolve_kind`).
        nlist: IVF cells; ``None``: 4 * sqrt(N) at training time.
        nprobe: IVF cells searched per query (recall vs speed).
        hnsw_m: HNSW links per node.
        ef_construction: HNSW build-time candidate list.
        ef_search: HNSW search-time candidate list.
        use_gpu: ``None``: GPU when faiss has one; ``False``: always CPU.
        fp16: Store vectors as float16: half the memory (a float16 scalar quantizer on the CPU,
            the cloner's float16 option on the GPU); recall@10 against fp32 was 1.000 at 12k-1M.
        auto_flat_max: ``auto``: most vectors searched exactly (``flat``).
        auto_kind: ``auto``: the approximate kind above ``auto_flat_max`` ("hnsw" or "ivf").
    """

    kind: str = "auto"
    nlist: int | None = None
    nprobe: int = 16
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 128
    use_gpu: bool | None = None
    fp16: bool = False
    auto_flat_max: int = AUTO_FLAT_MAX
    auto_kind: str = AUTO_KIND

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _kind(self.kind, "index kind", list(IndexKind)).value)
        approximate = [IndexKind.IVF, IndexKind.HNSW]
        object.__setattr__(self, "auto_kind",
                           _kind(self.auto_kind, "auto_kind", approximate).value)
        for name, least in (("nprobe", 1), ("hnsw_m", 1), ("ef_construction", 1),
                            ("ef_search", 1), ("auto_flat_max", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise RetrieverError(f"IndexConfig.{name} must be an integer >= {least}, got "
                                     f"{value!r}")
        if self.nlist is not None and (not isinstance(self.nlist, int) or self.nlist < 1):
            raise RetrieverError(f"IndexConfig.nlist must be an integer >= 1 or None (4 * "
                                 f"sqrt(N)), got {self.nlist!r}")


def _kind(value: object, what: str, allowed: list[IndexKind]) -> IndexKind:
    try:
        kind = IndexKind(str(value).lower())
    except ValueError:
        kind = None
    if kind not in allowed:
        raise unknown_name(what, str(value), [k.value for k in allowed])
    return kind


def resolve_kind(config: IndexConfig, n: int, *, gpu: bool = False) -> IndexKind:
    """The kind to build for ``n`` vectors: ``config.kind``, or for ``auto`` exact search up to
    ``config.auto_flat_max`` vectors and ``config.auto_kind`` above; exact search at any size
    when the index goes to a GPU (``gpu``), where brute force is fast (module docstring)."""
    if config.kind != IndexKind.AUTO:
        return IndexKind(config.kind)
    if gpu or n <= config.auto_flat_max:
        return IndexKind.FLAT
    return IndexKind(config.auto_kind)


def auto_nlist(n: int) -> int:
    """IVF cells for ``n`` vectors: 4 * sqrt(n), kept to at most n / 39 (faiss' minimum
    training points per cell) and at least 1."""
    return max(1, min(int(4 * math.sqrt(n)), n // 39))
