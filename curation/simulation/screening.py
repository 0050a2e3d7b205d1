"""Replaying the screening of held-out queries (``kbcurate simulate --screening``).

Every query with at least 2 relevant candidates is screened one document at a time from its
list (:mod:`curation.simulation.lists`), the gold label revealed after each, by three learners:

* ``static``: today's order (the ranker's score), never changed;
* ``feedback``: the in-query learner (:mod:`curation.screening.learner`), re-scoring the
  unscreened rest after every label and screening its best next;
* ``random``: a seeded random order (per query), the floor.

The replay goes on until every relevant candidate is found (the metrics need no more); with
the stop rules (:mod:`curation.simulation.stop_replay`) the learned order goes on to the end of
the list and serves both. ``heldout`` is dev and test together; the learner's options were
chosen on dev only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curation.screening.calibration import DEFAULT_CALIBRATION, Calibration, fit_calibration
from curation.screening.learner import LearnerOptions, rescore
from curation.screening.queue import ScreeningQueue, build_queue
from curation.screening.stop_samples import seeded_permutation
from curation.simulation.lists import ScreeningList
from curation.simulation.metrics import relevant_positions, screening_metrics
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

LEARNERS = ("static", "feedback", "random")
#: The BioRED relations pooled for the targets (issue 38).
DEFAULT_TASKS = ("disease_gene", "chemical_gene", "variant_disease")
SCREENING_SPLITS = ("dev", "test", "heldout")
#: A query is replayed when it has at least this many relevant candidates.
MIN_RELEVANT = 2


@dataclass(frozen=True)
class SimulationOptions:
    """How the replay runs.

    Attributes:
        learner: The feedback learner's options.
        seed: Seed of the random order.
        min_relevant: Queries with fewer relevant candidates are left out.
    """

    learner: LearnerOptions = field(default_factory=LearnerOptions)
    seed: int = 13
    min_relevant: int = MIN_RELEVANT

    def to_json(self) -> dict[str, Any]:
        return {"learner": self.learner.to_json(), "seed": self.seed,
                "min_relevant": self.min_relevant}


@dataclass(frozen=True)
class Replay:
    """One learner on one list: where the relevant items came and the metrics."""

    learner: str
    positions: tuple[int, ...]
    n: int
    metrics: dict[str, float]


def held_out(lists: Sequence[ScreeningList], split: str,
             min_relevant: int = MIN_RELEVANT) -> list[ScreeningList]:
    """The lists of ``split`` ("dev", "test" or "heldout": both) with enough relevant items.

    Raises:
        CurationError: Unknown split.
    """
    if split not in SCREENING_SPLITS:
        raise CurationError(f"Unknown split {split!r}. Available options: "
                            f"{', '.join(SCREENING_SPLITS)}")
    wanted = ("dev", "test") if split == "heldout" else (split,)
    return [x for x in lists if x.split in wanted and x.n_relevant >= min_relevant]


def task_calibration(lists: Sequence[ScreeningList]) -> Calibration:
    """The ranker's score calibrated on the task's dev lists (all of them); the packaged
    default when the dev split has no relevant (or no irrelevant) candidate."""
    dev = [x for x in lists if x.split == "dev"]
    try:
        return fit_calibration([x.static for x in dev], [x.relevant for x in dev])
    except CurationError as exc:
        logger.warning("calibration on the dev lists failed (%s); using the default", exc)
        return DEFAULT_CALIBRATION


def random_order(qid: str, n: int, seed: int) -> list[int]:
    """A seeded permutation of ``range(n)``, stable per query id."""
    return [int(i) for i in seeded_permutation(qid, n, seed)]


def feedback_order(queue: ScreeningQueue, relevant: np.ndarray, options: LearnerOptions,
                   *, until_all: bool = True) -> list[int]:
    """Screen the queue's best unlabelled item after re-scoring on every label so far."""
    labels: dict[int, bool] = {}
    order: list[int] = []
    left = int(relevant.sum())
    while len(order) < len(queue) and (left > 0 or not until_all):
        best = rescore(queue, labels, options).order[0]
        labels[best] = bool(relevant[best])
        order.append(best)
        left -= int(relevant[best])
    return order


def replay_list(item: ScreeningList, texts: Sequence[str], learner: str, *,
                calibration: Calibration, options: SimulationOptions | None = None,
                learned: Sequence[int] | None = None) -> Replay:
    """Replay one learner on one list until every relevant item is found.

    Args:
        learned: The feedback order when already replayed (at least to the last relevant
            item; the stop rules' replay screens to the end), so it is not replayed twice.

    Raises:
        CurationError: Unknown learner, or the list has no relevant item.
    """
    options = options or SimulationOptions()
    n = len(item.doc_ids)
    if learner == "static":
        order = list(range(n))
    elif learner == "random":
        order = random_order(item.qid, n, options.seed)
    elif learner == "feedback" and learned is not None:
        order = list(learned)
    elif learner == "feedback":
        queue = build_queue(item.qid, item.doc_ids, texts, item.static,
                            calibration=calibration)
        order = feedback_order(queue, item.relevant, options.learner)
    else:
        raise CurationError(f"Unknown learner {learner!r}. Available options: "
                            f"{', '.join(LEARNERS)}")
    positions = relevant_positions(_until_last(order, item.relevant), item.relevant)
    return Replay(learner, tuple(positions), n, screening_metrics(positions, n))


def _until_last(order: list[int], relevant: np.ndarray) -> list[int]:
    last = max((k for k, i in enumerate(order) if relevant[i]), default=-1)
    return order[:last + 1]
