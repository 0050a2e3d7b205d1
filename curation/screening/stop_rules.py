"""Stop rules side by side (issue 43): each decides, from a query's labels in screened order,
when its screening may stop for a recall target.

A rule reads a :class:`ScreenedRun`: the candidates in the order they were (or will be)
screened, their labels, and the calibrated prior of :mod:`curation.screening.stopping` where
the rule needs a model. A *sequential* rule answers "stop after the first ``k`` labels?"
(:meth:`StopRule.holds`) and stops at the first ``k`` where it does; a *sampling* rule
(:mod:`curation.screening.stop_samples`) also screens candidates drawn at random (seeded), so
its cost is the union of what it screened. Every rule stops at the end of the list at the
latest. The registry :data:`STOP_RULES` maps a name to its rule with the shipped parameters;
:func:`stop_rule` looks one up. Which one the app's advice uses is
:data:`curation.screening.stopping.CHOSEN_RULE`, chosen by replaying every rule on the same
lists (``kbcurate simulate screening``; docs/evaluation.md, "Stop rules side by side").

References:
    Callaghan & Mueller-Hansen 2020, "Statistical stopping criteria for automated screening in
    systematic reviews", Systematic Reviews 9:273 (``random_sample``).
    Cormack & Grossman 2016, "Engineering quality and reliability in technology-assisted
    review", SIGIR (``knee``).
    Lewis, Yang & Frieder 2021, "Certifying one-phase technology-assisted reviews", CIKM
    (``quantile``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from curation.screening.stop_base import ScreenedRun, StopPoint, StopRule, ran_out
from curation.screening.stop_samples import QuantileRule, RandomSampleRule
from curation.screening.stopping import StopAdvice
from kb_sources.errors import CurationError


@dataclass(frozen=True)
class CalibratedRule(StopRule):
    """Stop when the calibrated ``P(recall >= target) >= confidence``
    (:func:`curation.screening.stopping.estimate_remaining`)."""

    confidence: float = 0.95
    name: ClassVar[str] = "calibrated"

    def holds(self, run: ScreenedRun, k: int) -> bool:
        return bool(run.found[k]) and run.remaining(k).p_target >= self.confidence

    def describe(self) -> str:
        return f"calibrated P(recall >= target) >= {self.confidence:.0%}"


def _runs(run: ScreenedRun) -> np.ndarray:
    """Irrelevant labels in a row after each k = 0..len(order) (0 while nothing is found)."""
    k = np.arange(len(run.found))
    return np.where(run.found > 0, k - run.last_hit, 0)


@dataclass(frozen=True)
class IrrelevantRunRule(StopRule):
    """Stop after ``length`` irrelevant labels in a row once something was found (the
    "N irrelevant in a row" heuristic of the issue's baselines)."""

    length: int = 50
    name: ClassVar[str] = "irrelevant_run"

    def holds(self, run: ScreenedRun, k: int) -> bool:
        return bool(run.found[k]) and run.irrelevant_run(k) >= self.length

    def stop(self, run: ScreenedRun) -> StopPoint:
        ok = np.flatnonzero(_runs(run) >= self.length)
        return StopPoint(int(ok[0]), int(run.found[ok[0]])) if len(ok) else ran_out(run)

    def describe(self) -> str:
        return f"{self.length} irrelevant in a row"


@dataclass(frozen=True)
class CalibratedPatienceRule(StopRule):
    """This project's design: patience, shortened when the calibrated model agrees.

    Stop after ``patience`` irrelevant labels in a row (model-free), or already after
    ``short`` in a row when the calibrated ``P(recall >= target)`` reaches ``confidence``.
    The long run guards against a model that is sure too early (the calibrated rule alone
    stopped short on variant_disease); the model's consent lets a query whose few relevant
    candidates all came first stop well before the long run (on lists with 2-12 relevant
    among 1,000 the oracle stop is ~20 documents, so a fixed run of 60 alone costs 4x it).
    Parameters chosen on the train lists (docs/evaluation.md, "Stop rules side by side").
    """

    patience: int = 60
    short: int = 20
    confidence: float = 0.95
    name: ClassVar[str] = "calibrated_patience"

    def holds(self, run: ScreenedRun, k: int) -> bool:
        r = run.irrelevant_run(k) if run.found[k] else 0
        return r >= self.patience or (
            r >= self.short and run.remaining(k).p_target >= self.confidence)

    def stop(self, run: ScreenedRun) -> StopPoint:
        for k in np.flatnonzero(_runs(run) >= min(self.short, self.patience)).tolist():
            if self.holds(run, k):
                return StopPoint(k, int(run.found[k]))
        return ran_out(run)

    def describe(self) -> str:
        return (f"{self.patience} irrelevant in a row, or {self.short} when calibrated "
                f"P(recall >= target) >= {self.confidence:.0%}")


def knee_ratio(found: np.ndarray, k: int) -> tuple[int, float]:
    """The knee of the gain curve after ``k`` labels and its slope ratio.

    The knee is the point farthest above the chord from the origin to ``(k, found[k])``
    (the difference curve of Kneedle, Satopaa et al. 2011, unsmoothed, as Cormack & Grossman
    2016 find it); the slope ratio is ``rho = (found[knee] / knee) / ((found[k] -
    found[knee] + 1) / (k - knee))`` (their +1 keeps it finite after the knee).

    Args:
        found: Relevant found after 0..len labels (``found[0] = 0``).
        k: Labels so far (>= 2).

    Returns:
        ``(knee, rho)``; ``(0, 0.0)`` while nothing is found.
    """
    if k < 2 or found[k] == 0:
        return 0, 0.0
    i = np.arange(1, k)
    gap = found[1:k] / found[k] - i / k
    knee = int(i[int(np.argmax(gap))])
    rho = (found[knee] / knee) / ((found[k] - found[knee] + 1) / (k - knee))
    return knee, float(rho)


@dataclass(frozen=True)
class KneeRule(StopRule):
    """The knee method (Cormack & Grossman 2016): stop when the slope ratio at the gain
    curve's knee reaches ``156 - min(found, 150)`` and at least ``min_screened`` candidates
    were screened (their 150; tarexp's ``KneeStoppingRule`` has no minimum and takes the
    largest ratio over every point instead of the knee's)."""

    min_screened: int = 150
    name: ClassVar[str] = "knee"

    def holds(self, run: ScreenedRun, k: int) -> bool:
        if k < max(self.min_screened, 2):
            return False
        _, rho = knee_ratio(run.found, k)
        return rho >= 156 - min(int(run.found[k]), 150)

    def describe(self) -> str:
        return f"knee slope ratio >= 156 - min(found, 150), >= {self.min_screened} screened"


#: Rule name -> a factory of the rule with its shipped parameters.
STOP_RULES: dict[str, Callable[[], StopRule]] = {
    CalibratedRule.name: CalibratedRule,
    RandomSampleRule.name: RandomSampleRule,
    KneeRule.name: KneeRule,
    QuantileRule.name: QuantileRule,
    IrrelevantRunRule.name: IrrelevantRunRule,
    CalibratedPatienceRule.name: CalibratedPatienceRule,
}


def stop_rule(name: str) -> StopRule:
    """The registered rule ``name`` with its shipped parameters.

    Raises:
        CurationError: Unknown name.
    """
    try:
        return STOP_RULES[name]()
    except KeyError:
        raise CurationError(f"Unknown stop rule {name!r}. Available options: "
                            f"{', '.join(STOP_RULES)}") from None


def advice(rule: StopRule, run: ScreenedRun) -> StopAdvice:
    """A sequential rule's advice after every label of ``run`` so far, in words (for a page:
    ``run`` holds the labels given, in the order they came).

    Raises:
        CurationError: ``rule`` decides by sampling (it needs its own draws, not advice).
    """
    if not rule.sequential:
        names = ", ".join(n for n, make in STOP_RULES.items() if make().sequential)
        raise CurationError(f"The {rule.name} rule decides by sampling; give a sequential "
                            f"rule: {names}")
    k = len(run.order)
    found, streak = int(run.found[k]), run.irrelevant_run(k) if run.found[k] else 0
    sure = run.remaining(k).p_target if run.prior is not None and found else 0.0
    if k and rule.holds(run, k):
        return StopAdvice(True, rule.name, sure, f"You can stop for {run.target:.0%} recall: "
                          f"{rule.describe()} ({found} relevant found, the last {streak} "
                          "irrelevant)")
    return StopAdvice(False, rule.name, sure, f"Keep screening: {found} relevant found, the "
                      f"last {streak} irrelevant; the rule stops at {rule.describe()}")
