"""The evaluation gate: a new version is promoted only when it does not make search worse.

Both versions are scored on the same held-out queries (the test split by query entity, which no
KB example and no label of the loop touches) with the metrics of ``kbcurate evaluate``. The
candidate is promoted when neither NDCG@10 nor EntityRecall@10 drops by more than the tolerance
(default 0.5 pp) **and** at least one of them improves; otherwise it stays a candidate and the
decision says why, metric by metric. An admin may promote anyway with a written reason
(:func:`curation.training.activation.promote`), which the audit log keeps.

A learned-ranker round is measured out of fold on the held-out pool (dev + test queries;
:mod:`curation.training.heldout`) and decided by :func:`ranker_decision`: against the active
version on the same queries, or, for a first version (or when the active one cannot be used),
against the measured default bm25 + rerank, which it must beat; below 20 compared queries only
an admin's written reason promotes. :func:`gate_ranker_round` promotes with a compare-and-swap
on the version the round started from: an admin who activated another version while the round
ran keeps that choice, and the round's version stays a candidate that says why (its manifest's
``gate``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from curation.ranking.versions import RankerVersion, promote, update_manifest
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
    improved = False
    for m in metrics:
        d = deltas[m]
        if d < -tolerance_pp:
            reasons.append(f"{m} drops by {-d:.2f} pp (more than the {tolerance_pp:g} pp allowed)")
        elif d > 0:
            improved = True
            reasons.append(f"{m} improves by {d:.2f} pp")
        else:
            reasons.append(f"{m} changes by {d:+.2f} pp (within tolerance, no gain)")
    fallen = [f"{m} dropped by {-deltas[m]:.2f} pp" for m in metrics if deltas[m] < -tolerance_pp]
    promote = improved and not fallen
    verdict = ("promoted" if promote else
               f"kept as a candidate: {' and '.join(fallen)}" if fallen else
               "kept as a candidate: no metric improved (a tie is not a gain)")
    return GateDecision(promote, (*reasons, verdict), dict(candidate), dict(active), deltas,
                        tolerance_pp)


# -- the learned ranker's rounds ---------------------------------------------------------------
#: What an admin does to promote a ranker version the gate kept (said in the gate's reasons).
RANKER_OVERRIDE = ("an admin may activate it with a written reason: the Models page, or kbcurate "
                   "rank activate VERSION --reason TEXT")


def ranker_decision(candidate: Mapping[str, float], reference: Mapping[str, float], *,
                    against: str, queries: int, first: bool, reason: str = "",
                    tolerance_pp: float = 0.5, pooled: str = "") -> GateDecision:
    """The gate's decision for a ranker round's candidate, both measured out of fold on the same
    ``queries`` held-out queries (:mod:`curation.training.heldout`).

    ``reference``: the active version's scores, or for a ``first`` version the measured
    default's (``against`` names it: a first version must beat bm25 + rerank, never "anything
    beats no version"). Below :data:`MIN_TEST_QUERIES` compared queries the candidate is kept
    unless ``reason`` (an admin's written reason) is given, or, for a ``first`` version that
    no metric finds worse, ``pooled`` says the learned ranker beat the measured default on every
    other schema measured on enough queries (:func:`curation.search.ranked.pooled_evidence`):
    a schema too small to decide takes the workspace's evidence (issue 44 item 2).
    """
    head = (f"held-out: {queries} queries; NDCG@10 {candidate.get('ndcg@10', 0.0):.3f} vs "
            f"{reference.get('ndcg@10', 0.0):.3f} for {against}, EntityRecall@10 "
            f"{candidate.get('entity_recall@10', 0.0):.3f} vs "
            f"{reference.get('entity_recall@10', 0.0):.3f}")
    decision = decide(candidate, reference, tolerance_pp=tolerance_pp)
    reasons = [head, *decision.reasons]
    if first and not decision.promote:
        reasons[-1] = (f"{reasons[-1]}: a first version must beat the measured default "
                       f"({against}) on the held-out queries")
    elif first:
        reasons[-1] = f"promoted: the first version beats the measured default ({against})"
    decision = replace(decision, reasons=tuple(reasons))
    dropped = any(d < -tolerance_pp for d in decision.deltas.values())
    if first and pooled and queries < MIN_TEST_QUERIES and not dropped and not reason.strip():
        return replace(decision, promote=True, reasons=(
            *reasons[:-1], f"only {queries} held-out queries (< {MIN_TEST_QUERIES}): too few to "
            f"decide alone, and no metric dropped; promoted on the workspace's evidence: "
            f"{pooled}"))
    if queries >= MIN_TEST_QUERIES or not decision.promote:
        return decision
    if reason.strip():
        return replace(decision, reasons=(*reasons[:-1], f"only {queries} held-out queries "
                       f"(< {MIN_TEST_QUERIES}), promoted on an admin's written reason: "
                       f"{reason.strip()}", reasons[-1]))
    return replace(decision, promote=False, reasons=(
        *reasons[:-1], f"only {queries} held-out queries (< {MIN_TEST_QUERIES}): too few to "
        f"trust the comparison; kept as a candidate ({RANKER_OVERRIDE})"))


def no_measurement() -> GateDecision:
    """The decision when the schema has no held-out query at all."""
    return GateDecision(False, ("no held-out (dev or test) query to measure on: kept as a "
                                f"candidate ({RANKER_OVERRIDE})",), {}, {})


def gate_ranker_round(ws: Workspace, version: RankerVersion, lock: RankerRoundLock,
                      decision: GateDecision, *, user: Actor, gate: bool = True,
                      record: bool = True) -> tuple[RankerVersion, GateDecision, bool]:
    """Promote a round's version when ``decision`` says so (and ``gate``), with a
    compare-and-swap on the version the round started from, and record the verdict in the
    version's manifest (``record``: False for a saved version the round's model equals).
    Returns (the version, the decision, whether it was activated)."""
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
    elif decision.promote:
        decision = replace(decision, reasons=(*decision.reasons,
                                              "not activated: saved only (--no-activate)"))
    if record:
        actor = require_admin_actor(user, "Training a ranker version")
        version = update_manifest(ws, version.id, {"gate": {**decision.to_json(),
                                                            "activated": activated}},
                                  actor=actor)
    return version, decision, activated
