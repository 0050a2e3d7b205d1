"""Agreement of two annotators (Cohen's kappa) over the items both labelled, skips left out.

Used by :meth:`curation.store.labels.Labels.agreement`, which passes each annotator's current
grades; :func:`busiest_pair` names the two annotators worth comparing first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from curation.store.workspace import Workspace

__all__ = ["Agreement", "agreement_of", "busiest_pair"]

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


def busiest_pair(ws: Workspace) -> tuple[str, str] | None:
    """The two annotators who share the most graded items (current labels, skips left out;
    ties: by name), or None when no two share one."""
    row = ws.conn.execute(
        "SELECT a.user, b.user, COUNT(*) AS n FROM labels a JOIN labels b "
        "ON a.schema = b.schema AND a.query_key = b.query_key AND a.doc_id = b.doc_id "
        "AND a.user < b.user WHERE a.superseded_by IS NULL AND b.superseded_by IS NULL "
        "AND a.grade <> 'skip' AND b.grade <> 'skip' "
        "GROUP BY a.user, b.user ORDER BY n DESC, a.user, b.user LIMIT 1").fetchone()
    return (row[0], row[1]) if row else None
