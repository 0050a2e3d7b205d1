"""Label write latency with many concurrent writers: SQLite vs PostgreSQL (issue 16).

Usage::

    python benchmarks/label_writes.py --writers 20 --labels 5          # a quick check
    python benchmarks/label_writes.py --writers 20 --labels 200        # the issue's measurement
    python benchmarks/label_writes.py --stores postgresql --url postgresql://kb@db/bench

For each store a fresh workspace is made in a temporary folder (PostgreSQL: a throwaway server
started with ``initdb`` and default durability settings, as ``tests/pg_server.py`` does, unless
``--url`` names an empty database). ``--writers`` processes each open the workspace, wait for a
common start, then call ``curation.store.labels.Labels(ws).record`` ``--labels`` times (a distinct
query key per call, so every call is one new row), timing each call. The table shows per store:
calls, p50 / p99 / max latency in ms, labels written per second, calls that went to the outbox
(busy), and whether label rows == calls (no label lost).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

from curation.store.labels import Labels

REPO = Path(__file__).resolve().parents[1]


def _writer(root: str, n: int, labels: int, start: mp.synchronize.Event,
            out: mp.Queue) -> None:
    from curation.store.labels import LabelPending
    from curation.store.workspace import Workspace

    times, pending = [], 0
    with Workspace.open(root) as ws:
        start.wait()
        for i in range(labels):
            t0 = time.perf_counter()
            try:
                Labels(ws).record(user=f"w{n}", schema="PO", query_key=f"q{n}-{i}",
                                  query_text="bench", doc_id=str(i), grade="complete")
            except LabelPending:
                pending += 1
            times.append(time.perf_counter() - t0)
    out.put((times, pending))


def run_store(store: str, root: Path, url: str | None, writers: int, labels: int) -> dict:
    """Time ``writers`` x ``labels`` label calls on a fresh workspace at ``root``."""
    from curation.store.workspace import Workspace

    Workspace.init(root, store_url=url).close()
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(root), n, labels, start, out))
             for n in range(writers)]
    for p in procs:
        p.start()
    time.sleep(1.0)  # every writer has opened its connection
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    times = sorted(t for r in results for t in r[0])
    with Workspace.open(root) as ws:
        Labels(ws).flush_pending()
        rows = ws.stats().labels
    calls = writers * labels
    return {"store": store, "calls": calls, "p50": 1000 * statistics.median(times),
            "p99": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))],
            "max": 1000 * times[-1], "per_s": calls / wall,
            "pending": sum(r[1] for r in results), "lost": calls - rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--labels", type=int, default=50, help="labels per writer")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--url", help="an empty PostgreSQL database (default: a throwaway "
                                      "server in a temporary folder)")
    parser.add_argument("--pg-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="postgresql.conf line for the throwaway server, e.g. "
                             "synchronous_commit=off (SQLite's WAL + synchronous=NORMAL does "
                             "not wait for the disk at commit either)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "tests"))
    from pg_server import ThrowawayCluster

    rows = []
    cluster = None
    try:
        for store in args.stores.split(","):
            url = None
            if store == "postgresql":
                if args.url:
                    url = args.url
                else:
                    settings = dict(s.split("=", 1) for s in args.pg_setting)
                    cluster = ThrowawayCluster(settings).start()
                    url = cluster.create_database()
            with tempfile.TemporaryDirectory(prefix="kb-labels-") as tmp:
                rows.append(run_store(store, Path(tmp) / "ws", url, args.writers, args.labels))
    finally:
        if cluster is not None:
            cluster.stop()
    extra = f"; PostgreSQL {', '.join(args.pg_setting)}" if args.pg_setting else ""
    print(f"{args.writers} writer processes x {args.labels} labels{extra}\n")
    print("| store | calls | p50 ms | p99 ms | max ms | labels/s | pending | lost |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['store']} | {r['calls']} | {r['p50']:.1f} | {r['p99']:.1f} | "
              f"{r['max']:.1f} | {r['per_s']:.0f} | {r['pending']} | {r['lost']} |")
    return 1 if any(r["lost"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
