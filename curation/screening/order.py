"""A shown list of ranked documents put in the order learned within the query.

The Curate page shows the top ``k`` documents of a search; after labels on the relation, the
per-query model (:func:`curation.screening.view.screening_view`) orders every unlabelled
candidate. :func:`learned_order` puts the shown documents in that order (the unlabelled ones the
queue knows first, best first; then the rest as they were ranked), renumbers their ranks and
sets each document's ``order_labels`` to the number of labels the order was learned from, so a
label given on it records that the order was learned in the query and after how many labels
(the label row's ``order_labels`` column; ``model_version`` still names what ranked it).

Screening mode goes on past the shown list through the queue: :func:`next_candidate` is the
one to show after those already shown (the best of the learned order, or of the ranked order,
that is not yet labelled), so "Abstract 11 of 1,000" follows the tenth.

Works on any frozen dataclass with ``doc_id``, ``rank`` and ``order_labels`` fields (the
search wing's ``RankedDoc``), so this wing needs no import of ``curation.search``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from curation.screening.queue import ScreeningQueue
from curation.screening.view import ORDER_LEARNED, ScreeningView

T = TypeVar("T")


def order_words(order_labels: int | None, handed_over: float = 0.0) -> str:
    """How a label's shown order reads: "as ranked" or "learned within the query after N
    labels", and how much of it a classifier trained on the labels decides (when it does)."""
    if order_labels is None:
        return "as ranked"
    words = f"learned within the query after {int(order_labels):d} labels"
    if handed_over >= 0.005:
        words += (f" ({handed_over:.0%} from a classifier trained on them, the rest from the "
                  "ranking and the labels' likeness)")
    return words


def learned_order(docs: Sequence[T], view: ScreeningView) -> tuple[T, ...]:
    """``docs`` in ``view``'s learned order, ranks renumbered and ``order_labels`` set.

    Args:
        docs: The shown documents, as ranked (each a dataclass with ``doc_id``, ``rank`` and
            ``order_labels``).
        view: The query's screening view after its labels.

    Returns:
        ``docs`` unchanged when the view's order is not learned (no label moved the model);
        otherwise the documents the view orders first (best first), then every other one in
        its ranked order (labelled ones, ones outside the queue), ranks 1.. in the new order,
        each with ``order_labels = view.order_labels``.
    """
    if view.order_mode != ORDER_LEARNED:
        return tuple(docs)
    position = {d: i for i, d in enumerate(view.order)}
    first = sorted((d for d in docs if _id(d) in position), key=lambda d: position[_id(d)])
    rest = [d for d in docs if _id(d) not in position]
    return tuple(replace(d, rank=i + 1, order_labels=view.order_labels)  # type: ignore[type-var]
                 for i, d in enumerate([*first, *rest]))


def _id(doc: Any) -> str:
    return str(doc.doc_id)


def next_candidate(queue: ScreeningQueue, view: ScreeningView, taken: Collection[str], *,
                   learned: bool) -> tuple[str, int | None] | None:
    """The queue's next candidate for screening mode, after ``taken`` (the shown list and the
    candidates already shown beyond it).

    Args:
        queue: The relation's queue.
        view: Its screening view after the current labels.
        taken: Doc ids screening mode has in its sequence already.
        learned: The curator chose the order learned within the query.

    Returns:
        (doc id, the ``order_labels`` a label on it records: None when as ranked): the first
        unlabelled candidate not taken in the learned order (when chosen and learned) or the
        ranked order, then any candidate not taken in the ranked order (labelled by another
        curator); None when every candidate is taken.
    """
    if learned and view.order_mode == ORDER_LEARNED:
        first: Sequence[str] = view.order
        labels: int | None = view.order_labels
    else:
        unlabelled = set(view.order)
        first, labels = [d for d in queue.doc_ids if d in unlabelled], None
    pick = next((d for d in first if d not in taken), None)
    if pick is not None:
        return pick, labels
    pick = next((d for d in queue.doc_ids if d not in taken), None)
    return None if pick is None else (pick, None)
