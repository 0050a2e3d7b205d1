"""``kbcurate train-bench``: does training beat BM25? Train, then evaluate on test splits.

Per task (schema): train one EDEL round on the train split (dev picks the epoch), register it,
then evaluate on the **test** split over the whole workspace corpus: BM25, BM25+rerank, the
zero-shot base model, the EDEL-trained model, and hybrid / +rerank over the trained model.
Optionally the three ablations on the first task, and the other recipes as variants
(``bica-citations``, ``bica-knn``, ``biohicl``, ``biohicl-entity``), each as dense and
hybrid+rerank, and with ``second_stage`` also trained on top of the task's EDEL version. BioHiCL
learns from the corpus's MeSH headings, not from the task, so one BioHiCL version (trained with
the first task's dev split picking the epoch) is evaluated on every task. Prints one table per
task plus the targets of the issues (trained dense >= BM25 NDCG@10; best with training >= best
without + 3 pp; each recipe's gain over zero-shot).
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
from curation.training.recipes.edel import EdelOptions
from curation.training.recipes.edel.examples import Ablation
from curation.training.rounds import run_round

logger = logging.getLogger(__name__)

DEFAULT_TASKS = ("disease_gene", "chemical_gene", "variant_disease")
#: Bench variant -> (recipe, options that define it).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "bica-citations": ("bica", {"graph": "citations"}),
    "bica-knn": ("bica", {"graph": "knn"}),
    "biohicl": ("biohicl", {}),
    "biohicl-entity": ("biohicl", {"entity_mesh": True}),
}


def train_bench(ws: Workspace, tasks: Sequence[str] = DEFAULT_TASKS,
                options: EdelOptions | None = None, *, ablations: bool = False,
                zero_shot: bool = True, dtype: str = "auto", progress: bool = True,
                out: str | Path | None = None, emit: Callable[[str], None] | None = None,
                variants: Sequence[str] = (), edel: bool = True, second_stage: bool = False,
                recipe_values: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Train and evaluate per task; returns (and optionally writes) the JSON summary.

    Args:
        variants: Other recipes to train and evaluate (names of :data:`VARIANTS`).
        edel: Train and report EDEL (the default, and the base of ``second_stage``).
        second_stage: Also train each variant starting from the task's EDEL version.
        recipe_values: Extra options per recipe ("bica", "biohicl"), e.g. the token limit or
            ``mesh_descriptors`` for ``biohicl-entity``.
        emit: Receives each task's table as soon as it is done (the CLI prints it).
    """
    from curation.training.recipes import recipe_options

    options = options or EdelOptions()
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        from kb_sources.errors import CurationError
        raise CurationError(f"Unknown bench variant(s) {', '.join(unknown)}. Available: "
                            f"{', '.join(VARIANTS)}")
    summary: dict[str, Any] = {"options": options.__dict__, "dtype": dtype, "tasks": {}}
    shared: dict[str, Any] = {}  # variant -> version reused across tasks (BioHiCL)
    for n, schema in enumerate(tasks):
        entry: dict[str, Any] = {"training": {}}
        names: list[str] = ["bm25", "bm25+rerank"]
        opts: dict[str, dict[str, Any]] = {}
        reports = []
        if zero_shot:
            reports.append(_evaluate(ws, schema, ["dense"], {"dense": {
                "model": options.base, "dtype": dtype}}, progress, rename="dense (zero-shot)"))
        edel_version = None
        for ablation in ([Ablation.NONE.value] if edel else []) + (
                [a.value for a in Ablation if a is not Ablation.NONE] if ablations and n == 0
                else []):
            started = time.perf_counter()
            version = run_round(ws, schema, "edel", replace(options, ablation=ablation),
                                actor="bench", progress=progress).version
            entry["training"][ablation] = _training_entry(version, started)
            dense = {"model": version.id, "dtype": dtype}
            if ablation == Ablation.NONE:
                edel_version = version
                opts = {"dense": dense, "hybrid": {"dense": dense}}
                names += ["dense", "dense+rerank", "hybrid", "hybrid+rerank"]
            else:
                reports.append(_evaluate(ws, schema, ["dense"], {"dense": dense}, progress,
                                         rename=f"dense ({ablation})"))
        stages = [(v, None) for v in variants]
        if second_stage and edel_version is not None:
            stages += [(v, edel_version.id) for v in variants]
        for variant, start in stages:
            recipe, defining = VARIANTS[variant]
            label = variant if start is None else f"edel>{variant}"
            values = {**(recipe_values or {}).get(recipe, {}), **defining}
            if start is not None:
                values["base"] = start
            started = time.perf_counter()
            reuse = recipe == "biohicl" and start is None and label in shared
            version = shared[label] if reuse else run_round(
                ws, schema, recipe, recipe_options(recipe, values), actor="bench",
                progress=progress).version
            if recipe == "biohicl" and start is None:
                shared[label] = version
            entry["training"][label] = {**_training_entry(version, started), "reused": reuse}
            dense = {"model": version.id, "dtype": dtype}
            reports.append(_evaluate(ws, schema, ["dense", "hybrid+rerank"],
                                     {"dense": dense, "hybrid": {"dense": dense}}, progress,
                                     rename={"dense": f"dense ({label})",
                                             "hybrid+rerank": f"hybrid+rerank ({label})"}))
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


def _training_entry(version: Any, started: float) -> dict[str, Any]:
    m = version.manifest
    return {"version": version.id, "seconds": round(time.perf_counter() - started, 1),
            "train_seconds": m["seconds"], "examples": m["examples"].get("examples"),
            "classes": m["examples"].get("classes") or m["examples"].get("triplets_by_source"),
            "examples_per_second": m["examples_per_second"], "precision": m["precision"],
            "dev_scores": m["dev_scores"]}


def _evaluate(ws: Workspace, schema: str, names: list[str], opts: dict[str, dict[str, Any]],
              progress: bool, rename: str | dict[str, str] | None = None) -> dict[str, Any]:
    report = evaluate_workspace(ws, schema, names, split="test", options=opts,
                                progress=progress).to_json()
    if isinstance(rename, str):
        rename = {names[0]: rename}
    if rename:
        report["retrievers"] = {rename.get(k, k): v for k, v in report["retrievers"].items()}
    return report


def _targets(results: dict[str, dict[str, float]]) -> dict[str, Any]:
    def best(names: list[str]) -> tuple[str, float]:
        name = max(names, key=lambda n: results[n]["ndcg@10"])
        return name, results[name]["ndcg@10"]

    without = [n for n in results if n.startswith(("bm25", "dense (zero"))]
    trained = [n for n in results if n not in without and not n.startswith("dense (no-")]
    out: dict[str, Any] = {}
    zero = results.get("dense (zero-shot)", {}).get("ndcg@10")
    if zero is not None:
        out["gain_over_zero_shot_pp"] = {
            n: round(100 * (r["ndcg@10"] - zero), 2) for n, r in results.items()
            if n.startswith("dense") and n != "dense (zero-shot)"}
    if "dense" in results:
        out["dense_vs_bm25_ndcg@10"] = round(results["dense"]["ndcg@10"]
                                             - results["bm25"]["ndcg@10"], 4)
        out["dense_vs_bm25_er@10"] = round(results["dense"]["entity_recall@10"]
                                           - results["bm25"]["entity_recall@10"], 4)
    edel = [n for n in ("dense", "dense+rerank", "hybrid", "hybrid+rerank") if n in results]
    if edel and len(edel) < len(trained):
        (be, ve), (bt, vt) = best(edel), best(trained)
        out.update({"best_edel": be, "best_edel_ndcg@10": round(ve, 4),
                    "best_all_recipes": bt, "best_all_recipes_ndcg@10": round(vt, 4)})
    if trained and without:
        (bw, vw), (bt, vt) = best(without), best(trained)
        out.update({"best_without": bw, "best_without_ndcg@10": round(vw, 4),
                    "best_trained": bt, "best_trained_ndcg@10": round(vt, 4),
                    "gain_pp": round(100 * (vt - vw), 2), "target_gain_pp": 3.0})
    return out
