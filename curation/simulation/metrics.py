"""Screening metrics of one replay (one query's order), from where its relevant items came.

Every metric reads the 1-based screening positions of the list's relevant items and the list's
size ``n`` (``R`` relevant items):

* ``docs_to_all``: documents screened until every relevant one is found (the last position);
* ``wss@95``: work saved over sampling at 95% recall (Cohen et al. 2006): ``(n - n95) / n -
  0.05``, where ``n95`` is the position at which ``ceil(0.95 R)`` relevant items are found;
* ``recall@10``: share of the relevant found in the first 10 documents;
* ``recall@10%`` / ``recall@25%``: share found in the first ``ceil(0.10 n)`` / ``ceil(0.25 n)``;
* ``erf@10``: extra relevant found at 10% (ASReview's ERF): ``recall@10%`` minus the share a
  random order finds there in expectation (``ceil(0.10 n) / n``);
* ``atd``: average time to discovery: the mean position of the relevant items (documents
  screened until each is found, averaged).

Pooled figures are means over queries (each query weighs the same).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from kb_sources.errors import CurationError

#: Metric names, in report order.
METRICS = ("docs_to_all", "wss@95", "recall@10", "recall@10%", "recall@25%", "erf@10", "atd")


def relevant_positions(order: Sequence[int], relevant: np.ndarray) -> list[int]:
    """1-based positions in ``order`` (indices into ``relevant``) of the relevant items.

    Raises:
        CurationError: ``order`` repeats an item or misses a relevant one.
    """
    if len(set(order)) != len(order):
        raise CurationError("A screening order repeats an item")
    found = [pos for pos, i in enumerate(order, start=1) if relevant[i]]
    if len(found) != int(np.sum(relevant)):
        raise CurationError(f"A screening order reached {len(found)} of "
                            f"{int(np.sum(relevant))} relevant items; replay to the last one")
    return found


def screening_metrics(positions: Sequence[int], n: int) -> dict[str, float]:
    """The metrics of one replay (see the module docstring).

    Args:
        positions: 1-based positions of the relevant items in the screening order.
        n: Items in the list.

    Raises:
        CurationError: No relevant item, or a position outside 1..n or repeated.
    """
    p = sorted(int(x) for x in positions)
    if not p:
        raise CurationError("Screening metrics need at least one relevant item")
    if p[0] < 1 or p[-1] > n or len(set(p)) != len(p):
        raise CurationError(f"Positions must be distinct and within 1..{n}, got {p[:5]}...")
    r = len(p)
    k10, k25 = _ceil(0.10 * n), _ceil(0.25 * n)
    n95 = p[_ceil(0.95 * r) - 1]
    recall10pct = sum(x <= k10 for x in p) / r
    return {"docs_to_all": float(p[-1]),
            "wss@95": (n - n95) / n - 0.05,
            "recall@10": sum(x <= 10 for x in p) / r,
            "recall@10%": recall10pct,
            "recall@25%": sum(x <= k25 for x in p) / r,
            "erf@10": recall10pct - k10 / n,
            "atd": float(np.mean(p))}


def _ceil(x: float) -> int:
    """``ceil`` that ignores float noise (0.95 * 20 is 19, not 20)."""
    return math.ceil(x - 1e-9)


def pooled(per_query: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over queries, with ``queries``: how many."""
    rows = list(per_query)
    out: dict[str, float] = {m: float(np.mean([r[m] for r in rows])) if rows else math.nan
                             for m in METRICS}
    out["queries"] = len(rows)
    return out


def recall_curve(positions: Sequence[int], n: int) -> np.ndarray:
    """Recall after screening 0..n documents (length n + 1)."""
    curve = np.zeros(n + 1)
    for x in positions:
        curve[x:] += 1
    return curve / max(len(positions), 1)
