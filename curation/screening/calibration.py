"""The ranker's score as a prior probability of relevance (Platt scaling, with the rank).

The learned ranker orders one query's candidates well, but its score is not a probability.
:func:`fit_calibration` fits ``log-odds = a + b * score + c * ln(rank)`` (rank: the candidate's
place in its query's static order, 1 first) by a logistic regression over the candidates of
queries the ranker was not trained on (their gold known), pooled. The rank term matters for the
tail: with the score alone, the 700 candidates below rank 300 of a BioRED dev query were given
0.09 relevant each on average where none was found; with it, 0.05. The screening queue stores
every candidate's prior log-odds, the per-query model starts from them, and the stopping rule
sums the probabilities of the unscreened rest.

Each ranker version carries its own calibration: a ranker round fits it on the out-of-fold
scores of the held-out pool (dev and test queries, every first-stage candidate, each query
scored by a model that learned none of its fold's labels; :mod:`curation.training.heldout`) and
keeps it in the version's manifest (``calibration``), so it is fitted per schema and again with
every version. :data:`DEFAULT_CALIBRATION` is what a queue uses when the active version has
none (a version saved before calibrations, or a pool with no relevant candidate): fitted this
way on the disease_gene dev split, 1,000 BM25 candidates per query, the LightGBM ranker trained
on the train split.

A relation ranked by something else (BM25, BM25 + the entity rerank, dense, hybrid) has scores
that are not comparable across queries nor across the rerank's cut, so its queue is calibrated
on the rank alone: ``fit_calibration(..., rank_only=True)`` fixes the score term at 0
(:mod:`curation.screening.sources` says on which held-out queries);
:data:`DEFAULT_RANK_CALIBRATION` is its built-in default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from kb_sources.errors import CurationError


@dataclass(frozen=True)
class Calibration:
    """``log-odds = intercept + slope * score + rank_slope * ln(rank)``.

    Attributes:
        intercept: Log-odds of the first candidate at score 0.
        slope: Log-odds per unit of ranker score (>= 0).
        rank_slope: Log-odds per unit of ln(rank) (<= 0).
        queries: Queries it was fitted on (0: given by hand).
    """

    intercept: float
    slope: float
    rank_slope: float = 0.0
    queries: int = 0

    def __post_init__(self) -> None:
        values = (self.intercept, self.slope, self.rank_slope)
        if not all(np.isfinite(v) for v in values) or self.slope < 0 or self.rank_slope > 0:
            raise CurationError(f"A calibration needs finite values, a slope >= 0 and a rank "
                                f"slope <= 0, got {values!r}")

    def log_odds(self, scores: np.ndarray) -> np.ndarray:
        """The prior log-odds of one query's candidates from their scores (any order: the
        ranks are the places in the descending order, ties by position)."""
        x = np.asarray(scores, dtype=np.float64)
        return self.intercept + self.slope * x + self.rank_slope * _log_ranks(x)

    def to_json(self) -> dict[str, float | int]:
        return {"intercept": self.intercept, "slope": self.slope,
                "rank_slope": self.rank_slope, "queries": self.queries}

    @classmethod
    def from_json(cls, data: Any) -> Calibration | None:
        """A calibration stored with a ranker version (its manifest's ``calibration``), or
        None when ``data`` is missing or malformed (the caller falls back to the default)."""
        if not isinstance(data, dict):
            return None
        values = [data.get(k) for k in ("intercept", "slope", "rank_slope")]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return None
        queries = data.get("queries", 0)
        try:
            return cls(float(values[0]), float(values[1]), float(values[2]),
                       int(queries) if isinstance(queries, int) else 0)
        except CurationError:
            return None


#: Fitted on the disease_gene dev split (see the module docstring and docs/evaluation.md).
DEFAULT_CALIBRATION = Calibration(intercept=-0.35, slope=0.48, rank_slope=-0.76)


#: The rank-only default (score term 0): fitted on the demo workspace's disease_gene dev split
#: (98 queries), BM25's 1,000 candidates per query. The other BioRED tasks' dev splits give
#: nearly the same fit (intercept -0.65 to 0.18, rank slope -1.39 to -2.26).
DEFAULT_RANK_CALIBRATION = Calibration(intercept=-0.43, slope=0.0, rank_slope=-1.31)


def version_calibration(manifest: Mapping[str, Any]) -> Calibration:
    """The calibration a ranker version's manifest keeps (fitted by its round on its
    held-out pool), else :data:`DEFAULT_CALIBRATION`."""
    return Calibration.from_json(manifest.get("calibration")) or DEFAULT_CALIBRATION


def fit_calibration(scores: Sequence[np.ndarray], relevant: Sequence[np.ndarray], *,
                    rank_only: bool = False) -> Calibration:
    """Platt scaling over the candidates of several queries (pooled).

    Args:
        scores: Per query, the ranker's score of each candidate.
        relevant: Per query, whether each candidate is relevant (same order).
        rank_only: Fit the intercept and the rank term only (slope 0): for a ranking whose
            scores are not comparable across queries; ``scores`` then only give the order.

    Raises:
        CurationError: The lengths differ, or no relevant or no irrelevant candidate is given.
    """
    if len(scores) != len(relevant) or any(
            len(s) != len(r) for s, r in zip(scores, relevant, strict=True)):
        raise CurationError("fit_calibration needs one relevance flag per score, query by query")
    if not scores:
        raise CurationError("Calibrating the ranker needs at least one query")
    x = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    r = np.concatenate([_log_ranks(np.asarray(s, dtype=np.float64)) for s in scores])
    y = np.concatenate([np.asarray(v, dtype=bool) for v in relevant])
    if not y.any() or y.all():
        raise CurationError("Calibrating the ranker needs relevant and irrelevant candidates; "
                            "give queries whose gold documents are among their candidates")

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = theta[0] + theta[1] * x + theta[2] * r
        p = 1.0 / (1.0 + np.exp(-z))
        value = float(np.sum(np.logaddexp(0.0, z) - y * z))
        g = p - y
        return value, np.array([g.sum(), (g * x).sum(), (g * r).sum()])

    slope = (0.0, 0.0) if rank_only else (0.0, None)
    theta = minimize(loss, np.array([-2.0, 0.0 if rank_only else 1.0, 0.0]), jac=True,
                     method="L-BFGS-B", bounds=[(None, None), slope, (None, 0.0)]).x
    return Calibration(float(theta[0]), float(theta[1]), float(theta[2]), len(scores))


def _log_ranks(scores: np.ndarray) -> np.ndarray:
    rank = np.empty(len(scores))
    rank[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return np.log(rank)
