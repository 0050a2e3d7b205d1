"""The learned ranker against the fixed configurations, on the test splits (issue 25).

    python benchmarks/ranker_bench.py -w kbcurate-demo [--task disease_gene ...] [--base-dense]
        [--dense-version V]

Per task: bm25 and bm25+rerank (``kbcurate evaluate``), then one ranker round (train split, dev
gate) and its test metrics; the ranker's training time (features and fit), the feature time of
one query's candidates, and the ``ranked`` query time end to end (BM25 top N -> features ->
scores; p50/p95 over the test queries). Prints one table. Saves ranker versions in the workspace
as ``kbcurate rank train`` does. ``--base-dense`` adds the base model's dense candidates and
cosines (its index over the workspace is built first when missing: ~12 min for 12k abstracts on
a 2-core CPU), ``--dense-version`` a trained dense version's.
"""

from __future__ import annotations

import argparse
import statistics
import time

from curation.evaluation.harness import build_task
from curation.evaluation.runner import evaluate_workspace
from curation.jobs.kinds import SYSTEM_USER
from curation.ranking.versions import load_ranker
from curation.store.workspace import Workspace
from curation.training.ranker import open_context, train_ranker

TASKS = ("disease_gene", "chemical_gene", "variant_disease")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", required=True)
    parser.add_argument("--task", action="append", default=[])
    parser.add_argument("--model", default="lightgbm", choices=("lightgbm", "logistic"))
    parser.add_argument("--base-dense", action="store_true")
    parser.add_argument("--dense-version")
    args = parser.parse_args()
    from curation.ranking.model import RankerOptions
    from curation.search.ranked import open_first_stages

    ws = Workspace.open(args.workspace)
    dense, base = open_first_stages(ws, dense_version=args.dense_version, base=args.base_dense,
                                    progress=True)
    rows = []
    for task in args.task or TASKS:
        report = evaluate_workspace(ws, task, ["bm25", "bm25+rerank"], progress=False)
        fixed = {n: v["ndcg@10"] for n, v in report.retrievers.items()}
        ctx = open_context(ws, task, dense=dense, base=base, progress=False)
        rnd = train_ranker(ws, task, user=SYSTEM_USER, options=RankerOptions(model=args.model),
                           progress=False, context=ctx, dense_version=args.dense_version)
        ranker = load_ranker(rnd.version)
        queries = build_task(ws, task).split("test")
        feature_ms, query_ms = [], []
        for q in queries:  # the context's matcher and tag caches are warm, as in a session
            t = time.perf_counter()
            cands = ctx.candidates(q.text)
            t1 = time.perf_counter()
            x = ctx.features(q.query, cands, q.qid)
            feature_ms.append(1000 * (time.perf_counter() - t1))
            ranker.score(x)
            query_ms.append(1000 * (time.perf_counter() - t))
        cold = open_context(ws, task, dense=dense, base=base, progress=False)
        cold_ms = []
        for q in queries:  # a fresh context: nothing of these queries cached
            t = time.perf_counter()
            cold.rank(ranker, q.text, q.query, 10, q.qid)
            cold_ms.append(1000 * (time.perf_counter() - t))
        test = rnd.version.metrics["test"]["ndcg@10"]
        rows.append((task, len(queries), fixed["bm25"], fixed["bm25+rerank"], test,
                     100 * (test - fixed["bm25+rerank"]), rnd.seconds_features, rnd.seconds_fit,
                     statistics.median(feature_ms), statistics.median(cold_ms),
                     sorted(cold_ms)[int(0.95 * (len(cold_ms) - 1))], rnd.version.id))
    print(f"{'task':<16}{'q':>4}{'bm25':>7}{'+rerank':>8}{'ranked':>8}{'d pp':>7}"
          f"{'feat s':>8}{'fit s':>7}{'feat ms':>9}{'p50 ms':>8}{'p95 ms':>8}  version")
    for r in rows:
        print(f"{r[0]:<16}{r[1]:>4}{r[2]:>7.3f}{r[3]:>8.3f}{r[4]:>8.3f}{r[5]:>+7.1f}"
              f"{r[6]:>8.1f}{r[7]:>7.1f}{r[8]:>9.0f}{r[9]:>8.0f}{r[10]:>8.0f}  {r[11]}")
    stages = " + ".join(["BM25 top 100", *(["dense version top 100"] if dense else []),
                          *(["base-model dense top 100"] if base else [])])
    print(f"NDCG@10 on the test splits; ranked = {args.model} over {stages}; "
          "feat s / fit s: training-set features / fit; feat ms: one query's "
          "candidates (warm caches); p50/p95: ranked query end to end, fresh context")


if __name__ == "__main__":
    main()
