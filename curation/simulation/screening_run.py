"""``kbcurate simulate screening``: replay every held-out query of one or more tasks and report
pooled and per-query figures (JSON), every stop rule side by side and the recall curves.

The report::

    {"split": ..., "tasks": [...], "options": {...}, "target": 0.95,
     "learners": {NAME: {metric: pooled mean, "queries": n}},          # all tasks together
     "by_task": {TASK: {"learners": {...}, "stop": {RULE: summary}, "calibration": {...}}},
     "stop": {RULE: {"coverage", "screened_at_stop", "oracle", "x_oracle", "work_saved",
                     "recall_at_stop", "queries",
                     "per_query": {"TASK/QID": {"stopped_at", "recall", "oracle", "met"}}}},
     "chosen": RULE,                      # the rule the app's advice uses (stopping.CHOSEN_RULE)
     "rules": {RULE: "what it does"},
     "queries": [{"schema", "qid", "split", "n", "relevant",
                  "learners": {NAME: {metric: value}}, "stop": {RULE: {...}}}],
     "curves": {NAME: [mean recall after 0..k screened]}}

A task is a BioRED schema of the workspace (its held-out lists with at least
``min_relevant`` relevant candidates), the ten Hallmarks of Cancer lists
(:mod:`curation.simulation.hoc`) or BC6PM's triage test set as one list
(:mod:`curation.simulation.bc6pm`); in ``by_task`` the per-query keys are the query ids alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from curation.screening.calibration import Calibration
from curation.screening.queue import build_queue
from curation.screening.stop_base import ScreenedRun, StopRule
from curation.screening.stopping import CHOSEN_RULE
from curation.simulation.lists import ScreeningList, list_texts, task_lists
from curation.simulation.metrics import METRICS, pooled, recall_curve
from curation.simulation.screening import (
    LEARNERS,
    SimulationOptions,
    feedback_order,
    held_out,
    replay_list,
    task_calibration,
)
from curation.simulation.stop_replay import (
    StopOutcome,
    format_stops,
    replay_rules,
    rules_named,
    stop_summary,
)
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]
#: Recall curves are kept for the first this many documents screened.
CURVE_DOCS = 300


@dataclass(frozen=True)
class ReplayTask:
    """The lists of one task and how to read their texts and prior."""

    name: str
    lists: list[ScreeningList]
    texts: Callable[[ScreeningList], list[str]]
    calibration: Callable[[ScreeningList], Calibration]
    calibration_json: dict[str, Any]


def workspace_task(ws: Workspace, schema: str, split: str, options: SimulationOptions,
                   progress: bool = True) -> ReplayTask:
    """A schema's ``split`` lists (cached), calibrated on its dev lists."""
    lists = task_lists(ws, schema, progress=progress)
    calibration = task_calibration(lists)
    return ReplayTask(schema, held_out(lists, split, options.min_relevant),
                      lambda item: list_texts(ws, item), lambda _: calibration,
                      calibration.to_json())


def hoc_task(data_dir: Path) -> ReplayTask:
    """The ten Hallmarks of Cancer lists, each calibrated on the other nine."""
    from curation.simulation.hoc import hoc_lists

    lists, texts, calibrations = hoc_lists(data_dir)
    return ReplayTask("hoc", lists, lambda item: [texts[d] for d in item.doc_ids],
                      lambda item: calibrations[item.qid],
                      {k: v.to_json() for k, v in calibrations.items()})


def bc6pm_task(data_dir: Path) -> ReplayTask:
    """BC6PM's triage test set as one list (704 relevant of 1,427) in BM25 order of the topic."""
    from curation.simulation.bc6pm import bc6pm_list

    item, texts, calibration = bc6pm_list(data_dir)
    return ReplayTask("bc6pm", [item], lambda _: texts, lambda _: calibration,
                      calibration.to_json())


def simulate_screening(ws: Workspace | None, schemas: Sequence[str], split: str, *,
                       learners: Sequence[str] = LEARNERS,
                       options: SimulationOptions | None = None, stops: bool = True,
                       rules: Sequence[str] | None = None, target: float = 0.95,
                       extra: Sequence[ReplayTask] = (), progress: bool = True,
                       report: Report | None = None) -> dict[str, Any]:
    """Replay the learners (and the stop rules) on the held-out queries of ``schemas`` and on
    the lists of the ``extra`` tasks.

    Raises:
        CurationError: An unknown learner, rule or split, or no query with enough relevant
            candidates.
    """
    options = options or SimulationOptions()
    _check_learners(learners)
    chosen_rules = rules_named(rules) if stops else {}
    started = time.perf_counter()
    tasks = [workspace_task(ws, s, split, options, progress) for s in schemas] if ws else []
    tasks += list(extra)
    rows: list[dict[str, Any]] = []
    by_task: dict[str, Any] = {}
    curves: dict[str, list[np.ndarray]] = {name: [] for name in learners}
    outcomes: dict[str, list[StopOutcome]] = {rule: [] for rule in chosen_rules}
    for t, task in enumerate(tasks):
        def tick(j: int, t: int = t, task: ReplayTask = task) -> None:
            if report:
                report((t + j / max(len(task.lists), 1)) / len(tasks),
                       f"{task.name}: {j}/{len(task.lists)} queries")

        task_rows, task_stops = _replay_task(task, split, learners, options, chosen_rules,
                                             target, curves, progress, tick)
        for rule, found in task_stops.items():
            outcomes[rule] += [replace(o, qid=f"{task.name}/{o.qid}") for o in found]
        by_task[task.name] = {"learners": {n: pooled(r["learners"][n] for r in task_rows)
                                           for n in learners},
                              "stop": {r: stop_summary(o) for r, o in task_stops.items() if o},
                              "calibration": task.calibration_json}
        rows += task_rows
    if not rows:
        raise CurationError(f"No {split} query of {', '.join(t.name for t in tasks) or 'no task'}"
                            f" has {options.min_relevant} relevant candidates; try another split")
    return {"split": split, "tasks": [t.name for t in tasks], "options": options.to_json(),
            "target": target,
            "learners": {n: pooled(r["learners"][n] for r in rows) for n in learners},
            "by_task": by_task,
            "stop": {r: stop_summary(o) for r, o in outcomes.items() if o},
            "chosen": CHOSEN_RULE,
            "rules": {name: rule.describe() for name, rule in chosen_rules.items()},
            "queries": rows,
            "curves": {n: np.mean(c, axis=0).round(4).tolist() for n, c in curves.items() if c},
            "seconds": round(time.perf_counter() - started, 1)}


def _replay_task(task: ReplayTask, split: str, learners: Sequence[str],
                 options: SimulationOptions, rules: dict[str, StopRule], target: float,
                 curves: dict[str, list[np.ndarray]], progress: bool,
                 tick: Callable[[int], None]) -> tuple[list[dict[str, Any]],
                                                       dict[str, list[StopOutcome]]]:
    """Every list of one task: its report rows and each rule's outcomes."""
    rows, stops = [], {rule: [] for rule in rules}
    for j, item in enumerate(tqdm(task.lists, desc=f"screening {task.name} ({split})",
                                  disable=not progress, mininterval=0.5), start=1):
        row = _replay(task, item, learners, options, rules, target, curves)
        for rule, outcome in row.pop("_stops", {}).items():
            stops[rule].append(outcome)
        rows.append(row)
        tick(j)
    return rows, stops


def _check_learners(learners: Sequence[str]) -> None:
    unknown = [x for x in learners if x not in LEARNERS]
    if unknown:
        raise CurationError(f"Unknown learner {unknown[0]!r}. Available options: "
                            f"{', '.join(LEARNERS)}")


def _replay(task: ReplayTask, item: ScreeningList, learners: Sequence[str],
            options: SimulationOptions, rules: dict[str, StopRule], target: float,
            curves: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    texts, calibration = task.texts(item), task.calibration(item)
    row: dict[str, Any] = {"schema": task.name, "qid": item.qid, "split": item.split,
                           "n": len(item.doc_ids), "relevant": item.n_relevant, "learners": {}}
    learned = queue = None
    if rules:  # the learned order to the end of the list serves the learner and the rules
        queue = build_queue(item.qid, item.doc_ids, texts, item.static, calibration=calibration)
        learned = feedback_order(queue, item.relevant, options.learner, until_all=False)
    for name in learners:
        result = replay_list(item, texts, name, calibration=calibration, options=options,
                             learned=learned)
        row["learners"][name] = {m: round(result.metrics[m], 4) for m in METRICS}
        curve = recall_curve(result.positions, result.n)[:CURVE_DOCS + 1]
        curves[name].append(np.pad(curve, (0, CURVE_DOCS + 1 - len(curve)), mode="edge"))
    if rules and queue is not None and learned is not None:
        run = ScreenedRun(item.qid, np.asarray(learned), item.relevant, queue.prior,
                          target=target, seed=options.seed)
        found = replay_rules(run, rules)
        row["stop"] = {rule: o.to_json() for rule, o in found.items()}
        row["_stops"] = found
    return row


def format_screening(result: dict[str, Any]) -> str:
    """Per task and pooled: one line per learner, then the stop rules side by side."""
    head = f"{'learner':<12}" + "".join(f"{m:>12}" for m in METRICS) + f"{'queries':>9}"
    lines = []
    sections = [(f"{s} / {result['split']}", v) for s, v in result["by_task"].items()]
    if len(result["by_task"]) > 1:
        sections.append((f"pooled / {result['split']}", {"learners": result["learners"],
                                                         "stop": result["stop"]}))
    for title, part in sections:
        lines += ["", title, head]
        for name, v in part["learners"].items():
            lines.append(f"{name:<12}" + "".join(f"{v[m]:>12.3f}" for m in METRICS)
                         + f"{v['queries']:>9}")
        if part.get("stop"):
            lines += format_stops(part["stop"], result["target"], result.get("chosen"))
    if result.get("stop"):
        lines += ["", f"* the app's rule: {result['chosen']}"]
    return "\n".join(lines).lstrip("\n")
