"""FAISS search latency, memory and recall at growing corpus sizes, for every index kind.

Synthetic L2-normalised vectors (default 384-d, MiniLM's size) stand in for abstract embeddings.
Two generators (``--data``):

- ``graded`` (default): hierarchical topics (3,000 / 300 / 8 points per topic level plus a shared
  direction), tuned so that neighbour similarities match MiniLM embeddings of the 12k sample pool
  (cosine to the 1st / 10th / 100th neighbour 0.71 / 0.60 / 0.52 vs 0.73 / 0.62 / 0.51 real;
  mean cosine 0.23-0.27 vs 0.25). Queries are held-out points of the same mixture, as a new
  abstract would be.
- ``gaussian``: a Gaussian with the mean and covariance of real embeddings (``--fit FILE.npy``,
  e.g. the 12k pool's MiniLM vectors: effective dimension 57), no topic structure; queries are
  held-out draws. Harder than real data for approximate search (IVF recall@10 at nprobe 8 on
  12k: 0.53 vs 0.90 real), where ``graded`` is easier (0.999): the two bracket real embeddings.
- ``clustered``: one tight cluster per ~1,000 points, queries are near-copies of corpus points
  (the generator of the first README table; easy for IVF).

For every size and index it prints build time, index size (MB and bytes per vector, from
``faiss.serialize_index``), single-query latency (p50 / p95 over ``--queries`` one-at-a-time
searches), the time of one batch of 100 queries, and recall@10 against exact search. Structures
are built once and searched with every value of their search parameter (``--nprobe``,
``--ef-search``).

Kinds (``--kinds``): the product's kinds ``flat``, ``ivf``, ``hnsw`` (through
:class:`retrievers.faiss_index.VectorIndex`), and memory variants measured here only (faiss
``index_factory`` strings): ``sq16`` (exact search over float16 vectors, ``SQfp16``), ``ivfsq16``
(``IVF<nlist>,SQfp16``), ``ivfpq`` (``IVF<nlist>,PQ<m>``, ``m`` bytes per vector, ``--pq-m``).
Runs flat/IVF on the GPU when faiss has GPU support and sees one (``--cpu`` to stay on the CPU).

Usage:
    python benchmarks/faiss_scaling.py --sizes 10k,100k,1M
    python benchmarks/faiss_scaling.py --sizes 10k,25k,50k,100k --kinds flat   # the auto rule
    python benchmarks/faiss_scaling.py --sizes 12k --vectors pool_minilm.npy   # real embeddings
    python benchmarks/faiss_scaling.py --sizes 100k --kinds ivf,hnsw --nprobe 8,16 --k 50
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from retrievers.faiss_index import (
    ONE_THREAD_BELOW,
    IndexConfig,
    VectorIndex,
    auto_nlist,
    omp_threads,
)

#: Product kinds (VectorIndex) and memory variants (index_factory strings; {nlist}, {m} filled in).
FACTORY = {"sq16": "SQfp16", "ivfsq16": "IVF{nlist},SQfp16", "ivfpq": "IVF{nlist},PQ{m}"}
KINDS = ("flat", "ivf", "hnsw", *FACTORY)
_TRAIN_POINTS_PER_LIST = 64  # as VectorIndex: k-means on at most 64 points per cell


@dataclass(frozen=True)
class Row:
    """One benchmark result."""

    size: int
    kind: str
    build_s: float
    index_mb: float
    bytes_per_vector: float
    p50_ms: float
    p95_ms: float
    batch100_ms: float
    recall10: float


def parse_size(text: str) -> int:
    """'10k' -> 10_000, '1M' -> 1_000_000, '2500' -> 2500."""
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def synthetic(n: int, dim: int, seed: int = 0, chunk: int = 100_000) -> np.ndarray:
    """Clustered unit vectors, shape (n, dim) float32 (one cluster per ~1,000 points)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(10, n // 1000), dim), dtype=np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        block = centres[rng.integers(0, len(centres), m)]
        block += 0.6 * rng.standard_normal((m, dim), dtype=np.float32)
        out[start:start + m] = _unit_rows(block)
    return out


#: Variance shares of the shared direction, the three topic levels and the noise (sum 1) and
#: the points per topic at each level: fitted to MiniLM vectors of the 12k pool (module doc).
GRADED_SHARES = (0.22, 0.13, 0.15, 0.18, 0.32)
GRADED_TOPIC_SIZES = (3000, 300, 8)


def graded(n: int, dim: int, seed: int = 0, chunk: int = 100_000) -> np.ndarray:
    """Unit vectors from hierarchical topics, shape (n, dim) float32 (see the module doc)."""
    rng = np.random.default_rng(seed)

    def directions(count: int) -> np.ndarray:
        return _unit_rows(rng.standard_normal((count, dim), dtype=np.float32))

    shared = directions(1)[0]
    counts = [max(2 ** (i + 1), n // size) for i, size in enumerate(GRADED_TOPIC_SIZES)]
    levels = [directions(c) for c in counts]  # (topics at that level, dim) each
    parent_of_mid = rng.integers(0, counts[0], counts[1])
    parent_of_fine = rng.integers(0, counts[1], counts[2])
    weights = np.sqrt(GRADED_SHARES).astype(np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        fine = rng.integers(0, counts[2], m)
        mid = parent_of_fine[fine]
        block = (weights[0] * shared + weights[1] * levels[0][parent_of_mid[mid]]
                 + weights[2] * levels[1][mid] + weights[3] * levels[2][fine]
                 + weights[4] * directions(m))
        out[start:start + m] = _unit_rows(block)
    return out


def gaussian(n: int, fit: np.ndarray, seed: int = 0, chunk: int = 100_000) -> np.ndarray:
    """Unit vectors drawn from a Gaussian with the mean and covariance of the rows of ``fit``
    (after L2 normalisation), shape (n, fit.shape[1]) float32."""
    fit = _unit_rows(fit).astype(np.float64)
    mean = fit.mean(axis=0)
    cov = np.cov((fit - mean).T) + 1e-6 * np.eye(fit.shape[1])
    factor = np.linalg.cholesky(cov).T.astype(np.float32)  # (dim, dim)
    rng = np.random.default_rng(seed)
    out = np.empty((n, fit.shape[1]), dtype=np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        out[start:start + m] = _unit_rows(
            rng.standard_normal((m, fit.shape[1]), dtype=np.float32) @ factor + mean)
    return out


def queries_from(corpus: np.ndarray, count: int, seed: int = 1) -> np.ndarray:
    """Perturbed corpus points, shape (count, dim)."""
    rng = np.random.default_rng(seed)
    q = corpus[rng.choice(len(corpus), count, replace=False)]
    q = q + 0.3 * rng.standard_normal(q.shape, dtype=np.float32) / math.sqrt(q.shape[1])
    return _unit_rows(q)


def make_data(kind: str, size: int, dim: int, queries: int, real: np.ndarray | None,
              fit: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(corpus (size, dim), queries (queries, dim)) for one run."""
    if real is not None:
        corpus = _unit_rows(real[:size])
        return corpus, queries_from(corpus, queries)
    if kind == "clustered":
        corpus = synthetic(size, dim)
        return corpus, queries_from(corpus, queries)
    if kind == "gaussian":
        if fit is None:
            raise SystemExit("--data gaussian needs --fit FILE.npy: real embeddings (n, dim) "
                             "whose mean and covariance the vectors get")
        both = gaussian(size + queries, fit)
    else:
        both = graded(size + queries, dim)  # queries: held-out points of the same topics
    return both[:size], both[size:]


class FactoryIndex:
    """A faiss ``index_factory`` index (inner product) with VectorIndex's ``search``/``nbytes``."""

    def __init__(self, dim: int, spec: str) -> None:
        import faiss

        self.spec = spec
        self.index = faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
        if isinstance(self.index, faiss.IndexIVFPQ):
            self.index.do_polysemous_training = False  # the factory's default: minutes at 10k
            self.index.pq.cp.max_points_per_centroid = 64  # PQ k-means on 16k points, not 64k

    def add(self, vectors: np.ndarray, nlist: int) -> None:
        if not self.index.is_trained:
            cap = max(_TRAIN_POINTS_PER_LIST * nlist, 256 * 39)  # PQ: 39 points per centroid
            sample = vectors if len(vectors) <= cap else vectors[
                np.random.default_rng(0).choice(len(vectors), cap, replace=False)]
            self.index.train(sample)
        self.index.add(vectors)

    def set(self, name: str, value: int) -> None:
        import faiss

        faiss.ParameterSpace().set_index_parameter(self.index, name, value)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        with omp_threads(1 if len(queries) < ONE_THREAD_BELOW else None):  # as VectorIndex
            return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    @property
    def nbytes(self) -> int:
        import faiss

        return int(faiss.serialize_index(self.index).nbytes)


@dataclass(frozen=True)
class Variant:
    """One index structure and the values of its search parameter to sweep.

    Attributes:
        label: Row label prefix ("ivf1264", "hnsw32", "IVF1264,PQ48").
        build: ``fn(corpus, ids) -> index`` (a VectorIndex or a FactoryIndex).
        param: Search parameter name ("nprobe", "efSearch") or "" for none.
        values: Values of ``param`` to time.
    """

    label: str
    build: Callable[[np.ndarray, list[str]], Any]
    param: str = ""
    values: tuple[int, ...] = ()


def set_param(index: Any, name: str, value: int) -> None:
    """Set a search parameter on a VectorIndex (through its config) or a FactoryIndex."""
    if isinstance(index, VectorIndex):
        field = {"nprobe": "nprobe", "efSearch": "ef_search"}[name]
        index.config = replace(index.config, **{field: value})
    else:
        index.set(name, value)


def variants(size: int, kinds: list[str], args: argparse.Namespace) -> list[Variant]:
    """The structures to build at one size, in ``kinds`` order."""
    use_gpu = False if args.cpu else None
    nlist = auto_nlist(size)
    nprobe = tuple(int(p) for p in args.nprobe.split(","))
    out: list[Variant] = []

    def product(config: IndexConfig) -> Callable[[np.ndarray, list[str]], VectorIndex]:
        def build(corpus: np.ndarray, ids: list[str]) -> VectorIndex:
            index = VectorIndex(corpus.shape[1], config)
            index.add(ids, corpus)
            return index
        return build

    def factory(spec: str) -> Callable[[np.ndarray, list[str]], FactoryIndex]:
        def build(corpus: np.ndarray, ids: list[str]) -> FactoryIndex:
            index = FactoryIndex(corpus.shape[1], spec)
            index.add(corpus, nlist)
            return index
        return build

    for kind in kinds:
        if kind == "flat":
            out.append(Variant("flat", product(IndexConfig("flat", use_gpu=use_gpu,
                                                           fp16=args.fp16))))
        elif kind == "ivf":
            out.append(Variant(f"ivf{nlist}", product(IndexConfig(
                "ivf", nlist=nlist, use_gpu=use_gpu, fp16=args.fp16)), "nprobe", nprobe))
        elif kind == "hnsw":
            out.append(Variant(f"hnsw{args.hnsw_m}", product(IndexConfig(
                "hnsw", hnsw_m=args.hnsw_m, ef_construction=args.ef_construction)),
                "efSearch", tuple(int(e) for e in args.ef_search.split(","))))
        elif kind == "sq16":
            out.append(Variant("sq16 (flat fp16)", factory(FACTORY["sq16"])))
        else:
            for m in ([0] if kind == "ivfsq16" else [int(m) for m in args.pq_m.split(",")]):
                spec = FACTORY[kind].format(nlist=nlist, m=m)
                out.append(Variant(spec, factory(spec), "nprobe", nprobe))
    return out


def measure(index: Any, queries: np.ndarray, k: int) -> tuple[float, float, float]:
    """(p50 ms, p95 ms) of one-query searches and ms of one batch of 100."""
    index.search(queries[:1], k)  # warm up
    times = []
    for q in queries:
        start = time.perf_counter()
        index.search(q[None, :], k)
        times.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    index.search(queries[:100], k)
    batch = (time.perf_counter() - start) * 1000
    return float(np.percentile(times, 50)), float(np.percentile(times, 95)), batch


def recall_at_10(top10: np.ndarray, exact_top10: np.ndarray | None) -> float:
    """Mean share of the exact top 10 found in ``top10`` (1.0 without a reference)."""
    if exact_top10 is None:
        return 1.0
    return float(np.mean([len(set(a) & set(b)) / 10
                          for a, b in zip(top10, exact_top10, strict=True)]))


def run_variant(variant: Variant, corpus: np.ndarray, ids: list[str], queries: np.ndarray,
                k: int, exact_top10: np.ndarray | None) -> list[tuple[Row, np.ndarray]]:
    """Build one structure, then time and score it at each value of its search parameter."""
    start = time.perf_counter()
    index = variant.build(corpus, ids)
    build = time.perf_counter() - start
    size_mb, per_vector = index.nbytes / 2**20, index.nbytes / len(ids)
    gpu = "/gpu" if getattr(index, "on_gpu", False) else ""
    rows = []
    for value in variant.values or (None,):
        label = variant.label + gpu
        if value is not None:
            set_param(index, variant.param, value)
            label += f",{'p' if variant.param == 'nprobe' else 'ef'}{value}"
        p50, p95, batch = measure(index, queries, k)
        _, top10 = index.search(queries, 10)  # (q, 10)
        rows.append((Row(len(ids), label, build, size_mb, per_vector, p50, p95, batch,
                         recall_at_10(top10, exact_top10)), top10))
    del index
    return rows


HEADER = (f"{'N':>9} {'index':<24} {'build s':>8} {'MB':>8} {'B/vec':>6} {'p50 ms':>8} "
          f"{'p95 ms':>8} {'batch100 ms':>11} {'R@10':>6}")


def format_row(row: Row) -> str:
    """One table line under :data:`HEADER`."""
    return (f"{row.size:>9,} {row.kind:<24} {row.build_s:>8.2f} {row.index_mb:>8.1f} "
            f"{row.bytes_per_vector:>6.0f} {row.p50_ms:>8.2f} {row.p95_ms:>8.2f} "
            f"{row.batch100_ms:>11.1f} {row.recall10:>6.3f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k", help="comma list: 10k,100k,1M")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--data", default="graded", choices=("graded", "gaussian", "clustered"),
                        help="synthetic generator (see the module doc)")
    parser.add_argument("--fit", default=None,
                        help="--data gaussian: .npy matrix of real embeddings to fit")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma list of {', '.join(KINDS)} (flat is always run first: it "
                             "is the recall reference)")
    parser.add_argument("--k", type=int, default=50, help="hits per query (default 50)")
    parser.add_argument("--queries", type=int, default=200, help="single queries timed")
    parser.add_argument("--nprobe", default="8,16,32", help="IVF nprobe values")
    parser.add_argument("--hnsw-m", type=int, default=32, help="HNSW links per node")
    parser.add_argument("--ef-construction", type=int, default=200)
    parser.add_argument("--ef-search", default="32,64,128", help="HNSW efSearch values")
    parser.add_argument("--pq-m", default="48", help="PQ bytes per vector (comma list)")
    parser.add_argument("--threads", type=int, default=0,
                        help="OpenMP threads of faiss (0: its default, one per core)")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even with a GPU")
    parser.add_argument("--fp16", action="store_true", help="float16 vectors on the GPU")
    parser.add_argument("--vectors", default=None,
                        help="a .npy matrix (n, dim) of real embeddings to use instead of "
                             "synthetic ones (sizes above n are skipped)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Parse options, run every size and kind, print a table."""
    args = parse_args(argv)
    kinds = ["flat", *(k for k in args.kinds.split(",") if k != "flat")]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"unknown kind(s) {', '.join(unknown)}; available: {', '.join(KINDS)}")
    if args.threads:
        import faiss

        faiss.omp_set_num_threads(args.threads)
    real = np.load(args.vectors, allow_pickle=False).astype(np.float32) if args.vectors else None
    fit = np.load(args.fit, allow_pickle=False) if args.fit else None
    print(f"data: {'real ' + args.vectors if real is not None else args.data}, k={args.k}, "
          f"threads: {args.threads or 'default'}")
    print(HEADER)
    for size in (parse_size(s) for s in args.sizes.split(",")):
        if real is not None and size > len(real):
            print(f"skip {size:,}: --vectors has only {len(real):,} rows")
            continue
        corpus, queries = make_data(args.data, size, args.dim, max(args.queries, 100), real, fit)
        ids = [str(i) for i in range(size)]
        exact = None
        for variant in variants(size, kinds, args):
            for row, top10 in run_variant(variant, corpus, ids, queries, args.k, exact):
                exact = top10 if exact is None else exact
                print(format_row(row), flush=True)
        del corpus


if __name__ == "__main__":
    main()
