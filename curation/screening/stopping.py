"""What is left of a query's screening, and when to stop for a recall target.

Two rules, both replayed in simulation (docs/evaluation.md, "Screening"):

* **Calibrated** (:func:`estimate_remaining`, :func:`calibrated_advice`). Each unscreened
  candidate ``i`` is relevant with probability ``p_i = sigmoid(prior_i + delta)``: the ranker's
  calibrated prior log-odds shifted by this query's base-rate offset ``delta``, fitted on the
  query's labels with a normal prior (sd :data:`SHIFT_PRIOR_SD`); the offset's uncertainty (a
  Laplace approximation) is integrated out by Gauss-Hermite quadrature. The number ``M`` of
  relevant candidates still unscreened is then a mixture of Poisson-binomials; with ``F``
  found, recall ``F / (F + M)`` meets the target ``t`` exactly when ``M <= floor(F (1 - t) /
  t)``. The estimate reports ``E[M]`` with a central interval, and the advice says stop when
  ``P(recall >= t) >= confidence``. Its honesty rests on the calibration, so the simulation
  reports its coverage.
* **Random sample** (:func:`hypergeometric_p`, Callaghan & Mueller-Hansen 2020, "Statistical
  stopping criteria for automated screening in systematic reviews", Systematic Reviews 9:273).
  Once the ranked phase saturates (the calibrated estimate expects fewer than
  :data:`SWITCH_EXPECTED` relevant left), the tool asks for candidates drawn at random from the
  rest. After ``n`` sampled of the ``N`` left at the switch, ``k`` of them relevant, with
  ``r_AL`` found before the switch and ``r = r_AL + k`` found in all, the null hypothesis
  "recall < t" means at least ``K = floor(r / t) - r_AL + 1`` relevant were among the ``N``;
  its p-value is the hypergeometric ``P(X <= k)`` for ``n`` draws from ``N`` holding ``K``.
  Stop when ``p < 1 - confidence``: a frequentist guarantee that needs no model, at the price of
  screening most of the rest when a query has few relevant candidates.

These and the other rules compared in simulation (the knee method, QBCB, runs of irrelevant
labels, and the calibrated patience rule the app uses, :data:`CHOSEN_RULE`) are registered in
:mod:`curation.screening.stop_rules`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import hypergeom, norm, poisson

from kb_sources.errors import CurationError

#: The stop rule the app's advice uses: a name of
#: :data:`curation.screening.stop_rules.STOP_RULES`, chosen by replaying every rule on the same
#: lists (docs/evaluation.md, "Stop rules side by side"; ``kbcurate simulate screening``).
CHOSEN_RULE = "calibrated_patience"
#: Sd of the normal prior on a query's base-rate offset (log-odds).
SHIFT_PRIOR_SD = 1.0
#: The ranked phase counts as saturated when fewer than this many relevant are expected left.
SWITCH_EXPECTED = 1.0
#: Probabilities below this enter the count as one Poisson term (Le Cam: error <= sum p^2).
_SMALL = 0.02
#: Above this many larger probabilities (and a variance >= 9) their count is taken as normal.
_EXACT_MAX = 200
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(7)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


@dataclass(frozen=True)
class Remaining:
    """How many relevant candidates are left unscreened, as far as the model knows.

    Attributes:
        found: Relevant labels so far.
        screened: Candidates labelled (any grade but skip).
        unscreened: Candidates left.
        expected: Expected relevant among the unscreened.
        low: Lower end of the central interval.
        high: Upper end of the central interval.
        level: The interval's level (0.9: the 5% and 95% quantiles).
        target: Recall target.
        p_target: Probability that the recall found so far already meets ``target``.
    """

    found: int
    screened: int
    unscreened: int
    expected: float
    low: int
    high: int
    level: float
    target: float
    p_target: float

    @property
    def allowed(self) -> int:
        """Relevant that may stay unscreened with the target still met."""
        return allowed_misses(self.found, self.target)


@dataclass(frozen=True)
class StopAdvice:
    """A stopping suggestion in words, with the rule and how sure it is."""

    stop: bool
    rule: str
    confidence: float
    message: str


def allowed_misses(found: int, target: float) -> int:
    """Largest ``M`` with ``found / (found + M) >= target``."""
    if not 0.0 < target <= 1.0:
        raise CurationError(f"A recall target must be in (0, 1], got {target!r}")
    return int(math.floor(found * (1.0 - target) / target + 1e-9))


def count_pmf(p: np.ndarray, top: int | None = None) -> np.ndarray:
    """Distribution of the number of successes among independent Bernoulli(``p``): exact over
    the larger probabilities, one Poisson term for the small ones; truncated at ``top`` (default:
    the mean + 10 sd + 10, beyond which the mass is negligible)."""
    return count_pmfs(np.asarray(p, dtype=np.float64)[None, :], top)[0]


def count_pmfs(p: np.ndarray, top: int | None = None) -> np.ndarray:
    """:func:`count_pmf` of each row of ``p`` (one row per quadrature node)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    mean, var = p.sum(axis=1), (p * (1.0 - p)).sum(axis=1)
    cap = int(np.max(mean + 10.0 * np.sqrt(var)) + 10) if top is None else top
    cap = min(cap, p.shape[1])
    out = np.zeros((p.shape[0], cap + 1))
    for k, row in enumerate(p):
        big, small = row[row >= _SMALL], row[row < _SMALL]
        big_var = float((big * (1.0 - big)).sum())
        if len(big) > _EXACT_MAX and big_var >= 9.0:  # many: a continuity-corrected normal
            edges = np.arange(cap + 2) - 0.5
            pmf = np.diff(norm.cdf((edges - big.sum()) / math.sqrt(big_var)))
        else:
            pmf = np.zeros(cap + 1)
            pmf[0] = 1.0
            for q in big:
                pmf[1:] = pmf[1:] * (1.0 - q) + pmf[:-1] * q
                pmf[0] *= 1.0 - q
        lam = float(small.sum())
        if lam > 0:
            pmf = np.convolve(pmf, poisson.pmf(np.arange(cap + 1), lam))[:cap + 1]
        out[k] = pmf
    return out


def fit_shift(prior_labelled: np.ndarray, relevant: np.ndarray,
              prior_sd: float = SHIFT_PRIOR_SD) -> tuple[float, float]:
    """MAP of a query's base-rate offset and its Laplace sd, from its labelled candidates."""
    y = np.asarray(relevant, dtype=np.float64)
    o = np.asarray(prior_labelled, dtype=np.float64)
    delta, precision = 0.0, 1.0 / prior_sd ** 2
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(o + delta)))
        grad = float((p - y).sum()) + delta / prior_sd ** 2
        hess = float((p * (1.0 - p)).sum()) + 1.0 / prior_sd ** 2
        step = grad / hess
        delta -= step
        precision = hess
        if abs(step) < 1e-8:
            break
    return delta, 1.0 / math.sqrt(precision)


def estimate_remaining(prior: np.ndarray, labelled: dict[int, bool], *, target: float = 0.95,
                       level: float = 0.9, prior_sd: float = SHIFT_PRIOR_SD) -> Remaining:
    """The calibrated estimate of what is left (see the module docstring).

    Args:
        prior: Every candidate's prior log-odds (queue order).
        labelled: Queue index -> relevant, for the screened candidates.
        target: Recall target.
        level: Level of the central interval.
        prior_sd: Sd of the prior on the query's base-rate offset.
    """
    if not 0.0 < level < 1.0:
        raise CurationError(f"An interval level must be in (0, 1), got {level!r}")
    found = sum(1 for v in labelled.values() if v)
    idx = np.fromiter(labelled.keys(), dtype=np.int64, count=len(labelled))
    rest = np.ones(len(prior), dtype=bool)
    rest[idx] = False
    ys = np.fromiter(labelled.values(), dtype=bool, count=len(labelled))
    delta, sd = fit_shift(prior[idx], ys, prior_sd)
    pmf = _mixture_pmf(prior[rest], delta, sd)
    cdf = np.cumsum(pmf)
    expected = float(np.dot(np.arange(len(pmf)), pmf))
    allowed = allowed_misses(found, target)
    p_target = float(cdf[min(allowed, len(cdf) - 1)]) if found else 0.0
    low = int(np.searchsorted(cdf, (1.0 - level) / 2.0))
    high = int(np.searchsorted(cdf, 1.0 - (1.0 - level) / 2.0))
    return Remaining(found, len(labelled), int(rest.sum()), expected, low,
                     min(high, int(rest.sum())), level, target, min(p_target, 1.0))


def _mixture_pmf(prior_rest: np.ndarray, delta: float, sd: float) -> np.ndarray:
    logits = prior_rest[None, :] + delta + sd * _NODES[:, None]
    pmfs = count_pmfs(1.0 / (1.0 + np.exp(-logits)))
    out = _WEIGHTS @ pmfs
    return out / out.sum()


def calibrated_advice(rem: Remaining, confidence: float = 0.95) -> StopAdvice:
    """Stop when the calibrated probability that the target is met reaches ``confidence``."""
    pct = f"{rem.target:.0%}"
    if rem.found == 0:
        return StopAdvice(False, "calibrated", 0.0, "No relevant document found yet: keep "
                          "screening")
    if rem.p_target >= confidence:
        return StopAdvice(True, "calibrated", rem.p_target,
                          f"You can stop: recall is at least {pct} with probability "
                          f"{rem.p_target:.0%} (about {rem.expected:.1f} relevant left, "
                          f"{rem.level:.0%} interval {rem.low}-{rem.high})")
    return StopAdvice(False, "calibrated", rem.p_target,
                      f"Keep screening: recall {pct} is reached with probability only "
                      f"{rem.p_target:.0%} (about {rem.expected:.1f} relevant left, "
                      f"{rem.level:.0%} interval {rem.low}-{rem.high})")


def hypergeometric_p(population: int, found_before: int, sampled: int, sampled_relevant: int,
                     target: float = 0.95) -> float:
    """p-value of "recall < target" after a random sample of the unscreened rest.

    Args:
        population: Candidates left when the sampling began (N).
        found_before: Relevant found before the sampling began (r_AL).
        sampled: Candidates drawn at random so far (n).
        sampled_relevant: Relevant among them (k).
        target: Recall target.

    Raises:
        CurationError: Counts out of range.
    """
    if not (0 <= sampled_relevant <= sampled <= population and found_before >= 0):
        raise CurationError(f"Bad sample counts: {sampled_relevant} relevant of {sampled} drawn "
                            f"from {population}")
    if not 0.0 < target < 1.0:
        raise CurationError(f"A recall target must be in (0, 1), got {target!r}")
    if sampled == 0:
        return 1.0
    seen = found_before + sampled_relevant
    k_null = int(math.floor(seen / target + 1e-9)) - found_before + 1
    if k_null > population:
        return 0.0
    return float(hypergeom.cdf(sampled_relevant, population, k_null, sampled))


def sample_advice(p_value: float, sampled: int, confidence: float = 0.95,
                  target: float = 0.95) -> StopAdvice:
    """The random-sample rule's advice from its current p-value."""
    pct = f"{target:.0%}"
    if sampled and p_value < 1.0 - confidence:
        return StopAdvice(True, "random-sample", 1.0 - p_value,
                          f"You can stop: after {sampled} random documents, recall below "
                          f"{pct} is rejected (p = {p_value:.3f})")
    return StopAdvice(False, "random-sample", 1.0 - p_value,
                      f"Keep screening the random sample: {sampled} drawn, recall below {pct} "
                      f"not yet rejected (p = {p_value:.3f})")
