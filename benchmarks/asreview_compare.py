"""ASReview LAB's default model against the project's screening learners on the same lists.

For every held-out query with at least 2 relevant candidates (the lists of ``kbcurate simulate
--screening``: the ranker's top 1,000 in the static order) and, with ``--bc6pm``, BC6PM's
triage test set as one list, this script

1. writes the list as a CSV (title, abstract, included) in the static order,
2. runs ``asreview simulate`` from a scratch environment (ASReview is not a project
   dependency) with its defaults: the ``elas_u4`` model (TF-IDF 1-2 grams + SVM, max query,
   balanced), no prior knowledge, so it starts top-down on the static order until it has a
   relevant and an irrelevant label, and stops after the last relevant record,
3. reads the labelling order from the project file (through the scratch environment's
   ``asreview`` package) and computes the metrics with the project's code
   (:mod:`curation.simulation.metrics`),

then replays the project's learners (static, feedback, random) on the same lists and prints
the figures side by side per task; the JSON holds every query's metrics. ASReview's results are
cached per list in the work folder, so a second run only replays.

Setup and use::

    python3 -m venv /tmp/asreview-venv && /tmp/asreview-venv/bin/pip install asreview==3.0.8
    python benchmarks/asreview_compare.py -w WS --split heldout --bc6pm --out compare.json
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from curation.screening.calibration import Calibration
from curation.simulation.lists import ScreeningList, list_texts, task_lists
from curation.simulation.metrics import METRICS, pooled, screening_metrics
from curation.simulation.screening import (
    DEFAULT_TASKS,
    SimulationOptions,
    held_out,
    replay_list,
    task_calibration,
)
from curation.store.config import resolve_data_dir
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger("asreview_compare")
PEER = "asreview-elas_u4"
#: Runs in the scratch environment: the project file -> record ids in labelling order (JSON).
_READ_ORDER = """
import json, sys, tempfile
from asreview import Project
with tempfile.TemporaryDirectory() as d:
    project = Project.load(sys.argv[1], d)
    table = project.db.get_results_table(["record_id", "label"])
    print(json.dumps([int(x) for x in table["record_id"].tolist()]))
"""


def write_csv(path: Path, item: ScreeningList, parts: list[tuple[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["title", "abstract", "included", "pmid"])
        for doc, (title, abstract), rel in zip(item.doc_ids, parts, item.relevant, strict=True):
            out.writerow([title, abstract, int(rel), doc])


def asreview_order(venv: Path, work: Path, item: ScreeningList,
                   parts: list[tuple[str, str]], seed: int) -> list[int]:
    """Row indices in the order ASReview labelled them (cached in ``work`` by the list's
    query and candidates in order)."""
    digest = hashlib.sha256("\n".join((item.qid, *item.doc_ids)).encode()).hexdigest()[:16]
    key = f"{item.split}-{digest}-{len(item.doc_ids)}"
    cached = work / f"{key}.order.json"
    if cached.is_file():
        data = json.loads(cached.read_text(encoding="utf-8"))
        if data["qid"] == item.qid:
            return data["order"]
    data_csv, project = work / f"{key}.csv", work / f"{key}.asreview"
    write_csv(data_csv, item, parts)
    project.unlink(missing_ok=True)
    run = subprocess.run([str(venv / "bin" / "asreview"), "simulate", str(data_csv), "-o",
                          str(project), "--seed", str(seed)], capture_output=True, text=True,
                         cwd=work)  # asreview leaves a cache file in its working folder
    if run.returncode != 0:
        raise CurationError(f"asreview simulate failed on {item.qid}: {run.stderr[-800:]}")
    read = subprocess.run([str(venv / "bin" / "python"), "-c", _READ_ORDER, str(project)],
                          capture_output=True, text=True, cwd=work)
    if read.returncode != 0:
        raise CurationError(f"reading {project} failed: {read.stderr[-800:]}")
    order = json.loads(read.stdout)
    cached.write_text(json.dumps({"qid": item.qid, "order": order}), encoding="utf-8")
    data_csv.unlink()
    project.unlink()
    return order


def compare_list(item: ScreeningList, texts: list[str], parts: list[tuple[str, str]],
                 calibration: Calibration, args: argparse.Namespace,
                 options: SimulationOptions) -> dict[str, Any]:
    row: dict[str, Any] = {"qid": item.qid, "split": item.split, "n": len(item.doc_ids),
                           "relevant": item.n_relevant, "learners": {}}
    t0 = time.perf_counter()
    order = asreview_order(args.venv, args.work, item, parts, args.seed)
    positions = [pos for pos, i in enumerate(order, start=1) if item.relevant[i]]
    if len(positions) != item.n_relevant:
        raise CurationError(f"ASReview stopped on {item.qid} before the last relevant record")
    row["learners"][PEER] = screening_metrics(positions, len(item.doc_ids))
    row["asreview_seconds"] = round(time.perf_counter() - t0, 2)
    for learner in args.learner:
        result = replay_list(item, texts, learner, calibration=calibration, options=options)
        row["learners"][learner] = result.metrics
    return row


def summarise(rows: list[dict[str, Any]], learners: list[str]) -> dict[str, dict[str, float]]:
    return {name: pooled(r["learners"][name] for r in rows) for name in learners}


def print_table(title: str, summary: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}")
    print(f"{'learner':<18}" + "".join(f"{m:>12}" for m in METRICS) + f"{'queries':>9}")
    for name, values in summary.items():
        print(f"{name:<18}" + "".join(f"{values[m]:>12.3f}" for m in METRICS)
              + f"{values['queries']:>9}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--task", action="append", default=[], metavar="SCHEMA")
    p.add_argument("--split", default="heldout", choices=("dev", "test", "heldout"))
    p.add_argument("--venv", type=Path, default=Path("/tmp/asreview-venv"))
    p.add_argument("--work", type=Path, default=Path("/tmp/asreview-work"))
    p.add_argument("--learner", action="append", default=[],
                   help="project learners to replay too (default static, feedback, random)")
    p.add_argument("--bc6pm", action="store_true", help="also BC6PM's triage test set")
    p.add_argument("--hoc", action="store_true",
                   help="also the Hallmarks of Cancer corpus (ten lists, one per hallmark)")
    p.add_argument("--no-tasks", action="store_true",
                   help="skip the BioRED tasks (only --bc6pm / --hoc)")
    p.add_argument("--data-dir", help="data folder (default: $KBCURATE_DATA or ../shared/data)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", help="write the JSON here")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    args.learner = args.learner or ["static", "feedback", "random"]
    if not (args.venv / "bin" / "asreview").is_file():
        print(f"no asreview in {args.venv}; python3 -m venv {args.venv} && "
              f"{args.venv}/bin/pip install asreview==3.0.8", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    options = SimulationOptions()
    names = [PEER, *args.learner]
    report: dict[str, Any] = {"peer": "asreview 3.0.8 elas_u4 (defaults, no priors)",
                              "split": args.split, "tasks": {}}
    with Workspace.open(args.workspace) as ws:
        pooled_rows: list[dict[str, Any]] = []
        for schema in [] if args.no_tasks else args.task or list(DEFAULT_TASKS):
            lists = task_lists(ws, schema)
            calibration = task_calibration(lists)
            rows = []
            for item in held_out(lists, args.split):
                texts = list_texts(ws, item)
                parts = _parts(ws, item)
                rows.append(compare_list(item, texts, parts, calibration, args, options))
            report["tasks"][schema] = {"summary": summarise(rows, names), "queries": rows}
            print_table(f"{schema} / {args.split}", report["tasks"][schema]["summary"])
            pooled_rows += rows
        if pooled_rows:
            report["pooled"] = summarise(pooled_rows, names)
            print_table(f"pooled / {args.split}", report["pooled"])
    if args.bc6pm:
        report["bc6pm"] = _bc6pm(args, options, names)
    if args.hoc:
        report["hoc"] = _hoc(args, options, names)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"\nwritten: {args.out}")
    return 0


def _parts(ws: Workspace, item: ScreeningList) -> list[tuple[str, str]]:
    from curation.store.documents import Documents

    parts = Documents(ws).parts(item.doc_ids)
    return [parts.get(d, ("", "")) for d in item.doc_ids]


def _bc6pm(args: argparse.Namespace, options: SimulationOptions,
           names: list[str]) -> dict[str, Any]:
    from curation.simulation.bc6pm import bc6pm_list

    item, texts, calibration = bc6pm_list(resolve_data_dir(args.data_dir))
    parts = [("", t) for t in texts]
    row = compare_list(item, texts, parts, calibration, args, options)
    print_table("BC6PM triage test (one list)", {n: pooled([row["learners"][n]]) for n in names})
    return row


def _hoc(args: argparse.Namespace, options: SimulationOptions,
         names: list[str]) -> dict[str, Any]:
    from curation.simulation.hoc import hoc_lists

    lists, texts, calibrations = hoc_lists(resolve_data_dir(args.data_dir))
    rows = []
    for item in lists:
        doc_texts = [texts[d] for d in item.doc_ids]
        rows.append(compare_list(item, doc_texts, [("", t) for t in doc_texts],
                                 calibrations[item.qid], args, options))
    summary = summarise(rows, names)
    print_table(f"Hallmarks of Cancer ({len(rows)} lists)", summary)
    return {"summary": summary, "queries": rows}


if __name__ == "__main__":
    sys.exit(main())
