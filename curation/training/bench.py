"""``kbcurate train-bench``: does EDEL training beat BM25? Train, then evaluate on test splits.

Per task (schema): train one EDEL round on the train split (dev picks the epoch), register it,
then evaluate on the **test** split over the whole workspace corpus: BM25, BM25+rerank, the
zero-shot base model, the EDEL-trained model, and hybrid / +rerank over the trained model.
Optionally the three ablations on the first task. Prints one table per task plus the targets of
the issue (trained dense >= BM25 NDCG@10; best with training >= best without + 3 pp).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from curation.evaluation.harness import format_table
from curation.evaluation.runner import evaluate_workspace
from curation.store.workspace import Workspace
from curation.training.edel import EdelOptions, train_edel
from curation.training.examples import Ablation

logger = logging.getLogger(__name__)

DEFAULT_TASKS = ("disease_gene", "chemical_gene", "variant_disease")


def train_bench(ws: Workspace, tasks: Sequence[str] = DEFAULT_TASKS,
                options: EdelOptions | None = None, *, ablations: bool = False,
                zero_shot: bool = True, dtype: str = "auto", progress: bool = True,
                out: str | Path | None = None,
                emit: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train and evaluate per task; returns (and optionally writes) the JSON summary.

    ``emit`` receives each task's table as soon as it is done (the CLI prints it).
    """
    options = options or EdelOptions()
    summary: dict[str, Any] = {"options": options.__dict__, "dtype": dtype, "tasks": {}}
    for n, schema in enumerate(tasks):
        variants = [Ablation.NONE.value]
        if ablations and n == 0:
            variants += [a.value for a in Ablation if a is not Ablation.NONE]
        entry: dict[str, Any] = {"training": {}}
        names: list[str] = ["bm25", "bm25+rerank"]
        opts: dict[str, dict[str, Any]] = {}
        reports = []
        if zero_shot:
            reports.append(_evaluate(ws, schema, ["dense"], {"dense": {
                "model": options.base, "dtype": dtype}}, progress, rename="dense (zero-shot)"))
        for ablation in variants:
            started = time.perf_counter()
            version = train_edel(ws, schema, replace(options, ablation=ablation), actor="bench",
                                 progress=progress)
            entry["training"][ablation] = {
                "version": version.id, "seconds": round(time.perf_counter() - started, 1),
                "train_seconds": version.manifest["seconds"],
                "examples": version.manifest["examples"]["examples"],
                "classes": version.manifest["examples"]["classes"],
                "examples_per_second": version.manifest["examples_per_second"],
                "precision": version.manifest["precision"],
                "dev_scores": version.manifest["dev_scores"]}
            dense = {"model": version.id, "dtype": dtype}
            if ablation == Ablation.NONE:
                opts = {"dense": dense, "hybrid": {"dense": dense}}
                names += ["dense", "dense+rerank", "hybrid", "hybrid+rerank"]
            else:
                reports.append(_evaluate(ws, schema, ["dense"], {"dense": dense}, progress,
                                         rename=f"dense ({ablation})"))
        reports.insert(0, _evaluate(ws, schema, names, opts, progress))
        merged = reports[0]
        for extra in reports[1:]:
            merged["retrievers"].update(extra["retrievers"])
        merged.pop("per_query", None)
        entry["report"] = merged
        entry["targets"] = _targets(merged["retrievers"])
        summary["tasks"][schema] = entry
        if emit:
            emit(format_table(merged) + "\n" + json.dumps(entry["targets"]))
        if out:
            Path(out).write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return summary


def _evaluate(ws: Workspace, schema: str, names: list[str], opts: dict[str, dict[str, Any]],
              progress: bool, rename: str | None = None) -> dict[str, Any]:
    report = evaluate_workspace(ws, schema, names, split="test", options=opts, progress=progress)
    if rename:
        report["retrievers"] = {rename: report["retrievers"][names[0]]}
    return report


def _targets(results: dict[str, dict[str, float]]) -> dict[str, Any]:
    def best(names: list[str]) -> tuple[str, float]:
        name = max(names, key=lambda n: results[n]["ndcg@10"])
        return name, results[name]["ndcg@10"]

    without = [n for n in results if n.startswith(("bm25", "dense (zero"))]
    trained = [n for n in ("dense", "dense+rerank", "hybrid", "hybrid+rerank") if n in results]
    out: dict[str, Any] = {}
    if "dense" in results:
        out["dense_vs_bm25_ndcg@10"] = round(results["dense"]["ndcg@10"]
                                             - results["bm25"]["ndcg@10"], 4)
        out["dense_vs_bm25_er@10"] = round(results["dense"]["entity_recall@10"]
                                           - results["bm25"]["entity_recall@10"], 4)
    if trained and without:
        (bw, vw), (bt, vt) = best(without), best(trained)
        out.update({"best_without": bw, "best_without_ndcg@10": round(vw, 4),
                    "best_trained": bt, "best_trained_ndcg@10": round(vt, 4),
                    "gain_pp": round(100 * (vt - vw), 2), "target_gain_pp": 3.0})
    return out
