"""The parts of a ranker round around its training (:mod:`curation.training.ranker`): who asks
and how it may promote (:class:`RoundRequest`), what it did (:class:`RankerRound`), the gate's
decision on its held-out measurement (:func:`decide_round`), what a model identical to a saved
version means (:func:`identical_decision`) and the round's row in the rounds history
(:func:`record_round`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from curation.ranking.versions import RankerVersion
from curation.store.errors import WorkspaceError
from curation.store.rankers import RankerRoundLock
from curation.store.workspace import Workspace, utcnow
from curation.training.gate import GateDecision, no_measurement, ranker_decision
from curation.training.ranker_data import LabelSet
from curation.training.round_history import RoundRecord
from curation.training.round_history import record_round as store_round
from curation.training.round_measure import RoundMeasurement

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RankerRound:
    """What a round did.

    Attributes:
        version: The version it saved, or the saved version its model equals
            (``identical_to``).
        decision: The gate's decision and reasons.
        activated: Whether the version now ranks.
        labels_used: The label ids it learned from (every split).
        labels_held_out: Kept for older callers: always empty (every label trains).
        identical_to: The saved version the round's model equals (nothing was saved), if any.
        measurement: The held-out scores the gate compared.
        labels: Which labels it learned from (per user and split, ids range).
        record_id: Its row in the rounds history.
    """

    version: RankerVersion
    decision: GateDecision
    activated: bool
    seconds_features: float
    seconds_fit: float
    train_queries: int
    train_rows: int
    labels_used: tuple[int, ...]
    labels_held_out: tuple[int, ...] = ()
    identical_to: str | None = None
    measurement: RoundMeasurement | None = None
    labels: dict[str, Any] = field(default_factory=dict)
    record_id: int = 0


@dataclass(frozen=True)
class RoundRequest:
    """Who asks for a round and how it may promote (see :func:`train_ranker`)."""

    gate: bool = True
    tolerance_pp: float = 0.5
    reason: str = ""
    on_behalf_of: str = ""
    trigger: str = ""


def decide_round(measured: RoundMeasurement, request: RoundRequest,
                 pooled: str = "") -> GateDecision:
    """The gate's decision on a round's measurement (``pooled``: the workspace's evidence for
    the learned ranker, :func:`curation.search.ranked.pooled_evidence`)."""
    if measured.candidate is None or measured.reference is None:
        return no_measurement()
    decision = ranker_decision(measured.candidate.metrics, measured.reference.metrics,
                               against=measured.against, queries=measured.compared,
                               first=measured.first, reason=request.reason,
                               tolerance_pp=request.tolerance_pp, pooled=pooled)
    return GateDecision(decision.promote, (*measured.notes, *decision.reasons),
                        decision.candidate, decision.active, decision.deltas,
                        decision.tolerance_pp)


def identical_decision(same: RankerVersion, decision: GateDecision, lock: RankerRoundLock
               ) -> tuple[GateDecision, str]:
    """The decision for a round whose model equals the saved version ``same``: nothing is
    saved; ``same`` is promoted only when the gate says so and it is not active already."""
    head = f"identical to {same.id} (the same model file): no second copy kept"
    if same.id == lock.started_from:
        why = f"{head}; it is the active version already"
        return GateDecision(False, (why, *decision.reasons), decision.candidate,
                            decision.active, decision.deltas, decision.tolerance_pp), why
    return GateDecision(decision.promote, (head, *decision.reasons), decision.candidate,
                        decision.active, decision.deltas, decision.tolerance_pp), ""


def record_round(ws: Workspace, lock: RankerRoundLock | None, request: RoundRequest,
                 outcome: str, reasons: Sequence[str], *, version: str | None = None,
                 labels: LabelSet | None = None, measured: RoundMeasurement | None = None,
                 seconds: dict[str, float] | None = None, schema: str = "",
                 started_by: str = "") -> RoundRecord:
    """Append the round to the history (a failure to write it is logged, never raised)."""
    detail: dict[str, Any] = {"trigger": request.trigger}
    if labels is not None:
        detail["labels"] = labels.provenance()
    if measured is not None:
        detail["heldout"] = measured.summary()
    if seconds:
        detail["seconds"] = seconds
    rec = RoundRecord(schema=lock.schema if lock else schema,
                      started_at=lock.started_at if lock else utcnow(),
                      started_by=lock.started_by if lock else started_by, outcome=outcome,
                      reasons=tuple(reasons), version=version,
                      started_from=lock.started_from if lock else None,
                      on_behalf_of=request.on_behalf_of,
                      labels=len(labels.used) if labels is not None else 0, detail=detail)
    try:
        return store_round(ws, rec)
    except WorkspaceError as exc:
        logger.warning("could not record the ranker round of %s (%s)", rec.schema, exc)
        return rec


# -- in words (the Models page, the sidebar, kbcurate rank list / rounds) -------------------------
def learned_from(manifest: Mapping[str, Any]) -> str:
    """Which labels a version learned from, in words ("12 labels: ann 8, bob 4 · train 5, dev
    3, test 4 · ids 1-40"); older versions name only their count (train split only)."""
    info = manifest.get("labels")
    used = manifest.get("labels_used")
    if not isinstance(info, dict):
        n = len(used) if isinstance(used, list) else 0
        return f"{n} labels (train split only)" if n else "KB only"
    n = int(info.get("used", 0) or 0)
    if not n:
        return "KB only (no label yet)"
    users = ", ".join(f"{u} {c}" for u, c in dict(info.get("by_user", {})).items())
    splits = ", ".join(f"{s} {c}" for s, c in dict(info.get("by_split", {})).items())
    ids = info.get("ids") or []
    span = f" · ids {ids[0]}-{ids[1]}" if len(ids) == 2 else ""
    return f"{n} labels: {users} · {splits}{span}"


def round_line(rec: RoundRecord) -> str:
    """One round in words (plain text: escape it to render it): "2026-11-27 05:04 · 20 labels
    (alice) · held-out NDCG@10 0.741 vs 0.660 for bm25+rerank · promoted disease_gene-ranker@1"."""
    held = rec.detail.get("heldout") or {}
    cand, ref = held.get("candidate") or {}, held.get("reference") or {}
    score = ""
    if "ndcg@10" in cand and "ndcg@10" in ref:
        score = (f" · held-out NDCG@10 {cand['ndcg@10']:.3f} vs {ref['ndcg@10']:.3f} for "
                 f"{held.get('against', '?')} ({held.get('compared', 0)} queries)")
    who = f" ({rec.on_behalf_of})" if rec.on_behalf_of else ""
    what = {"promoted": f"promoted {rec.version}",
            "kept": f"kept {rec.version} as a candidate",
            "identical": f"identical to {rec.version}: not kept twice",
            "skipped": "skipped", "failed": "failed"}[rec.outcome]
    last = rec.reasons[-1].removeprefix("kept as a candidate: ") if rec.reasons else ""
    why = f": {last}" if last and rec.outcome != "promoted" else ""
    when = rec.started_at[:16].replace("T", " ")
    return f"{when} · {rec.labels} labels{who}{score} · {what}{why}"
