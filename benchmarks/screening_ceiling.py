"""How far the in-query learner's strength can take documents-to-find-all (issue 38's target).

Replays the screening of every query with at least 2 relevant candidates (train lists scored
by a ranker fitted on the other half of the train split, dev and test lists by the ranker of
the train split: the lists of ``kbcurate simulate --screening``) with the learner at every
(similarity, dissimilarity) of a grid, the evidence shrinkage as shipped, and prints, per split
and for ``heldout`` (dev + test) per task and pooled, the change in mean documents to find all
against the static order of

* ``shipped``: the learner's default options;
* ``best fixed``: the one grid point best on that split in hindsight (a fit to the split
  itself: no choice made beforehand can beat it on that split);
* ``oracle``: each query's own best grid point in hindsight (a bound no single strength rule
  reaches: it knows the answer).

If even ``best fixed`` misses a target on the held-out split, no re-tuning of the strength
meets it; only a new signal can. Usage::

    python benchmarks/screening_ceiling.py -w WS [--similarity 0,8,16,32,64,128]
        [--dissimilarity 0,6,12,24,48,96] [--tasks disease_gene,chemical_gene,variant_disease]
        [--out ceiling.json] [--quiet]

``--out`` writes every list's documents to find all per strength (and the printed summaries) as
JSON, for a closer look at single queries.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections import defaultdict

from tqdm import tqdm

from curation.screening.learner import LearnerOptions
from curation.screening.queue import build_queue
from curation.simulation.lists import list_texts, task_lists
from curation.simulation.metrics import relevant_positions
from curation.simulation.screening import (
    DEFAULT_TASKS,
    MIN_RELEVANT,
    feedback_order,
    task_calibration,
)
from curation.store.workspace import Workspace

SPLITS = ("train", "dev", "test")


def replay_grid(ws: Workspace, tasks: list[str], grid: list[tuple[float, float]],
                quiet: bool) -> list[dict]:
    """One row per list: task, split, static docs to all, and docs to all per grid point."""
    shipped = LearnerOptions()
    rows = []
    for task in tasks:
        lists = task_lists(ws, task, progress=not quiet, train=True)
        calibration = task_calibration(lists)
        chosen = [x for x in lists if x.n_relevant >= MIN_RELEVANT]
        for item in tqdm(chosen, desc=f"{task}: {len(grid)} strengths", disable=quiet,
                         mininterval=1.0):
            queue = build_queue(item.qid, item.doc_ids, list_texts(ws, item), item.static,
                                calibration=calibration)
            found = {}
            for a, b in grid:  # every other option as shipped
                options = dataclasses.replace(shipped, similarity=a, dissimilarity=b)
                found[(a, b)] = max(relevant_positions(
                    feedback_order(queue, item.relevant, options), item.relevant))
            rows.append({"task": task, "split": item.split, "qid": item.qid,
                         "static": max(relevant_positions(range(len(item.relevant)),
                                                          item.relevant)),
                         "grid": found})
    return rows


def summary(rows: list[dict], grid: list[tuple[float, float]], default: tuple[float, float]
            ) -> dict[str, float | str | int]:
    static = sum(r["static"] for r in rows)
    per = {g: sum(r["grid"][g] for r in rows) for g in grid}
    best = min(grid, key=lambda g: (per[g], g))
    oracle = sum(min(r["grid"].values()) for r in rows)
    return {"queries": len(rows), "static": static / len(rows),
            "shipped": per[default] / static - 1, "best": f"{best[0]:g}/{best[1]:g}",
            "best_fixed": per[best] / static - 1, "oracle": oracle / static - 1}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    p.add_argument("--similarity", default="0,8,16,32,64,128")
    p.add_argument("--dissimilarity", default="0,6,12,24,48,96")
    p.add_argument("--out", help="write the per-list results and summaries as JSON here")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args()
    shipped = LearnerOptions()
    default = (shipped.similarity, shipped.dissimilarity)
    grid = sorted({(float(a), float(b)) for a in args.similarity.split(",")
                   for b in args.dissimilarity.split(",")} | {default})
    started = time.perf_counter()
    with Workspace.open(args.workspace, read_only=True) as ws:
        rows = replay_grid(ws, args.tasks.split(","), grid, args.quiet)
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["split"]].append(r)
        if r["split"] in ("dev", "test"):
            groups[f"heldout/{r['task']}"].append(r)
            groups["heldout (pooled)"].append(r)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{len(grid)} strengths (similarity/dissimilarity), shipped "
          f"{default[0]:g}/{default[1]:g}; {time.perf_counter() - started:.0f} s, "
          f"load {load:.1f}")
    print(f"{'lists':<28} {'queries':>7} {'static':>7} {'shipped':>8} {'best fixed':>16} "
          f"{'oracle':>7}   (change in mean documents to find all)")
    summaries = {}
    for name in [*SPLITS, *sorted(k for k in groups if k.startswith("heldout/")),
                 "heldout (pooled)"]:
        if not groups.get(name):
            continue
        s = summaries[name] = summary(groups[name], grid, default)
        print(f"{name:<28} {s['queries']:>7} {s['static']:>7.2f} {s['shipped']:>+8.1%} "
              f"{s['best_fixed']:>+8.1%} {s['best']:>7} {s['oracle']:>+7.1%}")
    if args.out:
        lists = [{**{k: r[k] for k in ("task", "split", "qid", "static")},
                  "docs_to_all": {f"{a:g}/{b:g}": v for (a, b), v in r["grid"].items()}}
                 for r in rows]
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"shipped": f"{default[0]:g}/{default[1]:g}", "summaries": summaries,
                       "lists": lists}, fh, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
