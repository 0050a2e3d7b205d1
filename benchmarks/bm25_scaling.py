"""BM25 (bm25s) build time, memory, disk and query latency at growing corpus sizes (issue 16).

The corpus is made from the real abstract pool (``$KBCURATE_DATA/abstract_pool``, 12,393
abstracts): a document of a larger corpus is a pool abstract whose sentences are shuffled with the
sentences of two other abstracts (seeded), so documents differ, their lengths and term
distribution stay PubMed-like, and each has ~1 abstract of text. The vocabulary cannot grow past
the pool's (real MEDLINE keeps adding rare terms: ~40M at 36M abstracts by Zipf-Heaps estimates),
so the vocabulary part of the memory is an underestimate; the posting lists (one entry per
distinct term per document) dominate and scale with the corpus, which is what is measured.

For each size it prints: tokenize time (the project's :class:`~retrievers.tokenize.
BiomedTokenizer`), bm25s index time, the process's resident memory after building (and the peak),
the size of the saved index, the number of posting entries (nnz), and single-query p50 / p95 over
``--queries`` templated-style queries (3-6 terms drawn from real titles). Then it extrapolates
linearly (time, nnz, memory) to ``--target`` documents (default 36M, all of PubMed).

Usage:
    python benchmarks/bm25_scaling.py --sizes 100k,1M
    python benchmarks/bm25_scaling.py --sizes 20k --queries 50      # a quick check
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import re
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from retrievers.bm25 import BM25Retriever

logger = logging.getLogger("bm25_scaling")

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def parse_size(text: str) -> int:
    """``100k`` -> 100000, ``1M`` -> 1000000, ``2500`` -> 2500."""
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def rss_mb() -> float:
    """Current resident memory of this process in MB (from /proc)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_pool(data_dir: Path) -> list[tuple[str, str]]:
    """(title, abstract) of every pool abstract with text."""
    path = data_dir / "abstract_pool" / "abstract_pool.jsonl.gz"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found; set KBCURATE_DATA to the shared data folder")
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("abstract"):
                rows.append((rec.get("title", ""), rec["abstract"]))
    return rows


def synth_corpus(pool: list[tuple[str, str]], n: int, seed: int) -> list[str]:
    """``n`` documents: the pool itself first, then sentence mixes of three pool abstracts."""
    rng = np.random.default_rng(seed)
    sentences = [_SENTENCE.split(abstract) for _, abstract in pool]
    docs = [f"{t} {a}" for t, a in pool[:n]]
    while len(docs) < n:
        a, b, c = rng.integers(0, len(pool), size=3)
        mixed = sentences[a] + sentences[b][: len(sentences[b]) // 2] + sentences[c][-2:]
        order = rng.permutation(len(mixed))
        keep = order[: max(3, len(sentences[a]))]
        docs.append(pool[a][0] + " " + " ".join(mixed[i] for i in sorted(keep)))
    return docs


def make_queries(pool: list[tuple[str, str]], n: int, seed: int) -> list[str]:
    """Short keyword queries (3-6 words of real titles), like a templated relation."""
    rng = np.random.default_rng(seed + 1)
    queries = []
    for i in rng.integers(0, len(pool), size=n):
        words = [w for w in re.findall(r"[A-Za-z0-9-]{3,}", pool[i][0])]
        if len(words) >= 3:
            k = int(rng.integers(3, min(6, len(words)) + 1))
            queries.append(" ".join(rng.choice(words, size=k, replace=False)))
    return queries


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def run_size(docs: list[str], queries: list[str], k: int) -> dict[str, float]:
    """Build, save, query one BM25 index over ``docs``; returns its figures."""
    retriever = BM25Retriever()
    ids = [str(i) for i in range(len(docs))]
    base = rss_mb()
    t0 = time.perf_counter()
    retriever.index(list(zip(ids, docs, strict=True)), progress=False)  # tokenizes only
    tokenize_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scorer = retriever._scorer()
    index_s = time.perf_counter() - t0
    built_rss = rss_mb()
    nnz = int(scorer.scores["data"].size)
    tmp = Path(tempfile.mkdtemp(prefix="bm25scale-"))
    try:
        t0 = time.perf_counter()
        retriever.save(tmp / "idx")
        save_s = time.perf_counter() - t0
        disk = folder_mb(tmp / "idx")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    retriever.search_batch(queries[:5], k=k)  # warm
    times = []
    for q in queries:
        t0 = time.perf_counter()
        retriever.search(q, k=k)
        times.append((time.perf_counter() - t0) * 1000)
    return {"docs": len(docs), "tokenize_docs_per_s": len(docs) / max(tokenize_s, 1e-9),
            "tokenize_s": tokenize_s, "index_s": index_s, "build_s": tokenize_s + index_s,
            "save_s": save_s, "rss_mb": built_rss - base, "peak_rss_mb": peak_rss_mb(),
            "disk_mb": disk, "nnz": nnz, "p50_ms": float(np.percentile(times, 50)),
            "p95_ms": float(np.percentile(times, 95))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100k,1M", help="corpus sizes (default 100k,1M)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per size")
    parser.add_argument("--k", type=int, default=100, help="hits per query (default 100)")
    parser.add_argument("--target", default="36M", help="size to extrapolate to (default 36M)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--data", default=os.environ.get("KBCURATE_DATA", "../shared/data"))
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    pool = load_pool(Path(args.data))
    queries = make_queries(pool, args.queries, args.seed)
    rows = []
    print(f"bm25s over the project tokenizer; corpus from {len(pool):,} pool abstracts "
          f"(sentence mixes above that); {len(queries)} queries, k={args.k}")
    print(f"{'docs':>10} {'tok/s':>7} {'index s':>8} {'build s':>8} {'save s':>7} "
          f"{'+RSS MB':>8} {'peak MB':>8} {'disk MB':>8} {'nnz':>12} {'p50 ms':>7} {'p95 ms':>7}")
    for size in (parse_size(s) for s in args.sizes.split(",")):
        docs = synth_corpus(pool, size, args.seed)
        row = run_size(docs, queries, args.k)
        del docs
        rows.append(row)
        print(f"{row['docs']:>10,} {row['tokenize_docs_per_s']:>7.0f} {row['index_s']:>8.1f} "
              f"{row['build_s']:>8.1f} "
              f"{row['save_s']:>7.1f} {row['rss_mb']:>8.0f} {row['peak_rss_mb']:>8.0f} "
              f"{row['disk_mb']:>8.0f} {row['nnz']:>12,} {row['p50_ms']:>7.1f} "
              f"{row['p95_ms']:>7.1f}", flush=True)
    target = parse_size(args.target)
    last = rows[-1]
    scale = target / last["docs"]
    print(f"linear extrapolation from {last['docs']:,} to {target:,} documents (x{scale:.0f}): "
          f"build {last['build_s'] * scale / 3600:.1f} h on one core set like this one, "
          f"posting entries {last['nnz'] * scale / 1e9:.1f} G, memory "
          f"{last['rss_mb'] * scale / 1024:.0f} GB, disk {last['disk_mb'] * scale / 1024:.0f} GB, "
          f"query p50 ~{last['p50_ms'] * scale:.0f} ms if one shard (bm25s scores every posting "
          f"of the query terms: latency grows with the corpus)")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "target": target}, indent=2))


if __name__ == "__main__":
    main()
