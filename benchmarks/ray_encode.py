"""Encoding throughput: one process vs Ray workers, on the same abstracts (bulk encoding).

Both runs go through :func:`retrievers.bulk_encode.bulk_encode` into a throwaway FAISS flat
collection (shards, writes and the manifest included), with the same model and shard size:

- ``local``: one encoder in this process (torch on every usable core);
- ``ray``: ``--workers`` Ray actors (torch threads: the usable cores divided among them). Ray is
  started before the clock runs (its start is printed on its own line); each actor's model
  load is inside the timed run, as it is in a real bulk encode.

Abstracts: the first ``--n`` documents of ``--workspace`` (title + abstract, as indexing
builds them), else of ``$KBCURATE_DATA/abstract_pool/abstract_pool.jsonl.gz``.

Usage::

    python benchmarks/ray_encode.py --n 2000                 # packaged all-MiniLM-L6-v2
    python benchmarks/ray_encode.py --n 50 --shard-size 10   # a quick check
    KBCURATE_RAY_ADDRESS=ray://head:10001 python benchmarks/ray_encode.py --n 2000 --workers 8
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path

from retrievers.bulk_encode import RAY_ADDRESS_ENV, BulkConfig, bulk_encode
from retrievers.encoder import Encoder, EncoderConfig, usable_cores
from retrievers.vector_store import StoreConfig, open_store


def abstracts(n: int, workspace: str | None) -> list[tuple[str, str]]:
    """The first ``n`` documents as (id, "title abstract")."""
    if workspace:
        from curation.search.indexing import corpus_docs
        from curation.store.workspace import Workspace

        with Workspace.open(workspace, read_only=True) as ws:
            return corpus_docs(ws)[:n]
    path = Path(os.environ.get("KBCURATE_DATA", "data")) / "abstract_pool" / \
        "abstract_pool.jsonl.gz"
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            docs.append((row["pmid"], f"{row['title']} {row['abstract']}".strip()))
            if len(docs) == n:
                break
    return docs


def timed_run(docs: list[tuple[str, str]], config: EncoderConfig, bulk: BulkConfig,
              dim: int, folder: Path) -> tuple[float, str]:
    store = open_store(StoreConfig("faiss", path=str(folder), index="flat"))
    collection = store.create("bench", dim)
    started = time.perf_counter()
    report = bulk_encode(docs, config, collection, folder / "manifest.json", bulk, progress=False)
    seconds = time.perf_counter() - started
    assert report.vectors == len(docs), report
    return seconds, report.engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="abstracts to encode")
    parser.add_argument("--workspace", help="take the abstracts from this workspace")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-size", type=int, default=250)
    parser.add_argument("--max-seq-length", type=int, default=256)
    args = parser.parse_args()
    docs = abstracts(args.n, args.workspace)
    config = EncoderConfig(model=args.model, max_seq_length=args.max_seq_length, device="cpu")
    dim = Encoder(config).dim
    print(f"{len(docs):,} abstracts, model {args.model}, shards of {args.shard_size}, "
          f"{usable_cores()} usable cores")
    results = {}
    with tempfile.TemporaryDirectory(prefix="ray-encode-") as tmp:
        local = BulkConfig(shard_size=args.shard_size, workers=1, engine="local")
        results["1 process"] = timed_run(docs, config, local, dim, Path(tmp) / "local")
        import ray

        started = time.perf_counter()
        address = os.environ.get(RAY_ADDRESS_ENV)
        ray.init(address=address, num_cpus=None if address else args.workers,
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
        print(f"ray start: {time.perf_counter() - started:.1f} s (not in the timings below)")
        try:
            remote = BulkConfig(shard_size=args.shard_size, workers=args.workers, engine="ray")
            results[f"ray, {args.workers} workers"] = timed_run(docs, config, remote, dim,
                                                                Path(tmp) / "ray")
        finally:
            ray.shutdown()
    print(f"{'run':<20} {'seconds':>8} {'abstracts/s':>12}")
    for name, (seconds, _) in results.items():
        print(f"{name:<20} {seconds:>8.2f} {len(docs) / seconds:>12.1f}")


if __name__ == "__main__":
    main()
