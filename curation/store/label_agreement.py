"""Agreement of two annotators (Cohen's kappa) over the items both labelled, skips left out.

Used by :meth:`curation.store.labels.Labels.agreement`, which passes each annotator's current
grades.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Agreement", "agreement_of"]

#: An item: (schema, query_key, doc_id).
Item = tuple[str, str, str]


@dataclass(frozen=True)
class Agreement:
    """Agreement of two annotators on the items both labelled (skips excluded)."""

    user_a: str
    user_b: str
    shared: int
    observed: float
    kappa: float


def agreement_of(user_a: str, a: Mapping[Item, str], user_b: str,
                 b: Mapping[Item, str]) -> Agreement:
    """Observed agreement and Cohen's kappa of two annotators' grades (item -> grade, skips
    already left out) over the items both graded; NaN for both when they share none."""
    from sklearn.metrics import cohen_kappa_score

    shared = sorted(set(a) & set(b))
    if not shared:
        return Agreement(user_a, user_b, 0, float("nan"), float("nan"))
    ya, yb = [a[k] for k in shared], [b[k] for k in shared]
    observed = sum(x == y for x, y in zip(ya, yb, strict=True)) / len(shared)
    kappa = 1.0 if len(set(ya) | set(yb)) == 1 else float(cohen_kappa_score(ya, yb))
    return Agreement(user_a, user_b, len(shared), observed, kappa)
