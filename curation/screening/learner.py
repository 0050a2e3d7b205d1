"""The per-query model: re-scores a queue's unlabelled candidates after every label.

Every candidate's log-odds of relevance start at the ranker's calibrated prior and move with
this query's labels (every curator's labels of the relation count):

    log-odds(i) = prior(i)
                  + similarity    * P / (P + evidence) * cos(x(i), centroid of relevant labels)
                  - dissimilarity * N / (N + evidence) * cos(x(i), centroid of irrelevant labels)
                  [+ delta + x(i) . beta]

where ``x(i)`` is the candidate's cached TF-IDF row (plus the dense block when the queue has
one), ``P`` and ``N`` count the relevant and irrelevant labels, and the optional last part is a
logistic regression fitted on the labels with the rest as offset (``l2`` and ``intercept_l2``
penalise its term weights and base-rate shift; off by default: it added nothing on the dev
splits). ``evidence`` is how the model knows that a few labels are not yet evidence: one
relevant label moves the order by a third of the full weight, three by 60%. With no label it is
the static order exactly.

The weights were chosen by replaying the train lists (each scored by a ranker fitted on the
other half of the train split) and the dev lists of the three BioRED tasks, never test
(docs/evaluation.md, "Screening"): the similarity term alone gained 20% on dev but nothing on
train; the dissimilarity term (candidates like the irrelevant labels go down) is what gains on
both.

A re-score is one sparse product over the cached float32 rows (both centroid terms folded into
one column-weight vector: under a millisecond for 1,000 candidates, about 15 for 40,000) and
never touches the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from curation.screening.queue import ScreeningQueue
from kb_sources.errors import CurationError


@dataclass(frozen=True)
class LearnerOptions:
    """The per-query model's weights and penalties (see the module docstring).

    Attributes:
        similarity: Log-odds added per unit of cosine to the relevant labels' centroid.
        dissimilarity: Log-odds taken per unit of cosine to the irrelevant labels' centroid.
        evidence: Labels of a kind before its centroid counts half (``n / (n + evidence)``).
        l2: Penalty on the term weights of the logistic part (``inf``: no logistic part).
        intercept_l2: Penalty on the logistic part's base-rate shift.
        positive_weight: Weight of a relevant label against an irrelevant one in the fit.
        max_iter: Newton iterations of the fit.
    """

    similarity: float = 32.0
    dissimilarity: float = 12.0
    evidence: float = 2.0
    l2: float = float("inf")
    intercept_l2: float = 1.0
    positive_weight: float = 1.0
    max_iter: int = 50

    def __post_init__(self) -> None:
        for name in ("similarity", "dissimilarity", "evidence"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not 0 <= value < float("inf"):
                raise CurationError(f"Learner option {name} must be a number >= 0, got "
                                    f"{value!r}")
        for name in ("l2", "intercept_l2", "positive_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise CurationError(f"Learner option {name} must be a positive number, got "
                                    f"{value!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int) \
                or self.max_iter < 1:
            raise CurationError(f"Learner option max_iter must be a whole number >= 1, got "
                                f"{self.max_iter!r}")

    def to_json(self) -> dict[str, Any]:
        return {k: (None if v == float("inf") else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Rescored:
    """The queue after the labels given so far.

    Attributes:
        log_odds: Every candidate's log-odds of relevance (queue order).
        probabilities: The same as probabilities.
        order: Unlabelled candidates (queue indices), most likely relevant first.
        positives: Relevant labels the model saw.
        negatives: Irrelevant labels the model saw.
        learned: Whether the model moved away from the static order (labels given).
    """

    log_odds: np.ndarray = field(repr=False)
    probabilities: np.ndarray = field(repr=False)
    order: tuple[int, ...] = field(repr=False)
    positives: int
    negatives: int
    learned: bool

    @property
    def labels(self) -> int:
        return self.positives + self.negatives


def rescore(queue: ScreeningQueue, labels: Mapping[int, bool],
            options: LearnerOptions | None = None) -> Rescored:
    """Fit the per-query model on ``labels`` (queue index -> relevant) and score the queue.

    Raises:
        CurationError: A label's index is outside the queue.
    """
    options = options or LearnerOptions()
    n = len(queue)
    if any(not 0 <= i < n for i in labels):
        raise CurationError(f"A label points outside the screening queue of {n} candidates")
    z = queue.prior.copy()
    if labels:
        direction = _label_direction(queue, labels, options)
        if direction is not None:
            z = z + queue.rows @ direction  # one sparse product over the cached rows
        if np.isfinite(options.l2):
            z = _fitted_log_odds(queue, z, labels, options)
    p = 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))
    free = np.ones(n, dtype=bool)
    free[list(labels)] = False
    rest = np.flatnonzero(free)
    rest = rest[np.argsort(-z[rest], kind="stable")]  # ties: the static order
    pos = sum(1 for v in labels.values() if v)
    return Rescored(z, p, tuple(rest.tolist()), pos, len(labels) - pos, bool(labels))


def _label_direction(queue: ScreeningQueue, labels: Mapping[int, bool],
                     options: LearnerOptions) -> np.ndarray | None:
    """The column weights whose product with a row is both centroid terms of its log-odds:
    ``similarity * P / (P + evidence) * u_rel - dissimilarity * N / (N + evidence) * u_irr``,
    ``u`` a unit centroid of one kind's rows (float32, like the rows); None when no term
    moves anything."""
    direction = None
    for kind, weight in ((True, options.similarity), (False, -options.dissimilarity)):
        rows = [i for i, v in labels.items() if v is kind]
        if not rows or weight == 0 or queue.rows.shape[1] == 0:
            continue
        centroid = np.asarray(queue.rows[rows].sum(axis=0), dtype=np.float64).ravel()
        norm = float(np.linalg.norm(centroid))
        if norm == 0:
            continue
        share = len(rows) / (len(rows) + options.evidence)
        term = weight * share / norm * centroid
        direction = term if direction is None else direction + term
    return None if direction is None else direction.astype(np.float32)


def _fitted_log_odds(queue: ScreeningQueue, offset: np.ndarray, labels: Mapping[int, bool],
                     options: LearnerOptions) -> np.ndarray:
    idx = np.fromiter(labels.keys(), dtype=np.int64, count=len(labels))
    y = np.fromiter((bool(v) for v in labels.values()), dtype=np.float64, count=len(labels))
    weight = np.where(y > 0, options.positive_weight, 1.0)
    x_l = queue.rows[idx]
    cols = np.unique(x_l.indices)
    x_l = sp.csr_matrix(x_l[:, cols]) if len(cols) else sp.csr_matrix((len(idx), 0))
    x_t = sp.csr_matrix(x_l.T)
    prior = offset[idx]
    k = len(cols)

    m = k + 1

    def probs(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = theta[k] + x_l @ theta[:k] + prior
        return z, 1.0 / (1.0 + np.exp(-z))

    def loss(theta: np.ndarray) -> float:
        z, _ = probs(theta)
        value = float(np.sum(weight * (np.logaddexp(0.0, z) - y * z)))
        return value + 0.5 * options.l2 * float(theta[:k] @ theta[:k]) \
            + 0.5 * options.intercept_l2 * theta[k] ** 2

    def grad(theta: np.ndarray) -> np.ndarray:
        g = weight * (probs(theta)[1] - y)
        return np.concatenate([x_t @ g + options.l2 * theta[:k],
                               [g.sum() + options.intercept_l2 * theta[k]]])

    def hessp(theta: np.ndarray, v: np.ndarray) -> np.ndarray:
        p = probs(theta)[1]
        dz = weight * p * (1.0 - p) * (x_l @ v[:k] + v[k])
        return np.concatenate([x_t @ dz + options.l2 * v[:k],
                               [dz.sum() + options.intercept_l2 * v[k]]])

    theta = minimize(loss, np.zeros(m), jac=grad, hessp=hessp, method="trust-ncg",
                     options={"maxiter": options.max_iter, "gtol": 1e-6}).x
    z = offset + theta[k]
    if k:
        beta = np.zeros(queue.rows.shape[1], dtype=np.float32)
        beta[cols] = theta[:k]
        z = z + queue.rows @ beta
    return np.asarray(z, dtype=np.float64)
