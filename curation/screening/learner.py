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

Once the query has both kinds of label, the order is handed over to a discriminative model as
labels accumulate (issue 43 item 2):

    final(i) = (1 - w) * log-odds(i) + w * margin_scale * svm(i),
    w = max_share * R / (R + handover)

where ``svm(i)`` is the margin of a linear SVM fitted on the labelled rows alone (squared hinge,
C = ``svm_c``, irrelevant labels down-weighted to ``svm_ratio`` : 1 as ASReview LAB's ELAS u4
balances them) and ``R`` counts the relevant labels; ``w`` is 0 until the SVM earns its say
(:func:`svm_earns_its_say`: with 3 labels of each kind, its out-of-fold margins separate the
labelled candidates better than the prior does). On topic lists with hundreds of relevant
abstracts (BC6PM, the Hallmarks of Cancer) the SVM, which learns the topic's words, soon earns
it and takes over; on BioRED's entity-pair lists it seldom does, where an SVM handed the order
unconditionally lost 19-39% in documents to find all on the train lists.

The weights were chosen by replaying the train lists (each scored by a ranker fitted on the
other half of the train split) and the dev lists of the three BioRED tasks, never test
(docs/evaluation.md, "Screening"): the similarity term alone gained 20% on dev but nothing on
train; the dissimilarity term (candidates like the irrelevant labels go down) is what gains on
both.

A re-score is one sparse product over the cached float32 rows (both centroid terms folded into
one column-weight vector: under a millisecond for 1,000 candidates, about 15 for 40,000), plus
the SVM's fit on the labelled rows once both kinds are in, and never touches the store
(``python benchmarks/screening_speed.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import LinearSVC

from curation.screening.queue import ScreeningQueue
from kb_sources.errors import CurationError

#: Labels of each kind before the SVM may earn a say (and its cross-validation's folds).
GATE_MIN = 3
#: Irrelevant labels per relevant one the check reads at most (evenly through the ranking).
GATE_NEGATIVES = 5


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
        handover: Relevant labels at which the SVM has half the weight (``inf``: never).
        margin_scale: Log-odds per unit of the SVM's margin.
        svm_c: The SVM's C (ASReview's ELAS u4: 0.11).
        svm_ratio: Irrelevant labels' total weight is the relevant ones' over this ratio.
        max_share: The SVM's weight at most (the prior and centroids keep the rest).
    """

    similarity: float = 32.0
    dissimilarity: float = 12.0
    evidence: float = 2.0
    l2: float = float("inf")
    intercept_l2: float = 1.0
    positive_weight: float = 1.0
    max_iter: int = 50
    handover: float = 5.0
    margin_scale: float = 4.0
    svm_c: float = 0.11
    svm_ratio: float = 9.8
    max_share: float = 0.8

    def __post_init__(self) -> None:
        if isinstance(self.max_share, bool) or not isinstance(self.max_share, int | float) \
                or not 0 <= self.max_share <= 1:
            raise CurationError(f"Learner option max_share must be in [0, 1], got "
                                f"{self.max_share!r}")
        for name in ("similarity", "dissimilarity", "evidence", "margin_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not 0 <= value < float("inf"):
                raise CurationError(f"Learner option {name} must be a number >= 0, got "
                                    f"{value!r}")
        for name in ("l2", "intercept_l2", "positive_weight", "handover", "svm_c", "svm_ratio"):
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
        handed_over: The SVM's weight in the order (0: the prior and centroids alone).
    """

    log_odds: np.ndarray = field(repr=False)
    probabilities: np.ndarray = field(repr=False)
    order: tuple[int, ...] = field(repr=False)
    positives: int
    negatives: int
    learned: bool
    handed_over: float = 0.0

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
    weight = handover_weight(queue, labels, options)
    if weight > 0:
        z = (1.0 - weight) * z + weight * options.margin_scale * _svm_margins(queue, labels,
                                                                              options)
    p = 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))
    free = np.ones(n, dtype=bool)
    free[list(labels)] = False
    rest = np.flatnonzero(free)
    rest = rest[np.argsort(-z[rest], kind="stable")]  # ties: the static order
    pos = sum(1 for v in labels.values() if v)
    return Rescored(z, p, tuple(rest.tolist()), pos, len(labels) - pos, bool(labels), weight)


def handover_weight(queue: ScreeningQueue, labels: Mapping[int, bool],
                    options: LearnerOptions) -> float:
    """The SVM's weight after these labels: ``max_share * R / (R + handover)`` for ``R``
    relevant labels once the SVM has earned it (:func:`svm_earns_its_say`), else 0 (and when
    the handover is off)."""
    relevant = sum(1 for v in labels.values() if v)
    if not np.isfinite(options.handover) or options.max_share == 0 \
            or not svm_earns_its_say(queue, labels, options):
        return 0.0
    return options.max_share * relevant / (relevant + options.handover)


def svm_earns_its_say(queue: ScreeningQueue, labels: Mapping[int, bool],
                      options: LearnerOptions) -> bool:
    """Whether an SVM fitted on the labels tells this query's relevant candidates from the
    rest better than the ranking does: its out-of-fold margins (stratified 3-fold, seeded) rank
    the labelled candidates with a higher AUC than their prior. Needs ``GATE_MIN`` labels of
    each kind. Where relevance is a topic (BC6PM, the hallmarks) the SVM soon earns it; where
    it is a pair of named entities (BioRED), it seldom does, and the order stays the
    prior's."""
    idx = np.fromiter(sorted(labels), dtype=np.int64, count=len(labels))  # queue order
    y = np.fromiter((bool(labels[i]) for i in idx.tolist()), dtype=bool, count=len(idx))
    pos, neg = int(y.sum()), int((~y).sum())
    if min(pos, neg) < GATE_MIN or queue.rows.shape[1] == 0:
        return False
    if neg > GATE_NEGATIVES * pos:  # evenly through the ranking: the check stays cheap
        keep = np.flatnonzero(~y)[np.linspace(0, neg - 1, GATE_NEGATIVES * pos).astype(int)]
        chosen = np.sort(np.concatenate([np.flatnonzero(y), keep]))
        idx, y = idx[chosen], y[chosen]
    margins = np.zeros(len(y))
    folds = StratifiedKFold(n_splits=GATE_MIN, shuffle=True, random_state=0)
    for train, test in folds.split(idx, y):
        coef, intercept = _svm_fit(queue.rows[idx[train]], y[train], options)
        margins[test] = queue.rows[idx[test]] @ coef + intercept
    return bool(roc_auc_score(y, margins) > roc_auc_score(y, queue.prior[idx]))


def _svm_margins(queue: ScreeningQueue, labels: Mapping[int, bool],
                 options: LearnerOptions) -> np.ndarray:
    """Every candidate's margin under a linear SVM fitted on the labelled rows (ASReview's
    balance: each irrelevant label weighs ``R / (svm_ratio * N)`` against 1, rescaled to a
    mean weight of 1); deterministic (liblinear's shuffle is seeded)."""
    idx = np.fromiter(labels.keys(), dtype=np.int64, count=len(labels))
    y = np.fromiter((bool(v) for v in labels.values()), dtype=bool, count=len(labels))
    coef, intercept = _svm_fit(queue.rows[idx], y, options)
    return np.asarray(queue.rows @ coef, dtype=np.float64) + intercept


def _svm_fit(rows: sp.csr_matrix, y: np.ndarray, options: LearnerOptions
             ) -> tuple[np.ndarray, float]:
    """A balanced linear SVM's weights (float32, like the rows) and intercept."""
    weight = np.where(y, 1.0, int(y.sum()) / (options.svm_ratio * int((~y).sum())))
    weight *= len(y) / weight.sum()
    svm = LinearSVC(C=options.svm_c, loss="squared_hinge", random_state=0)
    svm.fit(rows, y.astype(np.int8), sample_weight=weight)
    return np.asarray(svm.coef_, dtype=np.float32).ravel(), float(svm.intercept_[0])


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
