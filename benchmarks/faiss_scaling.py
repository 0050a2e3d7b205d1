"""FAISS search latency and memory at growing corpus sizes (exact vs IVF).

Synthetic, clustered, L2-normalised vectors (default 384-d, MiniLM's size) stand in for abstract
embeddings; queries are perturbed corpus points, so each has true near neighbours. For every size
and index kind it prints build time, index bytes, single-query latency (p50 / p95 over
``--queries`` one-at-a-time searches), the time of one batch of 100 queries, and recall@10 against
exact search. Runs on the GPU when faiss has GPU support and sees one.

Usage:
    python benchmarks/faiss_scaling.py --sizes 10k,100k,1M
    python benchmarks/faiss_scaling.py --sizes 12k --vectors pool_minilm.npy   # real embeddings
    python benchmarks/faiss_scaling.py --sizes 100k --nprobe 8,16,64 --k 50
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

from retrievers.faiss_index import IndexConfig, VectorIndex, auto_nlist


@dataclass(frozen=True)
class Row:
    """One benchmark result."""

    size: int
    kind: str
    build_s: float
    index_mb: float
    p50_ms: float
    p95_ms: float
    batch100_ms: float
    recall10: float


def parse_size(text: str) -> int:
    """'10k' -> 10_000, '1M' -> 1_000_000, '2500' -> 2500."""
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def synthetic(n: int, dim: int, seed: int = 0, chunk: int = 100_000) -> np.ndarray:
    """Clustered unit vectors, shape (n, dim) float32 (one cluster per ~1,000 points)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(10, n // 1000), dim), dtype=np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        block = centres[rng.integers(0, len(centres), m)]
        block += 0.6 * rng.standard_normal((m, dim), dtype=np.float32)
        out[start:start + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def queries_from(corpus: np.ndarray, count: int, seed: int = 1) -> np.ndarray:
    """Perturbed corpus points, shape (count, dim)."""
    rng = np.random.default_rng(seed)
    q = corpus[rng.choice(len(corpus), count, replace=False)]
    q = q + 0.3 * rng.standard_normal(q.shape, dtype=np.float32) / math.sqrt(q.shape[1])
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def measure(index: VectorIndex, queries: np.ndarray, k: int) -> tuple[float, float, float]:
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


def run_one(corpus: np.ndarray, ids: list[str], queries: np.ndarray, config: IndexConfig,
            k: int, exact_top10: np.ndarray | None) -> tuple[Row, np.ndarray]:
    """Build one index, time it, and compare its top 10 with the exact one."""
    start = time.perf_counter()
    index = VectorIndex(corpus.shape[1], config)
    index.add(ids, corpus)
    build = time.perf_counter() - start
    p50, p95, batch = measure(index, queries, k)
    _, top10 = index.search(queries, 10)  # (q, 10)
    recall = 1.0 if exact_top10 is None else float(np.mean(
        [len(set(a) & set(b)) / 10 for a, b in zip(top10, exact_top10, strict=True)]))
    kind = config.kind if config.kind == "flat" else f"ivf{index.nlist},p{config.nprobe}"
    gpu = "/gpu" if index.on_gpu else ""
    return Row(len(ids), kind + gpu, build, index.nbytes / 2**20, p50, p95, batch, recall), top10


def main(argv: list[str] | None = None) -> None:
    """Parse options, run every size and kind, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k", help="comma list: 10k,100k,1M")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=50, help="hits per query (default 50)")
    parser.add_argument("--queries", type=int, default=200, help="single queries timed")
    parser.add_argument("--nprobe", default="8,16", help="IVF nprobe values")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even with a GPU")
    parser.add_argument("--fp16", action="store_true", help="float16 vectors on the GPU")
    parser.add_argument("--vectors", default=None,
                        help="a .npy matrix (n, dim) of real embeddings to use instead of "
                             "synthetic ones (sizes above n are skipped)")
    args = parser.parse_args(argv)
    real = np.load(args.vectors, allow_pickle=False).astype(np.float32) if args.vectors else None
    use_gpu = False if args.cpu else None
    header = (f"{'N':>9} {'index':<18} {'build s':>8} {'MB':>8} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'batch100 ms':>11} {'R@10':>6}")
    print(header)
    for size in (parse_size(s) for s in args.sizes.split(",")):
        if real is not None and size > len(real):
            print(f"skip {size:,}: --vectors has only {len(real):,} rows")
            continue
        corpus = synthetic(size, args.dim) if real is None else \
            real[:size] / np.linalg.norm(real[:size], axis=1, keepdims=True)
        ids = [str(i) for i in range(size)]
        queries = queries_from(corpus, max(args.queries, 100))
        configs = [IndexConfig("flat", use_gpu=use_gpu, fp16=args.fp16)] + [
            IndexConfig("ivf", nlist=auto_nlist(size), nprobe=int(p), use_gpu=use_gpu,
                        fp16=args.fp16) for p in args.nprobe.split(",")]
        exact = None
        for config in configs:
            row, top10 = run_one(corpus, ids, queries, config, args.k, exact)
            exact = top10 if exact is None else exact
            print(f"{row.size:>9,} {row.kind:<18} {row.build_s:>8.2f} {row.index_mb:>8.1f} "
                  f"{row.p50_ms:>8.2f} {row.p95_ms:>8.2f} {row.batch100_ms:>11.1f} "
                  f"{row.recall10:>6.3f}", flush=True)
        del corpus


if __name__ == "__main__":
    main()
