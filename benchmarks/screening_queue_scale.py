"""The screening queue at 1,000 / 10,000 / 40,000 candidates: first open, memory, label re-score.

Issue 42: keyboard labels on a 40,000-candidate queue took up to 1.1 s and its first open 31 s
(1.07 GB). For each size this builds a queue (:func:`curation.screening.queue.build_queue`, what
the Curate page runs on the first open of a relation) and then replays a keyboard session of
``--labels`` labels: each label goes to the best unlabelled candidate (1 in 8 relevant) and is
followed by the page's call, :func:`curation.screening.view.screening_view` (the per-query model's
re-score, the estimate of what is left, the stopping advice). It prints:

* ``build s``: the queue's build (first open) time, wall clock; ``cpu s``: the process's CPU
  time for it (steadier than the wall clock on a shared machine: the build is one thread);
* ``peak MB``: the build's peak of traced allocations (``tracemalloc``: Python objects and NumPy
  / SciPy arrays; a second build, untimed); ``+RSS MB``: the process's peak resident memory
  during the timed build over its memory before it (with the candidate texts already loaded);
* ``queue MB``: what the built queue keeps (arrays, sparse rows, id and term strings);
* ``terms``: TF-IDF columns kept;
* ``view p50 / p99``: milliseconds per label for ``screening_view`` (``cpu p50``: its CPU
  time, all threads: above the wall clock where NumPy's BLAS runs two); ``rescore p50 / p99``:
  the per-query model's part
  (:func:`curation.screening.learner.rescore`).

Each size runs in a fresh process, so the peak belongs to that size. Candidates are abstracts
of the data folder's pool (``abstract_pool/abstract_pool.jsonl.gz`` under the folder
:func:`curation.store.config.resolve_data_dir` names: ``--data-dir``, ``$KBCURATE_DATA`` or
``../shared/data``), 12,393 of them, drawn without replacement up to the pool's size; above
it, a candidate is a pool abstract with a third of its sentences swapped for sentences of two
others and a few rare made-up terms (gene-like symbols drawn from a Zipf law), so the
vocabulary keeps growing with the candidate set as real text's does (Heaps' law) instead of
stopping at the pool's. The ranker's scores are normal draws (the work does not depend on them).

Usage::

    python benchmarks/screening_queue_scale.py                   # 1k, 10k, 40k; 30 labels
    python benchmarks/screening_queue_scale.py --sizes 1000 --labels 10 --quiet
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import multiprocessing
import os
import re
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from curation.screening.learner import rescore
from curation.screening.queue import build_queue
from curation.screening.view import screening_view
from curation.store.config import resolve_data_dir
from kb_sources.types import joined_text

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
#: Rare made-up terms per synthetic candidate (above the pool's size).
RARE_TERMS = 4


def pool_path(data_dir: Path) -> Path:
    return data_dir / "abstract_pool" / "abstract_pool.jsonl.gz"


def load_pool(data_dir: Path) -> list[str]:
    """Title + abstract of every pool abstract with text."""
    with gzip.open(pool_path(data_dir), "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [joined_text(r.get("title") or "", r["abstract"]) for r in rows if r.get("abstract")]


def candidates(pool: list[str], n: int, seed: int) -> list[str]:
    """``n`` candidate texts: pool abstracts (shuffled) first, then sentence mixes with rare
    terms (see the module docstring)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pool))
    texts = [pool[i] for i in order[:n]]
    if len(texts) == n:
        return texts
    sentences = [_SENTENCE.split(t) for t in pool]
    while len(texts) < n:
        a, b, c = rng.integers(0, len(pool), size=3)
        own = list(sentences[a])
        for k in rng.choice(len(own), size=len(own) // 3, replace=False):
            other = sentences[b] if k % 2 else sentences[c]
            own[k] = other[int(rng.integers(0, len(other)))]
        rare = rng.zipf(1.3, size=RARE_TERMS) % 5_000_000
        own.append(" ".join(f"gx{r:x} variant" for r in rare) + ".")
        texts.append(" ".join(own))
    return texts


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_size(data_dir: str, n: int, labels: int, seed: int, traced: bool) -> dict[str, Any]:
    """Figures of one size (run in a fresh process)."""
    texts = candidates(load_pool(Path(data_dir)), n, seed)
    rng = np.random.default_rng(seed)
    ids = [f"c{i}" for i in range(n)]
    static = rng.normal(size=n)
    gc.collect()
    before = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    queue = build_queue("bench", ids, texts, static)
    build_s, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_peak = peak_rss_mb() - before
    traced_mb = float("nan")
    if traced:
        tracemalloc.start()
        build_queue("bench", ids, texts, static)
        traced_mb = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    relevant = rng.random(n) < 0.05
    given: list[tuple[str, str]] = []
    labelled: dict[int, bool] = {}
    view_ms, view_cpu, rescore_ms = [], [], []
    for step in range(min(labels, n - 1)):
        t0, c0 = time.perf_counter(), time.process_time()
        view = screening_view(queue, given)
        view_ms.append(1000 * (time.perf_counter() - t0))
        view_cpu.append(1000 * (time.process_time() - c0))
        t0 = time.perf_counter()
        rescore(queue, labelled)
        rescore_ms.append(1000 * (time.perf_counter() - t0))
        best = queue.index()[view.order[0]]
        labelled[best] = bool(relevant[best]) or step % 8 == 0
        given.append((view.order[0], "complete" if labelled[best] else "irrelevant"))
    return {"n": n, "terms": len(queue.terms), "build_s": build_s, "build_cpu_s": build_cpu,
            "rss_mb": rss_peak, "traced_mb": traced_mb, "queue_mb": queue_bytes(queue) / 2**20,
            "view_p50": statistics.median(view_ms), "view_p99": _p99(view_ms),
            "view_cpu_p50": statistics.median(view_cpu),
            "rescore_p50": statistics.median(rescore_ms), "rescore_p99": _p99(rescore_ms)}


def queue_bytes(queue: Any) -> int:
    """What a built queue keeps: its arrays, its sparse rows and its id and term strings."""
    rows = queue.rows
    arrays = rows.data.nbytes + rows.indices.nbytes + rows.indptr.nbytes
    arrays += queue.static.nbytes + queue.prior.nbytes
    strings = sum(sys.getsizeof(s) for s in (*queue.doc_ids, *queue.terms))
    return arrays + strings + sys.getsizeof(queue.doc_ids) + sys.getsizeof(queue.terms)


def _p99(values: list[float]) -> float:
    return float(np.percentile(np.asarray(values), 99))


HEAD = (f"{'candidates':>10} {'terms':>8} {'build s':>8} {'cpu s':>6} {'peak MB':>8} "
        f"{'+RSS MB':>8} {'queue MB':>9} {'view p50':>9} {'p99':>7} {'cpu p50':>8} "
        f"{'rescore p50':>12} {'p99':>7}")


def row_line(r: dict[str, Any]) -> str:
    return (f"{r['n']:>10,} {r['terms']:>8,} {r['build_s']:>8.2f} {r['build_cpu_s']:>6.2f} "
            f"{r['traced_mb']:>8.0f} {r['rss_mb']:>8.0f} {r['queue_mb']:>9.1f} "
            f"{r['view_p50']:>9.1f} {r['view_p99']:>7.1f} {r['view_cpu_p50']:>8.1f} "
            f"{r['rescore_p50']:>12.1f} {r['rescore_p99']:>7.1f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,10000,40000", help="candidates per queue")
    p.add_argument("--labels", type=int, default=30, help="labels per simulated session")
    p.add_argument("--data-dir", help="data folder (default: $KBCURATE_DATA or ../shared/data)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--no-trace", action="store_true",
                   help="skip the second, traced build (its peak MB)")
    p.add_argument("--json", help="also write the figures as JSON here")
    p.add_argument("--quiet", action="store_true", help="print the table only")
    args = p.parse_args()
    data_dir = str(resolve_data_dir(args.data_dir))
    if not pool_path(Path(data_dir)).is_file():
        print(f"error: {pool_path(Path(data_dir))} not found; pass --data-dir or set "
              "KBCURATE_DATA to the shared data folder", file=sys.stderr)
        return 2
    sizes = [int(x) for x in args.sizes.split(",")]
    if not args.quiet:
        load = os.getloadavg()[0]
        print(f"screening queue at scale; data {data_dir}; {args.labels} labels per size; "
              f"load average {load:.2f} on {os.cpu_count()} CPUs")
    print(HEAD, flush=True)
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for n in sizes:
        with ctx.Pool(1) as pool:
            r = pool.apply(one_size, (data_dir, n, args.labels, args.seed, not args.no_trace))
        rows.append(r)
        print(row_line(r), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
