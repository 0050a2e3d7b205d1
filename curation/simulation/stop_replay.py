"""Replaying the stopping rules of :mod:`curation.screening.stopping` on held-out queries.

The simulated curator screens a query in the in-query learned order and asks after every label
whether to stop:

* ``calibrated``: stops at the first label after which ``P(recall >= target) >= confidence``;
* ``random-sample``: screens the learned order until the calibrated estimate expects fewer than
  :data:`~curation.screening.stopping.SWITCH_EXPECTED` relevant left, then draws the rest in a
  seeded random order and stops when the hypergeometric test rejects "recall < target".

Either rule stops at the end of the list at the latest. Per query the replay records where it
stopped, the recall there and whether it met the target; pooled, the **coverage** (share of
queries whose recall met the target when the rule said stop: the rule is honest when this is at
least its confidence) and the **work saved** (mean share of the list left unscreened).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from curation.screening.learner import LearnerOptions, rescore
from curation.screening.queue import ScreeningQueue
from curation.screening.stopping import (
    SWITCH_EXPECTED,
    allowed_misses,
    estimate_remaining,
    hypergeometric_p,
)
from curation.simulation.screening import random_order

STOP_RULES = ("calibrated", "random-sample")


@dataclass(frozen=True)
class StopOutcome:
    """Where one rule stopped on one list."""

    rule: str
    stopped_at: int
    n: int
    found: int
    relevant: int
    met: bool

    @property
    def recall(self) -> float:
        return self.found / self.relevant if self.relevant else 1.0

    @property
    def work_saved(self) -> float:
        return 1.0 - self.stopped_at / self.n

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "recall": self.recall, "work_saved": self.work_saved}


def replay_stops(queue: ScreeningQueue, relevant: np.ndarray, learner: LearnerOptions, *,
                 target: float = 0.95, confidence: float = 0.95, seed: int = 13
                 ) -> dict[str, StopOutcome]:
    """Both rules on one list (queue order; ``relevant`` in the same order)."""
    n, total = len(queue), int(relevant.sum())
    labels: dict[int, bool] = {}
    calibrated: StopOutcome | None = None
    switch: tuple[int, int] | None = None  # (screened, found) when the sample phase begins
    found = 0
    while len(labels) < n and (calibrated is None or switch is None):
        best = rescore(queue, labels, learner).order[0]
        labels[best] = bool(relevant[best])
        found += int(relevant[best])
        rem = estimate_remaining(queue.prior, labels, target=target)
        if calibrated is None and found and rem.p_target >= confidence:
            calibrated = _outcome("calibrated", len(labels), n, found, total, target)
        if switch is None and found and rem.expected < SWITCH_EXPECTED:
            switch = (len(labels), found)
            screened_at_switch = set(labels)
    if calibrated is None:
        calibrated = _outcome("calibrated", n, n, total, total, target)
    if switch is None:
        sample = _outcome("random-sample", n, n, total, total, target)
    else:
        rest = [i for i in range(n) if i not in screened_at_switch]
        sample = _sample_phase(queue.query_key, rest, relevant, switch, n, total, target,
                               confidence, seed)
    return {"calibrated": calibrated, "random-sample": sample}


def _sample_phase(qid: str, rest: Sequence[int], relevant: np.ndarray, switch: tuple[int, int],
                  n: int, total: int, target: float, confidence: float,
                  seed: int) -> StopOutcome:
    screened, found_before = switch
    population = len(rest)
    hits = 0
    for drawn, j in enumerate(random_order(qid + ":sample", population, seed), start=1):
        hits += int(relevant[rest[j]])
        if hypergeometric_p(population, found_before, drawn, hits, target) < 1.0 - confidence:
            return _outcome("random-sample", screened + drawn, n, found_before + hits, total,
                            target)
    return _outcome("random-sample", n, n, total, total, target)


def _outcome(rule: str, stopped_at: int, n: int, found: int, total: int,
             target: float) -> StopOutcome:
    return StopOutcome(rule, stopped_at, n, found, total,
                       total - found <= allowed_misses(found, target))


def stop_summary(outcomes: Iterable[StopOutcome]) -> dict[str, float]:
    """Coverage, work saved, mean recall at stop and how many queries."""
    rows = list(outcomes)
    if not rows:
        return {"queries": 0}
    return {"queries": len(rows), "coverage": float(np.mean([o.met for o in rows])),
            "work_saved": float(np.mean([o.work_saved for o in rows])),
            "recall_at_stop": float(np.mean([o.recall for o in rows])),
            "screened_at_stop": float(np.mean([o.stopped_at for o in rows]))}
