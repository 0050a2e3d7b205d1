"""``kbcurate simulate --screening``: replay every held-out query of one or more tasks and
report pooled and per-query figures (JSON), the stopping rules' coverage and the recall curves.

The report::

    {"split": ..., "tasks": [...], "options": {...},
     "learners": {NAME: {metric: pooled mean, "queries": n}},          # all tasks together
     "by_task": {SCHEMA: {"learners": {...}, "stop": {...}, "calibration": {...}}},
     "stop": {RULE: {"coverage", "work_saved", "recall_at_stop", ...}},  # all tasks together
     "queries": [{"schema", "qid", "split", "n", "relevant",
                  "learners": {NAME: {metric: value}}, "stop": {RULE: {...}}}],
     "curves": {NAME: [mean recall after 0..k screened]}}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from curation.screening.queue import build_queue
from curation.simulation.lists import ScreeningList, list_texts, task_lists
from curation.simulation.metrics import METRICS, pooled, recall_curve
from curation.simulation.screening import (
    LEARNERS,
    SimulationOptions,
    held_out,
    replay_list,
    task_calibration,
)
from curation.simulation.stop_replay import STOP_RULES, replay_stops, stop_summary
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]
#: Recall curves are kept for the first this many documents screened.
CURVE_DOCS = 300


def simulate_screening(ws: Workspace, schemas: Sequence[str], split: str, *,
                       learners: Sequence[str] = LEARNERS,
                       options: SimulationOptions | None = None, stops: bool = True,
                       target: float = 0.95, progress: bool = True,
                       report: Report | None = None) -> dict[str, Any]:
    """Replay the learners (and the stopping rules) on the held-out queries of ``schemas``.

    Raises:
        CurationError: An unknown learner or split, or no query with enough relevant
            candidates.
    """
    options = options or SimulationOptions()
    _check_learners(learners)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    by_task: dict[str, Any] = {}
    curves: dict[str, list[np.ndarray]] = {name: [] for name in learners}
    outcomes: dict[str, list[Any]] = {rule: [] for rule in STOP_RULES}
    for t, schema in enumerate(schemas):
        lists = task_lists(ws, schema, progress=progress)
        calibration = task_calibration(lists)
        chosen = held_out(lists, split, options.min_relevant)
        task_rows, task_stops = [], {rule: [] for rule in STOP_RULES}
        for j, item in enumerate(tqdm(chosen, desc=f"screening {schema} ({split})",
                                      disable=not progress, mininterval=0.5)):
            row = _replay(ws, schema, item, learners, calibration, options, stops, target,
                          curves)
            for rule, outcome in row.pop("_stops", {}).items():
                task_stops[rule].append(outcome)
                outcomes[rule].append(outcome)
            task_rows.append(row)
            if report:
                report((t + (j + 1) / max(len(chosen), 1)) / len(schemas),
                       f"{schema}: {j + 1}/{len(chosen)} queries")
        by_task[schema] = {"learners": {n: pooled(r["learners"][n] for r in task_rows)
                                        for n in learners},
                           "stop": {r: stop_summary(o) for r, o in task_stops.items() if o},
                           "calibration": calibration.to_json()}
        rows += task_rows
    if not rows:
        raise CurationError(f"No {split} query of {', '.join(schemas)} has "
                            f"{options.min_relevant} relevant candidates; try another split")
    return {"split": split, "tasks": list(schemas), "options": options.to_json(),
            "target": target,
            "learners": {n: pooled(r["learners"][n] for r in rows) for n in learners},
            "by_task": by_task, "stop": {r: stop_summary(o) for r, o in outcomes.items() if o},
            "queries": rows,
            "curves": {n: np.mean(c, axis=0).round(4).tolist() for n, c in curves.items() if c},
            "seconds": round(time.perf_counter() - started, 1)}


def _check_learners(learners: Sequence[str]) -> None:
    unknown = [x for x in learners if x not in LEARNERS]
    if unknown:
        raise CurationError(f"Unknown learner {unknown[0]!r}. Available options: "
                            f"{', '.join(LEARNERS)}")


def _replay(ws: Workspace, schema: str, item: ScreeningList, learners: Sequence[str],
            calibration: Any, options: SimulationOptions, stops: bool, target: float,
            curves: dict[str, list[np.ndarray]]) -> dict[str, Any]:
    texts = list_texts(ws, item)
    row: dict[str, Any] = {"schema": schema, "qid": item.qid, "split": item.split,
                           "n": len(item.doc_ids), "relevant": item.n_relevant, "learners": {}}
    for name in learners:
        result = replay_list(item, texts, name, calibration=calibration, options=options)
        row["learners"][name] = {m: round(result.metrics[m], 4) for m in METRICS}
        curve = recall_curve(result.positions, result.n)[:CURVE_DOCS + 1]
        curves[name].append(np.pad(curve, (0, CURVE_DOCS + 1 - len(curve)), mode="edge"))
    if stops:
        queue = build_queue(item.qid, item.doc_ids, texts, item.static, calibration=calibration)
        found = replay_stops(queue, item.relevant, options.learner, target=target,
                             seed=options.seed)
        row["stop"] = {rule: o.to_json() for rule, o in found.items()}
        row["_stops"] = found
    return row


def format_screening(result: dict[str, Any]) -> str:
    """Per task and pooled: one line per learner, then the stopping rules."""
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
        for rule, s in part.get("stop", {}).items():
            lines.append(f"stop rule {rule} at {result['target']:.0%} recall: coverage "
                         f"{s['coverage']:.1%} of {s['queries']} queries, work saved "
                         f"{s['work_saved']:.1%}, mean recall at stop {s['recall_at_stop']:.3f}")
    return "\n".join(lines).lstrip("\n")
