"""The cross-encoder recipe's figures (issue 45): training time, scoring time per relation, and
the cross-encoder alone re-ranking BM25's top 100 against BM25 alone.

Trains a cross version of ``--schema`` on a workspace with the recipe's defaults (or loads
``--version``), then prints:

* training: wall time of the round's training (data + train + dev scoring), pairs/s, epochs;
* scoring: seconds to score one relation's top K (K = 20 / 50 / 100) with the cross-encoder,
  median over ``--relations`` test relations, in bf16 and fp32 (CPU) or on the GPU;
* quality: NDCG@10 and EntityRecall@10 on the test queries of the cross-encoder re-ranking BM25's
  top 100 vs BM25 alone (BEIR's comparison: TREC-COVID 0.656 -> 0.757 with a MiniLM
  cross-encoder over BM25's top 100).

Run::

    cd /tmp && kbcurate demo -w /tmp/demo45 --no-serve --quiet     # a demo workspace
    python benchmarks/cross_encoder.py -w /tmp/demo45 --schema disease_gene
    python benchmarks/cross_encoder.py -w /tmp/demo45 --version disease_gene-cross@1
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

from curation.evaluation.harness import build_task
from curation.matching.matcher import EntityMatcher
from curation.store.models import Models
from curation.store.workspace import Workspace
from curation.training.measures import FirstStage, first_stage_metrics, rerank_metrics
from curation.training.recipes import recipe_options
from curation.training.rounds import run_round
from retrievers.cross import CrossScorer


def scoring_seconds(stage: FirstStage, queries: list, folder: str, fmt: str, depth: int,
                    precision: str, max_length: int) -> float:
    """Median seconds to score one relation's first-stage top ``depth``."""
    scorer = CrossScorer.load(folder, precision=precision, max_length=max_length)
    scorer.score("warm up", ["warm up"] * 4)
    times = []
    for q in queries:
        texts = [stage.text(h.doc_id, fmt) for h in stage.hits(q.text, depth)]
        started = time.perf_counter()
        scorer.score(q.text, texts)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--schema", default="disease_gene")
    p.add_argument("--version", help="an existing cross version (default: train one)")
    p.add_argument("--options", default="{}", help="JSON of cross recipe options")
    p.add_argument("--relations", type=int, default=20, help="test relations timed per K")
    p.add_argument("--depths", default="20,50,100")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO)
    with Workspace.open(args.workspace) as ws:
        task = build_task(ws, args.schema)
        if args.version:
            version = Models(ws).get(args.version)
            print(f"loaded {version.id}")
        else:
            started = time.perf_counter()
            options = recipe_options("cross", json.loads(args.options))
            version = run_round(ws, args.schema, "cross", options, actor="bench",
                                progress=not args.quiet).version
            total = time.perf_counter() - started
            m = version.manifest
            print(f"training round {version.id}: {total / 60:.1f} min in all (data, training, "
                  f"dev scoring, test re-ranking); training {m['seconds'] / 60:.1f} min, "
                  f"{m['examples']['examples']:,} pairs, {m['examples_per_second']:.2f} "
                  f"pairs/s, {m['epochs_run']} epoch(s), {m['precision']} on {m['device']}")
        m = version.manifest
        fmt, max_length = m.get("document_format", "{title} {abstract}"), int(
            m.get("max_seq_length", 256))
        stage = FirstStage(ws)
        tests = sorted(task.split("test"), key=lambda q: q.qid)
        timed = tests[:args.relations]
        import torch

        precisions = ["auto"] if torch.cuda.is_available() else ["bf16", "fp32"]
        print(f"scoring time per relation, median of {len(timed)} test relations:")
        for depth in (int(d) for d in args.depths.split(",")):
            row = [f"{precision} {scoring_seconds(stage, timed, str(version.model_dir), fmt, depth, precision, max_length):.2f} s"  # noqa: E501
                   for precision in precisions]
            print(f"  K = {depth:>3}: " + ", ".join(row))
        matcher = EntityMatcher()
        bm25 = first_stage_metrics(stage, tests, 100, matcher)
        cached = version.metrics.get("test_ndcg@10") if m.get("rerank_depth") == 100 else None
        if cached is not None and not version.metrics.get("test_left_out"):
            cross = {k.removeprefix("test_"): v for k, v in version.metrics.items()
                     if k.startswith("test_")}
        else:
            cross = rerank_metrics(stage, tests, version.model_dir, depth=100,
                                   document_format=fmt, max_length=max_length, matcher=matcher)
        print(f"test queries: {len(tests)}")
        for name, metrics in (("BM25 top 100", bm25), (f"{version.id} over BM25 top 100", cross)):
            print(f"  {name:<40} NDCG@10 {metrics['ndcg@10']:.3f}  "
                  f"ER@10 {metrics['entity_recall@10']:.3f}")


if __name__ == "__main__":
    main()
