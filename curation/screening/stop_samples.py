"""Stop rules that screen a random sample as well as the ranked order: their guarantee needs
no model, only that the sample was drawn at random (seeded per query).

* ``random_sample`` (Callaghan & Mueller-Hansen 2020, "Statistical stopping criteria for
  automated screening in systematic reviews", Systematic Reviews 9:273; buscarpy's
  ``calculate_h0`` with ``bias=1``): screen the learned order until the calibrated estimate
  expects fewer than ``switch_expected`` relevant left, then draw the rest at random and stop
  when the hypergeometric test rejects "recall < target"
  (:func:`curation.screening.stopping.hypergeometric_p`).
* ``quantile`` (QBCB, the Quantile Binomial Coefficient Bound of Lewis, Yang & Frieder 2021,
  "Certifying one-phase technology-assisted reviews", CIKM): before screening, draw a control
  sample at random until it holds ``r`` relevant documents. Those ``r`` are a uniform sample of
  the list's relevant ones, so the recall reached when the ``j``-th of them (in screened order)
  has been screened is the ``j``-th order statistic of ``r`` uniforms, and ``P(recall < t) =
  P(Binomial(r, t) >= j)``. Stop at the ``j``-th, for the smallest ``j`` with that
  probability at most ``1 - confidence`` (:func:`qbcb_rank`). At a 95% target and 95%
  confidence ``r`` must be at least 59 (``0.95^r <= 0.05``): a list with fewer relevant
  documents cannot be certified and the sample grows to the whole list.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.stats import binom

from curation.screening.stop_base import ScreenedRun, StopPoint, StopRule, ran_out
from curation.screening.stopping import SWITCH_EXPECTED, hypergeometric_p


def seeded_permutation(key: str, n: int, seed: int) -> np.ndarray:
    """A permutation of ``range(n)`` fixed by ``seed`` and ``key`` (a query id)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little")).permutation(n)


def qbcb_rank(positives: int, target: float, confidence: float) -> int | None:
    """QBCB's ``j``: the smallest ``j`` with ``P(Binomial(positives, target) >= j) <=
    1 - confidence`` (Lewis, Yang & Frieder 2021), or None when no ``j <= positives`` does.

    >>> qbcb_rank(59, 0.95, 0.95), qbcb_rank(58, 0.95, 0.95)
    (59, None)
    """
    if positives < 1:
        return None
    cdf = binom.cdf(np.arange(positives + 1), positives, target)  # P(X <= j - 1), j = 1..r+1
    ok = np.flatnonzero(cdf >= confidence - 1e-12)
    j = int(ok[0]) + 1 if len(ok) else positives + 1
    return j if j <= positives else None


def qbcb_sample_size(target: float, confidence: float, limit: int = 10_000) -> int:
    """The fewest control-sample positives for which QBCB can certify ``target``."""
    r = max(1, math.ceil(math.log(1.0 - confidence) / math.log(target) - 1e-9))
    while qbcb_rank(r, target, confidence) is None and r < limit:
        r += 1
    return r


@dataclass(frozen=True)
class RandomSampleRule(StopRule):
    """The ranked phase, then a random sample with the hypergeometric test (module
    docstring)."""

    confidence: float = 0.95
    switch_expected: float = SWITCH_EXPECTED
    name: ClassVar[str] = "random_sample"
    sequential: ClassVar[bool] = False

    def stop(self, run: ScreenedRun) -> StopPoint:
        switch = next((k for k in range(1, len(run.order) + 1) if run.found[k]
                       and run.remaining(k).expected < self.switch_expected), None)
        if switch is None:
            return ran_out(run)
        rest = np.setdiff1d(np.arange(run.n), run.order[:switch])
        draws = run.relevant[rest[seeded_permutation(run.qid + ":sample", len(rest),
                                                     run.seed)]]
        before, hits = int(run.found[switch]), 0
        for drawn, hit in enumerate(draws.tolist(), start=1):
            hits += hit
            p = hypergeometric_p(len(rest), before, drawn, hits, run.target)
            if p < 1.0 - self.confidence:
                return StopPoint(switch + drawn, before + hits)
        return StopPoint(run.n, run.total, said_stop=False)

    def describe(self) -> str:
        return (f"ranked until < {self.switch_expected:g} expected left, then a random sample "
                f"until p < {1 - self.confidence:.2f}")


@dataclass(frozen=True)
class QuantileRule(StopRule):
    """QBCB with a control sample of ``positives`` relevant (default: the fewest that can
    certify the target at this confidence; module docstring)."""

    confidence: float = 0.95
    positives: int | None = None
    name: ClassVar[str] = "quantile"
    sequential: ClassVar[bool] = False

    def control(self, run: ScreenedRun) -> np.ndarray:
        """The control sample: rows drawn at random until it holds ``r`` relevant."""
        r = self.positives or qbcb_sample_size(run.target, self.confidence)
        perm = seeded_permutation(run.qid + ":control", run.n, run.seed)
        reached = np.flatnonzero(np.cumsum(run.relevant[perm]) >= r)
        return perm[:reached[0] + 1] if len(reached) else perm

    def stop(self, run: ScreenedRun) -> StopPoint:
        sample = self.control(run)
        positives = sample[run.relevant[sample]]
        j = qbcb_rank(len(positives), run.target, self.confidence)
        if j is None or len(sample) == run.n:
            return StopPoint(run.n, run.total, said_stop=len(sample) == run.n)
        place = np.full(run.n, np.iinfo(np.int64).max)
        place[run.order] = np.arange(len(run.order))
        reached = np.sort(place[positives])[j - 1]
        if reached >= len(run.order):
            return ran_out(run)
        screened = np.union1d(run.order[:reached + 1], sample)
        return StopPoint(len(screened), int(run.relevant[screened].sum()))

    def describe(self) -> str:
        return f"QBCB certificate from a control sample, {self.confidence:.0%} confidence"
