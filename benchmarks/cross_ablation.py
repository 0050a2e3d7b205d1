"""The cross-encoder's worth to the learned ranker (issue 45): the ablation table per task.

    python benchmarks/cross_ablation.py -w WS --cross disease_gene-cross@3 [--cross ...]
        [--dense-version disease_gene-edel@1 ...] [--base-dense] [--task T ...]

Per task, one ranker round per arm (train split, LightGBM, the dev gate as ``kbcurate rank
train``; the versions are saved in ``-w``), and its test NDCG@10 / EntityRecall@10:

* ``ranked``: BM25's top 100 and the lexical and matching features;
* ``+ dense``: with the task's dense version's (``--dense-version``, one per task) and / or the
  base model's (``--base-dense``) dense candidates and cosines, indexes built when missing;
* ``+ cross``: with the cross-encoder block (score, share, missing) of the task's cross version
  (``--cross``, made the schema's active cross-encoder in ``-w``), its scores of each query's
  top K (K = 50) computed into the workspace's cache first where missing (train, dev and test
  queries; the time is printed);
* ``+ all``: both (only with a dense option).

Also the cross version alone re-ranking BM25's top hits to its rerank depth (its recorded test
metrics), and the seconds spent scoring missing pairs and running the cross rounds. A task
without a ``--cross`` version gets the
``ranked`` and ``+ dense`` arms only.
"""

from __future__ import annotations

import argparse
import logging
import time

from curation.jobs.kinds import SYSTEM_USER
from curation.ranking.model import RankerOptions
from curation.search.ranked import open_first_stages
from curation.store.models import Models
from curation.store.workspace import Workspace
from curation.training.cross_versions import activate_cross
from curation.training.ranker import open_context, round_cross, train_ranker

TASKS = ("disease_gene", "chemical_gene", "variant_disease")


def arm(ws: Workspace, task: str, *, dense=None, base=None, cross=None, dense_version=None
        ) -> tuple[float, float, str]:
    """(test NDCG@10, test ER@10, version id) of one ranker round with these first stages."""
    ctx = open_context(ws, task, dense=dense, base=base, progress=False, cross=cross)
    rnd = train_ranker(ws, task, user=SYSTEM_USER, options=RankerOptions(), progress=False,
                       context=ctx, dense_version=dense_version)
    test = rnd.version.metrics["test"]
    return test["ndcg@10"], test.get("entity_recall@10", float("nan")), rnd.version.id


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--task", action="append", default=[])
    p.add_argument("--cross", action="append", default=[],
                   help="a cross version per task (SCHEMA-cross@N); repeat for each task")
    p.add_argument("--dense-version", action="append", default=[],
                   help="a trained dense version per task (SCHEMA-edel@N); repeat for each task")
    p.add_argument("--base-dense", action="store_true")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    ws = Workspace.open(args.workspace)
    crosses = {Models(ws).get(c).schema: c for c in args.cross}
    denses = {Models(ws).get(d).schema: d for d in args.dense_version}
    rows = []
    for task in args.task or TASKS:
        row = {"task": task}
        dense_version = denses.get(task)
        with_dense = bool(dense_version or args.base_dense)
        dense, base = (open_first_stages(ws, dense_version=dense_version, base=args.base_dense,
                                         progress=not args.quiet) if with_dense else (None, None))
        row["ranked"] = arm(ws, task)
        if with_dense:
            row["+ dense"] = arm(ws, task, dense=dense, base=base,
                                 dense_version=dense_version)
        if task in crosses:
            version = activate_cross(ws, crosses[task], user=SYSTEM_USER, start_scoring=False,
                                     reason="issue 45 ablation")
            row["alone"] = (version.metrics.get("test_ndcg@10", float("nan")),
                            version.metrics.get("test_entity_recall@10", float("nan")))
            started = time.perf_counter()
            cross = round_cross(ws, task, compute=True)
            row["+ cross"] = arm(ws, task, cross=cross)
            row["cross s"] = time.perf_counter() - started
            if with_dense:
                started = time.perf_counter()
                cross = round_cross(ws, task, compute=True)
                row["+ all"] = arm(ws, task, dense=dense, base=base, cross=cross,
                                   dense_version=dense_version)
                row["cross s"] += time.perf_counter() - started
        rows.append(row)
        print(row, flush=True)
    names = ["ranked", "+ dense", "+ cross", "+ all"]
    print(f"{'task':<16}" + "".join(f"{n:>16}" for n in names) + f"{'cross alone':>16}"
          + f"{'cross s':>9}")
    for row in rows:
        cells = "".join(f"{row[n][0]:>8.3f} /{row[n][1]:>6.3f}" if n in row else f"{'-':>16}"
                        for n in names)
        alone = (f"{row['alone'][0]:>8.3f} /{row['alone'][1]:>6.3f}" if "alone" in row
                 else f"{'-':>16}")
        print(f"{row['task']:<16}{cells}{alone}{row.get('cross s', 0.0):>9.0f}")
    print("test NDCG@10 / EntityRecall@10 of each arm's ranker round; cross alone: the cross "
          "version re-ranking BM25's top 100; cross s: scoring the cache's missing pairs and the "
          "+ cross rounds")


if __name__ == "__main__":
    main()
