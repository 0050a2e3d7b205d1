"""Stop rules side by side (issue 43): each rule on hand-made rankings with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import hypergeom

from curation.screening.stop_base import ScreenedRun, StopPoint
from curation.screening.stop_rules import (
    STOP_RULES,
    CalibratedPatienceRule,
    CalibratedRule,
    IrrelevantRunRule,
    KneeRule,
    advice,
    knee_ratio,
    stop_rule,
)
from curation.screening.stop_samples import (
    QuantileRule,
    RandomSampleRule,
    qbcb_rank,
    qbcb_sample_size,
    seeded_permutation,
)
from curation.screening.stopping import CHOSEN_RULE
from kb_sources.errors import CurationError


def _run(relevant_at: list[int], n: int, prior: np.ndarray | None = None,
         seed: int = 13) -> ScreenedRun:
    """A list screened in queue order (0, 1, ...), relevant at the given 0-based rows."""
    relevant = np.zeros(n, dtype=bool)
    relevant[relevant_at] = True
    return ScreenedRun("q", np.arange(n), relevant, prior, seed=seed)


def _sharp_prior(n: int, top: int) -> np.ndarray:
    """The model is sure the first ``top`` rows hold everything relevant."""
    return np.where(np.arange(n) < top, 5.0, -12.0)


def test_run_counts_and_oracle():
    run = _run([0, 2, 5], 10)
    assert run.found.tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3]
    assert [run.irrelevant_run(k) for k in (3, 5, 10)] == [0, 2, 4]
    assert run.oracle() == 6  # 95% of 3 needs all 3: the sixth label
    twenty = _run(list(range(19)) + [99], 100)
    assert twenty.oracle() == 19  # 95% of 20 is 19
    assert StopPoint(19, 19).met(20, 0.95) and not StopPoint(18, 18).met(20, 0.95)


def test_knee_stops_after_the_knee_of_a_synthetic_gain_curve():
    run = _run(list(range(10)), 1000)  # ten relevant first, then nothing
    # the knee is at 10; rho = (10 / 10) / ((10 - 10 + 1) / (k - 10)) = k - 10
    assert knee_ratio(run.found, 100) == (10, pytest.approx(90.0))
    assert knee_ratio(run.found, 1) == (0, 0.0)
    # stop when rho >= 156 - min(10, 150) = 146: k = 156 (past the 150 minimum)
    assert KneeRule().stop(run) == StopPoint(156, 10)
    assert KneeRule(min_screened=200).stop(run) == StopPoint(200, 10)
    # one relevant at 500 moves the knee and restarts the count; the rule stops after it
    late = _run(list(range(10)) + [499], 1000)
    point = KneeRule().stop(late)
    assert point.found == 10 and point.screened == 156  # it had stopped before row 499
    lone = _run([0, 500, 999], 1000)  # one relevant first: rho = k - 1 reaches 155 at 156
    assert KneeRule().stop(lone) == StopPoint(156, 1)
    even = _run(list(range(0, 1000, 10)), 1000)  # no knee: rho stays near 1
    assert KneeRule().stop(even) == StopPoint(1000, 100, said_stop=False)


def test_random_sample_p_value_matches_a_hand_computation():
    n = 1000
    run = _run(list(range(10)), n, _sharp_prior(n, 10))
    # the calibrated estimate expects < 1 relevant left once the ten are screened: switch at
    # 10; with 10 found before, "recall < 95%" needs K = floor(10 / 0.95) - 10 + 1 = 1 of the
    # N = 990 left, and n draws without a relevant one give p = (N - n) / N < 0.05 first at
    # n = 941
    assert run.remaining(10).expected < 1.0 <= run.remaining(9).expected
    assert hypergeom.cdf(0, 990, 1, 941) == pytest.approx((990 - 941) / 990)
    assert (990 - 940) / 990 >= 0.05 > (990 - 941) / 990
    assert RandomSampleRule().stop(run) == StopPoint(10 + 941, 10)
    # a flat prior: the irrelevant labels pull the query's base rate down until < 1 is
    # expected left at some switch k; then N = 50 - k, K = 1, and all draws irrelevant
    flat = _run([0, 1], 50, np.zeros(50))
    k = next(k for k in range(2, 51) if flat.remaining(k).expected < 1.0)
    m = next(m for m in range(1, 51 - k) if (50 - k - m) / (50 - k) < 0.05)
    assert RandomSampleRule().stop(flat) == StopPoint(k + m, 2)

def test_qbcb_rank_against_the_binomial_tail():
    # P(Binomial(r, t) >= j) <= 1 - confidence, smallest j
    assert qbcb_rank(59, 0.95, 0.95) == 59  # 0.95^59 = 0.048
    assert qbcb_rank(58, 0.95, 0.95) is None  # 0.95^58 = 0.051
    assert qbcb_sample_size(0.95, 0.95) == 59
    # r = 100: P(X >= 99) = 100 * 0.95^99 * 0.05 + 0.95^100 = 0.037; P(X >= 98) = 0.118
    tail99 = 100 * 0.95 ** 99 * 0.05 + 0.95 ** 100
    tail98 = tail99 + math.comb(100, 2) * 0.95 ** 98 * 0.05 ** 2
    assert tail99 <= 0.05 < tail98 and qbcb_rank(100, 0.95, 0.95) == 99
    assert qbcb_rank(10, 0.5, 0.95) == 9  # P(X >= 9) = 11 / 1024 <= 0.05 < 56 / 1024
    assert qbcb_rank(0, 0.95, 0.95) is None


def test_quantile_never_stops_before_the_sample_certifies_the_target():
    n = 1000
    rows = seeded_permutation("rich", n, 1)[:200]  # 200 relevant, scattered
    relevant = np.zeros(n, dtype=bool)
    relevant[rows] = True
    order = np.argsort(~relevant, kind="stable")  # a perfect ranking: relevant first
    run = ScreenedRun("rich", order, relevant)
    rule = QuantileRule()
    sample = rule.control(run)
    positives = sample[relevant[sample]]
    assert len(positives) == 59 and relevant[sample[-1]]  # drawn until the 59th relevant
    point = rule.stop(run)
    place = {int(r): i for i, r in enumerate(order)}
    reached = max(place[int(r)] for r in positives) + 1  # j = 59 = all of them
    screened = set(order[:reached].tolist()) | set(sample.tolist())
    assert point == StopPoint(len(screened), int(relevant[list(screened)].sum()))
    assert point.met(200, 0.95)
    # two relevant cannot be certified: the sample grows to the whole list
    assert QuantileRule().stop(_run([0, 1], 300)) == StopPoint(300, 2)


def test_irrelevant_run_and_calibrated_rules():
    run = _run([0, 3], 200)
    assert IrrelevantRunRule(length=10).stop(run) == StopPoint(14, 2)
    assert IrrelevantRunRule().stop(_run([0], 30)) == StopPoint(30, 1, said_stop=False)
    sharp = _run([0, 1, 2], 500, _sharp_prior(500, 3))
    point = CalibratedRule().stop(sharp)
    assert point == StopPoint(3, 3)
    assert sharp.remaining(3).p_target >= 0.95 > sharp.remaining(2).p_target
    with pytest.raises(CurationError, match="prior=queue.prior"):
        CalibratedRule().stop(_run([0], 10))


def test_calibrated_patience_shortens_the_run_when_the_model_agrees():
    n = 500
    sure = _run([0, 1], n, _sharp_prior(n, 2))
    assert CalibratedPatienceRule().stop(sure) == StopPoint(2 + 20, 2)
    unsure = _run([0, 1], n, np.full(n, -3.0))  # ~0.05 each: ~24 expected left
    assert CalibratedPatienceRule().stop(unsure) == StopPoint(2 + 60, 2)
    assert CalibratedPatienceRule(patience=30).stop(unsure) == StopPoint(32, 2)


def test_advice_for_a_page():
    n = 500
    prior = _sharp_prior(n, 2)
    relevant = np.zeros(n, dtype=bool)
    relevant[:2] = True
    rule = CalibratedPatienceRule()
    early = advice(rule, ScreenedRun("q", np.arange(12), relevant, prior))
    assert not early.stop and early.rule == "calibrated_patience"
    assert early.message.startswith("Keep screening: 2 relevant found, the last 10 irrelevant")
    done = advice(rule, ScreenedRun("q", np.arange(22), relevant, prior))
    assert done.stop and done.confidence >= 0.95
    assert done.message.startswith("You can stop for 95% recall: 60 irrelevant in a row, or 20")
    with pytest.raises(CurationError, match="decides by sampling; give a sequential rule: "
                                            "calibrated, knee"):
        advice(QuantileRule(), ScreenedRun("q", np.arange(22), relevant, prior))


def test_registry_names_seeds_and_the_chosen_rule():
    assert set(STOP_RULES) == {"calibrated", "random_sample", "knee", "quantile",
                               "irrelevant_run", "calibrated_patience"}
    assert CHOSEN_RULE in STOP_RULES
    with pytest.raises(CurationError, match="Unknown stop rule 'nope'. Available options: "
                                            "calibrated, random_sample, knee"):
        stop_rule("nope")
    n = 400
    relevant_at = [0, 1, 2, 150, 300]
    prior = _sharp_prior(n, 3)
    for name in STOP_RULES:
        rule = stop_rule(name)
        a, b = rule.stop(_run(relevant_at, n, prior)), rule.stop(_run(relevant_at, n, prior))
        assert a == b and 1 <= a.screened <= n and 0 <= a.found <= 5, name
        assert rule.describe()
    # the draws are seeded per query: the same seed and query draw the same sample
    same = [QuantileRule().control(_run(relevant_at, n, seed=s)) for s in (1, 1, 2)]
    assert np.array_equal(same[0], same[1]) and not np.array_equal(same[0], same[2])
    assert seeded_permutation("q", 5, 1).tolist() == seeded_permutation("q", 5, 1).tolist()
