"""What every stop rule reads and returns (:mod:`curation.screening.stop_rules`): a query's
labels in screened order (:class:`ScreenedRun`), where a rule stopped (:class:`StopPoint`) and
the rule interface (:class:`StopRule`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from curation.screening.stopping import Remaining, allowed_misses, estimate_remaining
from kb_sources.errors import CurationError


class ScreenedRun:
    """One query's candidates in screened order, with their labels and prior.

    In a replay ``order`` is the whole list (the learned order screened to the end) and a rule
    finds where it would have stopped; in the app it is the labels given so far.

    Args:
        qid: The query (seeds the sampling rules' draws).
        order: Queue rows in the order screened.
        relevant: Whether each queue row is relevant, in queue order. In a replay the gold of
            the whole list (a sampling rule reads the rows it draws); on a page the labels
            given and False elsewhere (a sequential rule reads only the screened rows).
        prior: Each queue row's calibrated prior log-odds (None: model-free rules only).
        target: Recall target.
        seed: Seed of the sampling rules' draws.
    """

    def __init__(self, qid: str, order: np.ndarray, relevant: np.ndarray,
                 prior: np.ndarray | None = None, *, target: float = 0.95, seed: int = 13):
        self.qid, self.seed, self.target = qid, seed, target
        self.order = np.asarray(order, dtype=np.int64)
        self.relevant = np.asarray(relevant, dtype=bool)
        self.prior = None if prior is None else np.asarray(prior, dtype=np.float64)
        self.n = len(self.relevant)
        self.hits = self.relevant[self.order]  # (len(order),) labels in screened order
        self.found = np.concatenate([[0], np.cumsum(self.hits)])  # found after k labels
        places = np.where(self.hits, np.arange(1, len(self.hits) + 1), 0)
        # labels up to the last relevant one, after k labels (0 while none is found)
        self.last_hit = np.concatenate([[0], np.maximum.accumulate(places)]).astype(np.int64)
        self.total = int(self.relevant.sum())
        self._remaining: dict[int, Remaining] = {}

    def remaining(self, k: int) -> Remaining:
        """The calibrated estimate after the first ``k`` labels (memoised).

        Raises:
            CurationError: The run has no prior.
        """
        if self.prior is None:
            raise CurationError("This rule needs the calibrated prior; build the run with "
                                "prior=queue.prior")
        if k not in self._remaining:
            rows = self.order[:k]
            labels = dict(zip(rows.tolist(), self.hits[:k].tolist(), strict=True))
            self._remaining[k] = estimate_remaining(self.prior, labels, target=self.target)
        return self._remaining[k]

    def irrelevant_run(self, k: int) -> int:
        """Irrelevant labels in a row at the end of the first ``k``."""
        return k - int(self.last_hit[k])

    def oracle(self) -> int:
        """Labels needed in this order to reach the target (``n`` when it never does)."""
        need = max(1, int(np.ceil(self.target * self.total - 1e-9)))
        reached = np.flatnonzero(self.found >= need)
        return int(reached[0]) if len(reached) else self.n


@dataclass(frozen=True)
class StopPoint:
    """Where a rule stopped on one run.

    Attributes:
        screened: Candidates labelled when it stopped (its cost; sampled ones included).
        found: Relevant among them.
        said_stop: Whether the rule said stop (False: it ran out of list).
    """

    screened: int
    found: int
    said_stop: bool = True

    def met(self, total: int, target: float) -> bool:
        """Whether the recall at this stop meets ``target`` (``total`` relevant in the list)."""
        return total - self.found <= allowed_misses(self.found, target)


class StopRule(ABC):
    """A stop rule: a name, its parameters, and where it stops on a run."""

    name: ClassVar[str]
    sequential: ClassVar[bool] = True

    def holds(self, run: ScreenedRun, k: int) -> bool:
        """Whether the rule says stop after the first ``k`` labels of ``run`` (sequential
        rules; a sampling rule answers through :meth:`stop` only)."""
        raise NotImplementedError(f"{self.name} decides by sampling; call stop()")

    def stop(self, run: ScreenedRun) -> StopPoint:
        """The first ``k`` at which :meth:`holds`, else the end of the screened labels."""
        for k in range(1, len(run.order) + 1):
            if self.holds(run, k):
                return StopPoint(k, int(run.found[k]))
        return ran_out(run)

    @abstractmethod
    def describe(self) -> str:
        """The rule and its parameters in a few words (for reports)."""


def ran_out(run: ScreenedRun) -> StopPoint:
    """The rule never said stop: the whole screened order (the list's end in a replay)."""
    k = len(run.order)
    return StopPoint(k, int(run.found[k]), said_stop=False)
