"""A shown list of ranked documents put in the order learned within the query.

The Curate page shows the top ``k`` documents of a search; after labels on the relation, the
per-query model (:func:`curation.screening.view.screening_view`) orders every unlabelled
candidate. :func:`learned_order` puts the shown documents in that order (the unlabelled ones the
queue knows first, best first; then the rest as they were ranked), renumbers their ranks and
appends :func:`order_tag` to each document's ``model_version``, so a label given on it records
that the order was learned in the query and after how many labels (no schema change: the tag
rides on the label row's ``model_version``).

Works on any frozen dataclass with ``doc_id``, ``rank`` and ``model_version`` fields (the search
wing's ``RankedDoc``), so this wing needs no import of ``curation.search``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from curation.screening.view import ORDER_LEARNED, ScreeningView

T = TypeVar("T")

#: Appended to a shown document's ``model_version`` when the learned order was shown. Written
#: without "@" so that :class:`~curation.store.identities.ModelVersionId` never reads it as a
#: model version.
TAG = " · in-query learned after {n} labels"


def order_tag(labels: int) -> str:
    """The ``model_version`` suffix of a document shown in the order learned from ``labels``
    labels of the relation."""
    return TAG.format(n=int(labels))


def strip_tag(model_version: str) -> str:
    """``model_version`` without an :func:`order_tag` suffix."""
    head, sep, tail = model_version.rpartition(" · in-query learned after ")
    return head if sep and tail.endswith(" labels") else model_version


def learned_order(docs: Sequence[T], view: ScreeningView) -> tuple[T, ...]:
    """``docs`` in ``view``'s learned order, ranks renumbered and each ``model_version`` tagged.

    Args:
        docs: The shown documents, as ranked (each a dataclass with ``doc_id``, ``rank`` and
            ``model_version``).
        view: The query's screening view after its labels.

    Returns:
        ``docs`` unchanged when the view's order is not learned (no label moved the model);
        otherwise the documents the view orders first (best first), then every other one in
        its ranked order (labelled ones, ones outside the queue), ranks 1.. in the new order.
    """
    if view.order_mode != ORDER_LEARNED:
        return tuple(docs)
    position = {d: i for i, d in enumerate(view.order)}
    first = sorted((d for d in docs if _id(d) in position), key=lambda d: position[_id(d)])
    rest = [d for d in docs if _id(d) not in position]
    tag = order_tag(view.order_labels)
    return tuple(replace(d, rank=i + 1, model_version=strip_tag(d.model_version) + tag)  # type: ignore[type-var]
                 for i, d in enumerate([*first, *rest]))


def _id(doc: Any) -> str:
    return str(doc.doc_id)
