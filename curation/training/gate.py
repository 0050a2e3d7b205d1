"""The evaluation gate: a new version is promoted only when it does not make search worse.

Both versions are scored on the same held-out queries (the test split by query entity, which no
KB example and no label of the loop touches) with the metrics of ``kbcurate evaluate``. The
candidate is promoted when neither NDCG@10 nor EntityRecall@10 drops by more than the tolerance
(default 0.5 pp) **and** at least one of them improves; otherwise it stays a candidate and the
decision says why, metric by metric. An admin may promote anyway with a written reason
(:func:`curation.training.activation.promote`), which the audit log keeps.

A learned-ranker round (:func:`gate_ranker_round`) is gated against the version it started from,
and promotes with a compare-and-swap on that version: an admin who activated another version
while the round ran keeps that choice, and the round's version stays a candidate that says why
(its manifest's ``gate``). An active version that cannot be used (gone, damaged) is replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from curation.ranking.versions import (
    RankerVersion,
    get_version,
    promote,
    update_manifest,
    verify_model,
)
from curation.store.errors import Actor, require_admin_actor
from curation.store.rankers import RankerRoundLock, Rankers
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

#: Below this many test queries the gate does not promote without an admin's written reason.
MIN_TEST_QUERIES = 20
#: The metrics the gate compares.
GATE_METRICS: tuple[str, ...] = ("ndcg@10", "entity_recall@10")


@dataclass(frozen=True)
class GateDecision:
    """Whether a candidate replaces the active version, and why.

    Attributes:
        promote: True when the candidate passes.
        reasons: One sentence per metric (and the verdict), for the admin.
        candidate: The candidate's metrics.
        active: The active version's metrics (empty when there is none).
        deltas: candidate - active per gate metric, in percentage points.
        tolerance_pp: The allowed drop.
    """

    promote: bool
    reasons: tuple[str, ...]
    candidate: Mapping[str, float]
    active: Mapping[str, float]
    deltas: Mapping[str, float] = field(default_factory=dict)
    tolerance_pp: float = 0.5

    def to_json(self) -> dict[str, Any]:
        return {"promote": self.promote, "reasons": list(self.reasons),
                "candidate": dict(self.candidate), "active": dict(self.active),
                "deltas_pp": dict(self.deltas), "tolerance_pp": self.tolerance_pp}


def decide(candidate: Mapping[str, float], active: Mapping[str, float] | None, *,
           tolerance_pp: float = 0.5, metrics: Sequence[str] = GATE_METRICS,
           test_queries: int | None = None, small_test_reason: str = "") -> GateDecision:
    """The gate's decision for a candidate's metrics against the active version's.

    Args:
        candidate: Metric name -> value in [0, 1] (``ndcg@10``, ``entity_recall@10``, ...).
        active: The active version's metrics, or None/empty when the schema has no active
            version (then the candidate is promoted: anything beats no trained model).
        tolerance_pp: Largest allowed drop per metric, in percentage points.
        metrics: The metrics compared.
        test_queries: How many test queries the metrics come from; below
            :data:`MIN_TEST_QUERIES` the gate does not promote unless ``small_test_reason``
            (an admin's written reason, audited with the switch) is given.
        small_test_reason: That reason.

    Raises:
        CurationError: A negative tolerance or a metric missing from the candidate.
    """
    if tolerance_pp < 0:
        raise CurationError(f"The gate tolerance must be >= 0 pp, got {tolerance_pp}")
    missing = [m for m in metrics if m not in candidate]
    if missing:
        raise CurationError(f"The candidate has no {', '.join(missing)}; evaluate it first")
    decision = _compare(candidate, active, tolerance_pp, metrics)
    if test_queries is None or test_queries >= MIN_TEST_QUERIES or not decision.promote:
        return decision
    if small_test_reason.strip():
        why = (f"only {test_queries} test queries (< {MIN_TEST_QUERIES}), promoted on an "
               f"admin's written reason: {small_test_reason.strip()}")
        return replace(decision, reasons=(*decision.reasons[:-1], why, decision.reasons[-1]))
    why = (f"only {test_queries} test queries (< {MIN_TEST_QUERIES}): too few to trust the "
           "comparison; kept as a candidate (an admin may promote it with a written reason: "
           "kbcurate models promote VERSION --reason TEXT)")
    return replace(decision, promote=False, reasons=(*decision.reasons[:-1], why))


def _compare(candidate: Mapping[str, float], active: Mapping[str, float] | None,
             tolerance_pp: float, metrics: Sequence[str]) -> GateDecision:
    if not active:
        return GateDecision(True, ("no active version: the candidate becomes the first",),
                            dict(candidate), {}, {}, tolerance_pp)
    deltas = {m: round(100 * (float(candidate[m]) - float(active.get(m, 0.0))), 2)
              for m in metrics}
    reasons = []
    dropped = improved = False
    for m in metrics:
        d = deltas[m]
        if d < -tolerance_pp:
            dropped = True
            reasons.append(f"{m} drops by {-d:.2f} pp (more than the {tolerance_pp:g} pp allowed)")
        elif d > 0:
            improved = True
            reasons.append(f"{m} improves by {d:.2f} pp")
        else:
            reasons.append(f"{m} changes by {d:+.2f} pp (within tolerance, no gain)")
    promote = improved and not dropped
    verdict = ("promoted" if promote else
               "kept as a candidate: a metric dropped" if dropped else
               "kept as a candidate: no metric improved")
    return GateDecision(promote, (*reasons, verdict), dict(candidate), dict(active), deltas,
                        tolerance_pp)


# -- the learned ranker's rounds ---------------------------------------------------------------
def gate_ranker_round(ws: Workspace, version: RankerVersion, lock: RankerRoundLock, *,
                      user: Actor, gate: bool = True, tolerance_pp: float = 0.5
                      ) -> tuple[RankerVersion, GateDecision, bool]:
    """The gate's decision for a round's new version against the version the round started
    from, the promotion (a compare-and-swap on that version) and the verdict recorded in the
    version's manifest. Returns (the version, the decision, whether it was activated)."""
    dev = version.metrics.get("dev", {})
    old, why = compared_with(ws, lock.started_from)
    if not dev:
        decision = GateDecision(False, ("no dev query to compare on: not activated",), {}, {})
    else:
        decision = decide(dev, old, tolerance_pp=tolerance_pp)
        decision = replace(decision, reasons=(why, *decision.reasons)) if why else decision
    activated = False
    if decision.promote and gate:
        activated = promote(ws, version.id, user=user, reason="; ".join(decision.reasons),
                            started_from=lock.started_from)
        if not activated:
            now = Rankers(ws).active(version.schema) or "no version"
            decision = replace(decision, promote=False, reasons=(
                *decision.reasons, f"not activated: {now} was made active while this round ran "
                f"(it started from {lock.started_from or 'no active version'}); that choice "
                "stands, this version stays a candidate"))
    actor = require_admin_actor(user, "Training a ranker version")
    version = update_manifest(ws, version.id, {"gate": {**decision.to_json(),
                                                        "activated": activated}}, actor=actor)
    return version, decision, activated


def compared_with(ws: Workspace, started_from: str | None) -> tuple[dict[str, Any] | None, str]:
    """(dev metrics of the version a round started from, or None; why none when it is named
    but cannot be used: then the candidate replaces it)."""
    if started_from is None:
        return None, ""
    try:
        previous = get_version(ws, started_from)
        verify_model(previous, ws)
    except CurationError as exc:
        return None, (f"the active version {started_from} cannot be used ({exc}); the "
                      "candidate replaces it")
    return previous.metrics.get("dev") or None, ""
