"""One call for a page: a query's screening after the labels given so far.

:func:`screening_view` takes the queue and every current label of the relation (all curators'
labels count: the caller passes the resolved grade per document) and returns the order of the
unlabelled rest, whether that order was learned in the query and from how many labels (what a
label row records as its order), the estimate of what is left and the stopping advice. It is a
pure function of its arguments, so a page can call it after every click; it does not block on
the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from curation.screening.learner import LearnerOptions, rescore
from curation.screening.queue import ScreeningQueue
from curation.screening.stop_base import ScreenedRun
from curation.screening.stop_rules import advice, stop_rule
from curation.screening.stopping import CHOSEN_RULE, Remaining, StopAdvice, estimate_remaining
from curation.store.label_types import Grade

#: What a label row records as the order it was screened in.
ORDER_LEARNED = "in-query learned"
ORDER_STATIC = "static"


def relevant_grade(grade: Grade | str) -> bool | None:
    """complete / partial -> relevant, irrelevant -> not, skip -> None (not a label here)."""
    value = Grade.parse(grade)
    if value is Grade.SKIP:
        return None
    return value is not Grade.IRRELEVANT


@dataclass(frozen=True)
class ScreeningView:
    """A query's screening state.

    Attributes:
        order: Unlabelled candidates (doc ids), the one to screen next first.
        order_mode: :data:`ORDER_LEARNED` once a label moved the model, else
            :data:`ORDER_STATIC`.
        order_labels: Labels the order was learned from.
        remaining: What is left (found, expected relevant unscreened with an interval).
        advice: Whether to stop for the recall target, in words.
        found_curve: Relevant found after each label, in the order the labels came.
        probabilities: doc id -> the model's probability of relevance (unlabelled ones).
        handed_over: The share of the order the classifier trained on the labels decides
            (:func:`~curation.screening.learner.handover_weight`; 0 before a label of each
            kind).
    """

    order: tuple[str, ...]
    order_mode: str
    order_labels: int
    remaining: Remaining
    advice: StopAdvice
    found_curve: tuple[int, ...] = field(repr=False)
    probabilities: dict[str, float] = field(repr=False)
    handed_over: float = 0.0


def screening_view(queue: ScreeningQueue, labels: Iterable[tuple[str, Grade | str]], *,
                   options: LearnerOptions | None = None, target: float = 0.95
                   ) -> ScreeningView:
    """The order, estimate and advice after ``labels`` (doc id, grade), oldest first; a later
    label of the same document replaces an earlier one, skips are left out, and documents
    outside the queue are ignored (add them to the queue as extra ids to count them)."""
    index = queue.index()
    given: dict[int, bool] = {}
    sequence: list[int] = []
    for doc_id, grade in labels:
        row, value = index.get(doc_id), relevant_grade(grade)
        if row is None:
            continue
        given.pop(row, None)
        if value is not None:
            given[row] = value
            sequence.append(row)
    sequence = [r for r in dict.fromkeys(reversed(sequence)) if r in given][::-1]
    rescored = rescore(queue, given, options)
    remaining = estimate_remaining(queue.prior, given, target=target)
    curve = tuple(int(x) for x in np.cumsum([given[r] for r in sequence]))
    rest = np.fromiter(rescored.order, dtype=np.int64, count=len(rescored.order))
    order = tuple(queue.ids_at(rest))
    chance = rescored.probabilities[rest].tolist()
    return ScreeningView(
        order, ORDER_LEARNED if rescored.learned else ORDER_STATIC, rescored.labels, remaining,
        chosen_advice(queue, sequence, given, target), curve,
        dict(zip(order, chance, strict=True)), rescored.handed_over)


def chosen_advice(queue: ScreeningQueue, sequence: list[int], given: dict[int, bool],
                  target: float) -> StopAdvice:
    """The advice of the app's stop rule (:data:`~curation.screening.stopping.CHOSEN_RULE`,
    chosen by replaying every rule: docs/evaluation.md) after the labels in ``sequence`` (queue
    rows in the order labelled)."""
    relevant = np.zeros(len(queue), dtype=bool)
    relevant[[r for r, value in given.items() if value]] = True
    run = ScreenedRun(queue.query_key, np.asarray(sequence, dtype=np.int64), relevant,
                      queue.prior, target=target)
    return advice(stop_rule(CHOSEN_RULE), run)
