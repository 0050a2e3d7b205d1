"""Stop rules side by side and their frontier (issue 43): each registered rule and a sweep of
each family's parameter, on the same learned orders, per task.

For every list with at least 2 relevant candidates (``--split train``: the train lists, each
scored by a ranker fitted on the other half of the train split, where the rules' parameters
were chosen; ``dev`` / ``test`` / ``heldout``: the lists of ``kbcurate simulate screening``;
``--hoc``: the ten Hallmarks of Cancer lists), the in-query learner screens to the end of the
list once, and every rule variant says where it would have stopped. Per task it prints
coverage (queries whose recall at stop met the target), mean screened at stop, its ratio to the
mean oracle stop and the mean recall at stop, then the frontier: the variants no other beats on
both coverage and screened. Usage::

    python benchmarks/stop_rules.py -w WS --split train [--tasks disease_gene,...] [--hoc]
        [--data-dir DIR] [--out stop-frontier.json] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np
from tqdm import tqdm

from curation.screening.queue import build_queue
from curation.screening.stop_base import ScreenedRun, StopRule
from curation.screening.stop_rules import (
    STOP_RULES,
    CalibratedPatienceRule,
    CalibratedRule,
    IrrelevantRunRule,
    stop_rule,
)
from curation.simulation.lists import list_texts, task_lists
from curation.simulation.screening import (
    DEFAULT_TASKS,
    MIN_RELEVANT,
    SimulationOptions,
    feedback_order,
    held_out,
    task_calibration,
)
from curation.simulation.screening_run import ReplayTask, hoc_task
from curation.simulation.stop_replay import replay_rules, stop_summary
from curation.store.config import resolve_data_dir
from curation.store.workspace import Workspace


def variants() -> dict[str, StopRule]:
    """The registered rules and a sweep of each family's parameter."""
    out: dict[str, StopRule] = {name: stop_rule(name) for name in STOP_RULES}
    for c in (0.5, 0.7, 0.8, 0.9, 0.99):
        out[f"calibrated@{c}"] = CalibratedRule(confidence=c)
    for length in (20, 30, 40, 60, 75, 100, 150):
        out[f"irrelevant_run@{length}"] = IrrelevantRunRule(length=length)
    for patience, short in ((40, 10), (50, 20), (75, 20), (100, 20), (60, 10), (60, 30)):
        out[f"calibrated_patience@{patience}/{short}"] = CalibratedPatienceRule(
            patience=patience, short=short)
    return out


def train_task(ws: Workspace, schema: str, split: str, quiet: bool) -> ReplayTask:
    """A schema's lists of ``split`` (train: scored out of fold), calibrated on its dev."""
    lists = task_lists(ws, schema, progress=not quiet, train=split == "train")
    calibration = task_calibration(lists)
    chosen = ([x for x in lists if x.split == "train" and x.n_relevant >= MIN_RELEVANT]
              if split == "train" else held_out(lists, split))
    return ReplayTask(schema, chosen, lambda item: list_texts(ws, item),
                      lambda _: calibration, calibration.to_json())


def replay(task: ReplayTask, rules: dict[str, StopRule], target: float,
           quiet: bool) -> dict[str, list]:
    """Every variant on every list of the task."""
    seed = SimulationOptions().seed
    found: dict[str, list] = defaultdict(list)
    for item in tqdm(task.lists, desc=task.name, disable=quiet, mininterval=1.0):
        queue = build_queue(item.qid, item.doc_ids, task.texts(item), item.static,
                            calibration=task.calibration(item))
        order = feedback_order(queue, item.relevant, SimulationOptions().learner,
                               until_all=False)
        run = ScreenedRun(item.qid, np.asarray(order), item.relevant, queue.prior,
                          target=target, seed=seed)
        for name, outcome in replay_rules(run, rules).items():
            found[name].append(outcome)
    return found


def frontier(summary: dict[str, dict]) -> list[str]:
    """Variants that no other beats on both coverage and screened at stop."""
    names = list(summary)
    return [a for a in names if not any(
        summary[b]["coverage"] >= summary[a]["coverage"]
        and summary[b]["screened_at_stop"] <= summary[a]["screened_at_stop"]
        and (summary[b]["coverage"], summary[b]["screened_at_stop"])
        != (summary[a]["coverage"], summary[a]["screened_at_stop"]) for b in names)]


def print_task(name: str, summary: dict[str, dict]) -> None:
    first = next(iter(summary.values()))
    print(f"\n{name}: {first['queries']} queries, oracle stop {first['oracle']:.1f} on average")
    print(f"{'rule':<34}{'coverage':>9}{'screened':>10}{'x oracle':>10}{'recall':>8}")
    edge = set(frontier(summary))
    for rule, s in sorted(summary.items(), key=lambda kv: kv[1]["screened_at_stop"]):
        mark = "F" if rule in edge else " "
        print(f"{mark} {rule:<32}{s['coverage']:>9.1%}{s['screened_at_stop']:>10.1f}"
              f"{s['x_oracle']:>9.1f}x{s['recall_at_stop']:>8.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-w", "--workspace", required=True)
    p.add_argument("--split", default="train", choices=("train", "dev", "test", "heldout"))
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                   help="BioRED schemas, comma-separated ('' for none)")
    p.add_argument("--hoc", action="store_true", help="also the Hallmarks of Cancer lists")
    p.add_argument("--data-dir", help="data folder for --hoc")
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--out", help="write the summaries (with per-query stops) as JSON")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()
    started, rules, report = time.perf_counter(), variants(), {}
    with Workspace.open(args.workspace) as ws:
        tasks = [train_task(ws, s, args.split, args.quiet)
                 for s in args.tasks.split(",") if s.strip()]
        if args.hoc:
            tasks.append(hoc_task(resolve_data_dir(args.data_dir)))
        pooled: dict[str, list] = defaultdict(list)
        for task in tasks:
            found = replay(task, rules, args.target, args.quiet)
            report[task.name] = {r: stop_summary(o) for r, o in found.items()}
            print_task(f"{task.name} / {args.split}", report[task.name])
            for r, o in found.items():
                pooled[r] += o
    if len(tasks) > 1:
        report["pooled"] = {r: stop_summary(o) for r, o in pooled.items()}
        print_task(f"pooled / {args.split}", report["pooled"])
    print(f"\n{time.perf_counter() - started:.0f} s")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"split": args.split, "target": args.target, "tasks": report,
                       "frontier": {t: frontier(s) for t, s in report.items()}}, fh, indent=1)


if __name__ == "__main__":
    main()
