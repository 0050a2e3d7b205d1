"""The history of learned-ranker rounds (issue 36 item 5): what each round did, and why.

Every round that ran (started by the CLI, an admin, or the system's learn-as-you-label job on a
curator's behalf; also the rounds that were skipped because another round of the schema ran, or
that failed) is one row of the workspace's audit log: object type ``ranker round``, object id
the schema, action the outcome (``promoted``; ``kept``: the gate said no; ``identical``: the
model equals a saved version, so no second copy was kept; ``skipped``; ``failed``), actor who
ran it, and as JSON the labels it learned from, the held-out scores of its candidate and of
what the candidate was compared with (the active version, or the measured default for a first
version) and the reasons. The audit log is kept on both stores (SQLite, PostgreSQL), so the
history needs no table of its own and no SQL here; the ``start`` rows that
:func:`curation.training.ranker.maybe_learn` writes under the same object type are not rounds
and are skipped.

The Models page and the sidebar show the last rounds per schema (:func:`last_rounds`,
:func:`last_rounds_per_schema`); :func:`record_round` appends one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from curation.store.audit import AuditEntry
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import InputFormatError
from kb_sources.json_text import parse_json

logger = logging.getLogger(__name__)

#: The outcomes a round records (the audit rows' actions).
OUTCOMES = ("promoted", "kept", "identical", "skipped", "failed")
#: The audit log's object type of a round.
ROUND = "ranker round"
#: Audit rows read to find the last rounds (rounds of every schema, newest first).
SCAN = 500


@dataclass(frozen=True)
class RoundRecord:
    """One ranker round as the history keeps it.

    Attributes:
        schema: The schema whose ranker the round trained.
        started_at: When the round started (UTC, ISO 8601).
        started_by: Who ran it (``cli``, an admin, ``<system>``).
        outcome: One of :data:`OUTCOMES`.
        reasons: Why (the gate's sentences, or the error).
        version: The version the round saved (or the saved one its model equals), if any.
        started_from: The version active when it started.
        on_behalf_of: The curator whose labels started it (label-triggered rounds).
        labels: How many labels it learned from.
        detail: The rest (held-out scores, label counts per user and split, seconds, trigger).
        finished_at: When it ended (the audit row's time).
        id: The audit row's id (0 before it is stored).
    """

    schema: str
    started_at: str
    started_by: str
    outcome: str
    reasons: tuple[str, ...] = ()
    version: str | None = None
    started_from: str | None = None
    on_behalf_of: str = ""
    labels: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    finished_at: str = ""
    id: int = 0

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown ranker round outcome {self.outcome!r}; expected one of "
                             f"{', '.join(OUTCOMES)}")

    def to_json(self) -> dict[str, Any]:
        """The stored form (the audit row's ``after``, less what the row itself holds)."""
        return {"started_at": self.started_at, "version": self.version,
                "started_from": self.started_from, "on_behalf_of": self.on_behalf_of,
                "labels": self.labels, "reasons": list(self.reasons), "detail": self.detail}


def record_round(ws: Workspace, rec: RoundRecord) -> RoundRecord:
    """Append one round to the history; returns it with its row id and time."""
    with ws.transaction():
        ws.audit(rec.started_by, rec.outcome, ROUND, rec.schema, after=rec.to_json())
    stored = next((r for r in last_rounds(ws, rec.schema, 1)), None)
    return stored if stored is not None else replace(rec, finished_at=utcnow())


def last_rounds(ws: Workspace, schema: str | None = None, limit: int = 5) -> list[RoundRecord]:
    """The newest ``limit`` rounds (of one schema), newest first."""
    out = []
    for entry in ws.audit_log(ROUND, SCAN):
        if entry.action in OUTCOMES and (schema is None or entry.object_id == schema):
            rec = _record(entry)
            if rec is not None:
                out.append(rec)
                if len(out) >= limit:
                    break
    return out


def last_rounds_per_schema(ws: Workspace, limit: int = 3) -> dict[str, list[RoundRecord]]:
    """schema -> its newest ``limit`` rounds, newest first (schemas with rounds only, the one
    with the newest round first)."""
    out: dict[str, list[RoundRecord]] = {}
    for rec in last_rounds(ws, None, SCAN):
        rows = out.setdefault(rec.schema, [])
        if len(rows) < limit:
            rows.append(rec)
    return out


def _record(entry: AuditEntry) -> RoundRecord | None:
    """A round read back from its audit row (None, logged, when the row is not one)."""
    try:
        data = parse_json(entry.after or "{}", f"audit row {entry.id}", expected="a ranker round "
                          "record (a JSON object)", fix="none needed: the row is skipped")
    except InputFormatError as exc:
        logger.warning("a ranker round whose record cannot be read: %s", exc)
        return None
    if not isinstance(data, dict):
        return None
    reasons = data.get("reasons")
    detail = data.get("detail")
    return RoundRecord(
        schema=entry.object_id, started_at=str(data.get("started_at") or entry.ts),
        started_by=entry.actor, outcome=entry.action,
        reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else (),
        version=data.get("version") if isinstance(data.get("version"), str) else None,
        started_from=data.get("started_from")
        if isinstance(data.get("started_from"), str) else None,
        on_behalf_of=str(data.get("on_behalf_of") or ""),
        labels=int(data.get("labels") or 0) if isinstance(data.get("labels"), int) else 0,
        detail=detail if isinstance(detail, dict) else {}, finished_at=entry.ts, id=entry.id)
