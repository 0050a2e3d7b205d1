"""Qdrant's HNSW on synthetic vectors, in process, through Qdrant Edge (``qdrant-edge-py``).

``vector_scaling.py`` times the product's Qdrant adapter, but on this machine only in
qdrant-client's local mode, which searches by brute force: there is no Qdrant server to install
here. Qdrant Edge is Qdrant's own storage and index engine (the segment, HNSW and optimizer code
of the server) embedded in a Python wheel, so it measures what the server's HNSW gives on the
same vectors, without the network hop: build time (upserts, then the optimizer building the
HNSW graph), single-query p50 / p95 and recall@10 against exact search, for several
``hnsw_ef``. It is a benchmark-only tool, not a project dependency::

    pip install qdrant-edge-py
    python benchmarks/qdrant_edge_hnsw.py --sizes 100k
    python benchmarks/qdrant_edge_hnsw.py --sizes 20k --ef 32,64 --queries 50   # a quick check

Vectors: the ``graded`` synthetic data of ``faiss_scaling.py`` (hierarchical topics fitted to
MiniLM vectors), 384-d, the same as ``vector_scaling.py``. HNSW settings default to Qdrant's
(m 16, ef_construct 100).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faiss_scaling import graded, parse_size, queries_from  # noqa: E402

DIM = 384


def exact_top10(corpus: np.ndarray, queries: np.ndarray, chunk: int = 50_000) -> np.ndarray:
    """Ids of the 10 highest cosines per query (rows are unit vectors), by brute force."""
    best_scores = np.full((len(queries), 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 10), dtype=np.int64)
    for start in range(0, len(corpus), chunk):
        scores = queries @ corpus[start:start + chunk].T
        top = np.argpartition(-scores, 10, axis=1)[:, :10]
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, 1)], 1)
        merged_ids = np.concatenate([best_ids, top + start], 1)
        order = np.argsort(-merged_scores, axis=1)[:, :10]
        best_scores = np.take_along_axis(merged_scores, order, 1)
        best_ids = np.take_along_axis(merged_ids, order, 1)
    return best_ids


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def run_size(qe: object, n: int, args: argparse.Namespace) -> dict:
    corpus = graded(n, DIM, seed=args.seed).astype(np.float32)
    queries = queries_from(corpus, args.queries).astype(np.float32)
    exact = exact_top10(corpus, queries)
    row: dict = {"docs": n, "m": args.m, "ef_construct": args.ef_construct}
    with tempfile.TemporaryDirectory(prefix="qdrant-edge-") as tmp:
        folder = Path(tmp) / "shard"
        config = qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine),
            hnsw_config=qe.HnswIndexConfig(m=args.m, ef_construct=args.ef_construct,
                                           full_scan_threshold=10_000))
        shard = qe.EdgeShard.create(str(folder), config)
        rss0 = rss_mb()
        started = time.perf_counter()
        for start in range(0, n, args.batch):
            points = [qe.Point(i, corpus[i].tolist(), {"doc_id": f"d{i}"})
                      for i in range(start, min(n, start + args.batch))]
            shard.update(qe.UpdateOperation.upsert_points(points))
        row["upsert_s"] = time.perf_counter() - started
        started = time.perf_counter()
        shard.optimize()
        row["index_s"] = time.perf_counter() - started
        shard.flush()
        info = shard.info()
        row.update(points=info.points_count, indexed=info.indexed_vectors_count,
                   segments=info.segments_count, rss_mb=rss_mb() - rss0,
                   disk_mb=disk_mb(folder))
        row["ef"] = {}
        for ef in args.ef:
            params = qe.SearchParams(hnsw_ef=ef)
            times, found = [], []
            for q in queries:
                request = qe.QueryRequest(limit=10, query=qe.Query.Nearest(q.tolist()),
                                          params=params)
                t0 = time.perf_counter()
                hits = shard.query(request)
                times.append(time.perf_counter() - t0)
                found.append([int(h.id) for h in hits])
            recall = float(np.mean([len(set(f) & set(e.tolist())) / 10
                                    for f, e in zip(found, exact, strict=True)]))
            row["ef"][ef] = {"p50_ms": 1000 * statistics.median(times),
                             "p95_ms": 1000 * float(np.percentile(times, 95)),
                             "recall@10": recall}
        shard.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k", help="corpus sizes (default 100k)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--m", type=int, default=16, help="HNSW edges per node (Qdrant: 16)")
    parser.add_argument("--ef-construct", type=int, default=100, help="(Qdrant: 100)")
    parser.add_argument("--ef", default="64,128,256", help="hnsw_ef values to search with")
    parser.add_argument("--batch", type=int, default=1000, help="points per upsert")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    args.ef = [int(v) for v in args.ef.split(",")]
    try:
        import qdrant_edge as qe
    except ImportError:
        parser.exit(2, "qdrant-edge-py is not installed (a benchmark-only tool): "
                       "pip install qdrant-edge-py\n")
    rows = [run_size(qe, parse_size(s), args) for s in args.sizes.split(",")]
    print(f"Qdrant Edge HNSW (m {args.m}, ef_construct {args.ef_construct}), graded 384-d "
          f"vectors, {args.queries} one-at-a-time queries, k=10, recall vs exact")
    print(f"{'docs':>10} {'upsert s':>9} {'index s':>8} {'indexed':>9} {'segs':>5} "
          f"{'+RSS MB':>8} {'disk MB':>8} {'ef':>5} {'p50 ms':>7} {'p95 ms':>7} {'recall':>7}")
    for row in rows:
        for ef, r in row["ef"].items():
            print(f"{row['docs']:>10,} {row['upsert_s']:>9.1f} {row['index_s']:>8.1f} "
                  f"{row['indexed']:>9,} {row['segments']:>5} {row['rss_mb']:>8.0f} "
                  f"{row['disk_mb']:>8.0f} {ef:>5} {r['p50_ms']:>7.2f} {r['p95_ms']:>7.2f} "
                  f"{r['recall@10']:>7.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
