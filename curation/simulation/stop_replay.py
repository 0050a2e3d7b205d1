"""Replaying every stop rule (:data:`curation.screening.stop_rules.STOP_RULES`) on the same
lists, side by side (issue 43).

The simulated curator screens a query in the in-query learned order to the end of its list
(:class:`~curation.screening.stop_base.ScreenedRun`); each rule then says where it would have
stopped (a sampling rule also screens its random draws, counted in its cost). Per query the
replay records where each rule stopped, the recall there, whether it met the target, and the
**oracle stop**: the documents needed to reach the target recall in that order. Pooled over
queries (each weighs the same):

* ``coverage``: the share of queries whose recall at stop met the target;
* ``screened_at_stop``: mean documents screened when the rule said stop;
* ``oracle``: mean oracle stop; ``x_oracle``: ``screened_at_stop / oracle`` (ratio of means);
* ``work_saved``: mean share of the list left unscreened;
* ``recall_at_stop``: mean recall at stop;
* ``per_query``: ``{key: {"stopped_at", "recall", "oracle", "met"}}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from curation.screening.stop_base import ScreenedRun, StopRule
from curation.screening.stop_rules import STOP_RULES, stop_rule
from kb_sources.errors import CurationError


@dataclass(frozen=True)
class StopOutcome:
    """Where one rule stopped on one list.

    Attributes:
        rule: The rule's name.
        qid: The query.
        stopped_at: Documents screened when it stopped.
        n: Documents in the list.
        found: Relevant found by then.
        relevant: Relevant in the list.
        oracle: Documents needed to reach the target in the learned order.
        met: Whether the recall at stop met the target.
        said_stop: Whether the rule said stop (False: it screened the whole list).
    """

    rule: str
    qid: str
    stopped_at: int
    n: int
    found: int
    relevant: int
    oracle: int
    met: bool
    said_stop: bool = True

    @property
    def recall(self) -> float:
        return self.found / self.relevant if self.relevant else 1.0

    @property
    def work_saved(self) -> float:
        return 1.0 - self.stopped_at / self.n

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "recall": self.recall, "work_saved": self.work_saved}


def rules_named(names: Sequence[str] | None = None) -> dict[str, StopRule]:
    """The registered rules ``names`` (default: all), by name.

    Raises:
        CurationError: An unknown name (the message lists the registry).
    """
    if names is not None and not names:
        raise CurationError(f"No stop rule named; give some of: {', '.join(STOP_RULES)}")
    return {name: stop_rule(name) for name in (names or list(STOP_RULES))}


def replay_rules(run: ScreenedRun, rules: Mapping[str, StopRule]) -> dict[str, StopOutcome]:
    """Every rule on one run (the learned order screened to the end)."""
    if len(run.order) != run.n:
        raise CurationError(f"A replay needs the whole list screened: {len(run.order)} of "
                            f"{run.n} in the order")
    oracle = run.oracle()
    out = {}
    for name, rule in rules.items():
        point = rule.stop(run)
        out[name] = StopOutcome(name, run.qid, point.screened, run.n, point.found, run.total,
                                oracle, point.met(run.total, run.target), point.said_stop)
    return out


def stop_summary(outcomes: Iterable[StopOutcome],
                 key: Callable[[StopOutcome], str] = lambda o: o.qid) -> dict[str, Any]:
    """Coverage, mean screened at stop, its ratio to the oracle, work saved, mean recall at
    stop, and each query's stop (keyed by ``key``)."""
    rows = list(outcomes)
    if not rows:
        return {"queries": 0}
    screened = float(np.mean([o.stopped_at for o in rows]))
    oracle = float(np.mean([o.oracle for o in rows]))
    return {"queries": len(rows), "coverage": float(np.mean([o.met for o in rows])),
            "screened_at_stop": screened, "oracle": oracle,
            "x_oracle": screened / oracle if oracle else float("nan"),
            "work_saved": float(np.mean([o.work_saved for o in rows])),
            "recall_at_stop": float(np.mean([o.recall for o in rows])),
            "per_query": {key(o): {"stopped_at": o.stopped_at, "recall": round(o.recall, 4),
                                   "oracle": o.oracle, "met": o.met} for o in rows}}


def format_stops(stops: Mapping[str, Mapping[str, Any]], target: float,
                 chosen: str | None = None) -> list[str]:
    """The rules of one task as table lines (the chosen rule marked ``*``)."""
    lines = [f"{'stop rule':<21}{'coverage':>9}{'screened':>10}{'x oracle':>10}"
             f"{'saved':>8}{'recall':>8}   at {target:.0%} recall"]
    for name, s in stops.items():
        if not s.get("queries"):
            continue
        mark = "*" if name == chosen else " "
        lines.append(f"{mark}{name:<20}{s['coverage']:>9.1%}{s['screened_at_stop']:>10.1f}"
                     f"{s['x_oracle']:>9.1f}x{s['work_saved']:>8.1%}"
                     f"{s['recall_at_stop']:>8.3f}")
    first = next((s for s in stops.values() if s.get("queries")), None)
    if first:
        lines.append(f" oracle stop: {first['oracle']:.1f} screened on average, "
                     f"{first['queries']} queries")
    return lines
