"""How long a re-score after a label takes, at 100 / 1,000 / 10,000 candidates.

Builds a screening queue from the workspace's abstracts (the first N; the ranker's scores are
stand-ins drawn from a normal distribution, which does not change the work), then times a
simulated session: labels arrive one by one in the learned order (1 relevant in 8), and after
each the page's call runs. Prints p50 / p95 of

* ``rescore``: the per-query model refit and the new order (what decides the next document),
* ``view``: ``screening_view`` (rescore + the estimate of what is left + the stop advice),

and the one-off queue build (TF-IDF of the candidate set). Usage::

    python benchmarks/screening_speed.py -w WS [--sizes 100,1000,10000] [--labels 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from curation.screening.learner import rescore
from curation.screening.queue import build_queue
from curation.screening.view import screening_view
from curation.store.documents import Documents
from curation.store.workspace import Workspace
from kb_sources.types import joined_text


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def bench(texts: list[str], ids: list[str], labels_given: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    n = len(texts)
    t0 = time.perf_counter()
    queue = build_queue("bench", ids, texts, rng.normal(size=n))
    build = time.perf_counter() - t0
    relevant = rng.random(n) < 0.05
    labels: dict[int, bool] = {}
    given: list[tuple[str, str]] = []
    rescore_ms, view_ms = [], []
    for step in range(min(labels_given, n - 1)):
        t0 = time.perf_counter()
        best = rescore(queue, labels).order[0]
        rescore_ms.append(1000 * (time.perf_counter() - t0))
        labels[best] = bool(relevant[best]) or step % 8 == 0
        given.append((queue.doc_ids[best], "complete" if labels[best] else "irrelevant"))
        t0 = time.perf_counter()
        screening_view(queue, given)
        view_ms.append(1000 * (time.perf_counter() - t0))
    return {"n": n, "build_s": build, "rescore_p50": statistics.median(rescore_ms),
            "rescore_p95": percentile(rescore_ms, 95), "view_p50": statistics.median(view_ms),
            "view_p95": percentile(view_ms, 95), "labels": len(rescore_ms)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--labels", type=int, default=60, help="labels per simulated session")
    p.add_argument("--seed", type=int, default=13)
    args = p.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with Workspace.open(args.workspace, read_only=True) as ws:
        rows = Documents(ws).all_parts(by_id=True)[:max(sizes)]
    if len(rows) < max(sizes):
        print(f"the workspace holds {len(rows)} documents; fewer than {max(sizes)}",
              file=sys.stderr)
        return 2
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.2f} on {os.cpu_count()} CPUs")
    print(f"{'candidates':>10} {'build s':>8} {'rescore p50':>12} {'p95':>8} "
          f"{'view p50':>9} {'p95':>8}  (ms; {args.labels} labels per session)")
    for n in sizes:
        ids = [r[0] for r in rows[:n]]
        texts = [joined_text(r[1] or "", r[2] or "") for r in rows[:n]]
        r = bench(texts, ids, args.labels, args.seed)
        print(f"{n:>10} {r['build_s']:>8.2f} {r['rescore_p50']:>12.1f} {r['rescore_p95']:>8.1f} "
              f"{r['view_p50']:>9.1f} {r['view_p95']:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
