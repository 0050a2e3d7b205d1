"""FAISS flat vs Qdrant (local mode, exact) vs Qdrant HNSW (a server) on synthetic vectors.

For each size and engine, in a fresh process each (so memory is the engine's own): build time
(adding every vector through :mod:`retrievers.vector_store`, saving included), single-query
latency p50 / p95 over ``--queries`` one-at-a-time searches (k = 10), recall@10 against FAISS
flat, the store's size on disk and the process's resident memory after the build (RSS) and at
its peak. Vectors: the ``graded`` synthetic data of ``faiss_scaling.py`` (hierarchical topics
fitted to MiniLM vectors), 384-d.

Qdrant HNSW needs a server: ``--qdrant-url`` or ``$KBCURATE_QDRANT_URL`` (API key from
``$KBCURATE_QDRANT_API_KEY``); without one its rows say so. qdrant-client's local mode keeps
every vector in memory, searches by brute force and commits each point to SQLite on its own
(2.6-14 ms a point on the 2-core dev box, depending on load: 100k took 256 s), so its rows
stop at ``--local-max`` vectors (default 20,000, where qdrant-client itself advises a server);
raise it to time larger local builds.

Usage::

    python benchmarks/vector_scaling.py --sizes 100k,1M
    python benchmarks/vector_scaling.py --sizes 2000 --queries 50         # a quick check
    KBCURATE_QDRANT_URL=http://localhost:6333 python benchmarks/vector_scaling.py --sizes 1M
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faiss_scaling import graded, parse_size, queries_from  # noqa: E402

ENGINES = ("faiss-flat", "qdrant-local", "qdrant-hnsw")


def rss_mb() -> float:
    """Current resident set size of this process in MB (/proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def store_config(engine: str, folder: Path, url: str | None, batch: int) -> dict:
    if engine == "faiss-flat":
        return {"kind": "faiss", "path": str(folder), "index": "flat"}
    if engine == "qdrant-local":
        return {"kind": "qdrant", "path": str(folder), "url": None, "batch_size": batch}
    return {"kind": "qdrant", "url": url, "batch_size": batch, "path": str(folder)}


def worker(args: argparse.Namespace) -> None:
    """One engine, one size: build, time, print one JSON line."""
    from retrievers.vector_store import URL_ENV, open_store

    if args.engine == "qdrant-local":
        os.environ.pop(URL_ENV, None)
    vectors = np.load(args.data, mmap_mode="r")
    queries = np.load(args.query_file)
    ids = [f"doc{i}" for i in range(len(vectors))]
    folder = Path(args.folder)
    before = rss_mb()
    store = open_store(store_config(args.engine, folder, args.qdrant_url, args.batch))
    started = time.perf_counter()
    collection = store.create("bench", vectors.shape[1])
    for start in range(0, len(ids), 100_000):  # the flat index needs no training batch
        collection.add(ids[start:start + 100_000], np.asarray(vectors[start:start + 100_000]))
    collection.save()
    build_s = time.perf_counter() - started
    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        found.append(collection.search(q[None, :], 10).ids[0])
        times.append((time.perf_counter() - t) * 1000)
    row = {"engine": args.engine, "size": len(ids), "build_s": round(build_s, 2),
           "p50_ms": round(statistics.median(times), 3),
           "p95_ms": round(float(np.percentile(times, 95)), 3),
           "disk_mb": round(disk_mb(folder), 1) if folder.exists() else None,
           "rss_mb": round(rss_mb() - before, 1),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "ids": found}
    if args.engine == "qdrant-hnsw":
        store.drop("bench")
    store.close()
    print(json.dumps(row))


def run_engine(engine: str, args: argparse.Namespace, data: Path, queries: Path,
               tmp: Path) -> dict:
    folder = tmp / engine
    shutil.rmtree(folder, ignore_errors=True)
    cmd = [sys.executable, __file__, "--worker", "--engine", engine, "--data", str(data),
           "--query-file", str(queries), "--folder", str(folder), "--batch", str(args.batch)]
    if args.qdrant_url:
        cmd += ["--qdrant-url", args.qdrant_url]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"engine": engine, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def recall(found: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(e)) / max(1, len(e))
                          for f, e in zip(found, exact, strict=True)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1M", help="comma list: 2000, 100k, 1M")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1024, help="Qdrant vectors per upsert")
    parser.add_argument("--qdrant-url", default=os.environ.get("KBCURATE_QDRANT_URL"))
    parser.add_argument("--local-max", type=parse_size, default=20_000,
                        help="largest size run in Qdrant local mode (default 20k)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--engine", "--data", "--query-file", "--folder"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    engines = [e for e in args.engines.split(",") if e]
    print(f"{'size':>9} {'engine':<13} {'build s':>8} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'recall@10':>9} {'disk MB':>8} {'RSS MB':>7} {'peak MB':>8}")
    with tempfile.TemporaryDirectory(prefix="vector-scaling-") as name:
        tmp = Path(name)
        for size in (parse_size(s) for s in args.sizes.split(",")):
            vectors = graded(size, args.dim)
            np.save(tmp / "data.npy", vectors)
            np.save(tmp / "queries.npy", queries_from(vectors, args.queries))
            del vectors
            exact = None
            for engine in engines:
                if engine == "qdrant-local" and size > args.local_max:
                    print(f"{size:>9,} {engine:<13} skipped: above --local-max "
                          f"{args.local_max:,} (one SQLite commit per point)")
                    continue
                if engine == "qdrant-hnsw" and not args.qdrant_url:
                    print(f"{size:>9,} {engine:<13} skipped: no server (--qdrant-url or "
                          "$KBCURATE_QDRANT_URL)")
                    continue
                row = run_engine(engine, args, tmp / "data.npy", tmp / "queries.npy", tmp)
                if "error" in row:
                    print(f"{size:>9,} {engine:<13} failed: {row['error']}")
                    continue
                exact = row["ids"] if engine == "faiss-flat" else exact
                r10 = f"{recall(row['ids'], exact):.4f}" if exact else "-"
                disk = "-" if row["disk_mb"] is None else f"{row['disk_mb']:.1f}"
                print(f"{size:>9,} {engine:<13} {row['build_s']:>8.2f} {row['p50_ms']:>7.2f} "
                      f"{row['p95_ms']:>7.2f} {r10:>9} {disk:>8} {row['rss_mb']:>7.1f} "
                      f"{row['peak_rss_mb']:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
