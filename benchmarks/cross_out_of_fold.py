"""Does cross-fitting the cross-encoder help the ranker? (issue 45, docs/evaluation.md)

The ranker's train rows read the cross version's score of train relations the cross-encoder was
trained on (in-sample). This trains two cross models, each on the train relations of one seeded
half left out (the recipe's own rows and options: ``build_examples``, ``train_cross``), scores
every train relation with the model that never saw it, and runs the ``+ cross`` and ``+ all``
ranker arms of ``cross_ablation.py`` on two out-of-fold versions:

* **A**: train relations read the out-of-fold score; dev and test read ``--full``'s (copied
  from its cache);
* **B**: train relations as in A; dev and test read the mean of the two halves.

Each is registered as a cross version of its own (``<schema>-crossoofa@n`` / ``crossoofb@n``,
imported without measurement) whose cache is filled here, so the arms read it as the product
does. ``--full``'s cache must hold every relation's top 50 first (run ``cross_ablation.py`` with
it); documents it holds for a text are the ones re-scored. Minutes per fold on a CPU; the fold
models are kept in ``--out`` and reused by a second run.

Run::

    python benchmarks/cross_out_of_fold.py -w /tmp/demo45 --schema disease_gene \\
        --full disease_gene-cross@3 --dense-version disease_gene-edel@1 --base-dense \\
        --out /tmp/oof_disease_gene
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path

import numpy as np

from curation.evaluation.harness import build_task
from curation.jobs.kinds import SYSTEM_USER
from curation.ranking.cross import fill, load_score
from curation.ranking.model import RankerOptions
from curation.search.ranked import open_first_stages
from curation.store.cross_scores import CrossScores, model_key
from curation.store.documents import Documents
from curation.store.models import Models
from curation.store.workspace import Workspace
from curation.training.cross_versions import activate_cross
from curation.training.imports import import_cross_encoder
from curation.training.ranker import open_context, round_cross, train_ranker
from curation.training.recipes import recipe_options
from curation.training.recipes.edel.examples import ExampleSet, build_examples, to_pairs
from curation.training.rounds import base_path
from retrievers.training.cross import train_cross

FOLDS = 2


def arm(ws, task, *, dense=None, base=None, cross=None, dense_version=None):
    """(test NDCG@10, test ER@10, held-out NDCG@10) of one ranker round."""
    ctx = open_context(ws, task, dense=dense, base=base, progress=False, cross=cross)
    rnd = train_ranker(ws, task, user=SYSTEM_USER, options=RankerOptions(), progress=False,
                       context=ctx, dense_version=dense_version)
    test = rnd.version.metrics["test"]
    held = rnd.version.metrics.get("heldout", {})
    return test["ndcg@10"], test.get("entity_recall@10", float("nan")), held.get("ndcg@10",
                                                                                float("nan"))


def train_folds(ws, schema, task, options, out: Path, seed: int) -> dict[str, int]:
    """Train (or reuse) one model per fold; qid -> its fold."""
    examples = build_examples(ws, schema, options.example_config(), task=task, progress=False)
    qids = sorted({e.qid for e in examples.examples})
    random.Random(seed).shuffle(qids)
    fold = {q: i % FOLDS for i, q in enumerate(qids)}
    base = base_path(ws, options.base)
    for f in range(FOLDS):
        if (out / f"fold{f}" / "model").is_dir():
            print(f"fold {f}: reusing {out / f'fold{f}' / 'model'}")
            continue
        rows = tuple(e for e in examples.examples if fold[e.qid] != f)
        started = time.perf_counter()
        train_cross(base, to_pairs(ExampleSet(schema, rows, examples.texts, examples.manifest)),
                    out / f"fold{f}", options.train_config(), loss=options.loss, progress=False)
        print(f"fold {f}: {len(rows):,} rows, {time.perf_counter() - started:.0f} s",
              flush=True)
    (out / "folds.json").write_text(json.dumps(fold, indent=1))
    return fold


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--schema", default="disease_gene")
    p.add_argument("--full", required=True, help="the cross version trained on every train "
                   "relation (its cache filled)")
    p.add_argument("--out", required=True, help="folder for the fold models")
    p.add_argument("--options", default="{}", help="JSON of cross recipe options")
    p.add_argument("--dense-version")
    p.add_argument("--base-dense", action="store_true")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s %(message)s")
    out = Path(args.out)
    with Workspace.open(args.workspace) as ws:
        task = build_task(ws, args.schema)
        fold = train_folds(ws, args.schema, task, recipe_options("cross", json.loads(
            args.options)), out, args.seed)
        full, store = Models(ws).get(args.full), CrossScores(ws)
        scorers = [load_score(out / f"fold{f}" / "model") for f in range(FOLDS)]

        def mean(query, documents):
            return np.mean([np.asarray(s(query, documents)) for s in scorers], axis=0)

        train = [q for q in task.split("train") if q.qid in fold]
        others = [*task.split("dev"), *task.split("test")]
        versions = {}
        for name, source in (("a", full.model_dir), ("b", out / "fold0" / "model")):
            versions[name] = import_cross_encoder(ws, str(source), schema=args.schema,
                                                  name=f"crossoof{name}", actor="bench",
                                                  evaluation=None)
        key_a, key_b = model_key(versions["a"]), model_key(versions["b"])
        started, pairs = time.perf_counter(), 0
        for q in train:
            docs = list(store.scored_docs(model_key(full), q.text))
            oof = fill(ws, key_a, scorers[fold[q.qid]], q.text, docs,
                       Documents(ws).parts(docs))
            store.put_many(key_b, q.text, oof)
            pairs += len(oof)
        print(f"out-of-fold scores of {len(train)} train relations: {pairs:,} pairs, "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        started, pairs = time.perf_counter(), 0
        for q in others:
            scored = store.scored_docs(model_key(full), q.text)
            store.put_many(key_a, q.text, scored)
            pairs += len(fill(ws, key_b, mean, q.text, list(scored),
                              Documents(ws).parts(scored)))
        print(f"the halves' mean on {len(others)} dev and test relations: {pairs:,} pairs, "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        with_dense = bool(args.dense_version or args.base_dense)
        dense, base = (open_first_stages(ws, dense_version=args.dense_version,
                                         base=args.base_dense, progress=not args.quiet)
                       if with_dense else (None, None))
        rows = {}
        for name, version in versions.items():
            activate_cross(ws, version.id, user=SYSTEM_USER, start_scoring=False,
                           reason="issue 45 out-of-fold experiment")
            cross = round_cross(ws, args.schema)
            if cross is None:
                raise SystemExit(f"{version.id}: fewer than 90% of the train relations have "
                                 f"cached scores; fill {args.full}'s cache first "
                                 "(benchmarks/cross_ablation.py --cross FULL)")
            rows[name] = {"+ cross": arm(ws, args.schema, cross=cross)}
            if with_dense:
                rows[name]["+ all"] = arm(ws, args.schema, dense=dense, base=base, cross=cross,
                                          dense_version=args.dense_version)
        print(f"{args.schema}: test NDCG@10 / ER@10 (held-out NDCG@10)")
        for name, row in rows.items():
            print(f"  {name} {versions[name].id:<28}" + "".join(
                f"  {arm_name} {v[0]:.3f} / {v[1]:.3f} ({v[2]:.3f})"
                for arm_name, v in row.items()))


if __name__ == "__main__":
    main()
