"""What the learned ranker (``curation/ranking``) keeps in the workspace database.

:class:`Rankers`, built on a workspace (``Rankers(ws)``), holds the SQL of the ranker's ``meta``
settings:

* which ranker version is active per schema (audited);
* each schema's default ranking (:class:`RankingChoice`, the measurement that chose it, audited);
* learn as you label: how many new labels start a ranker round (``ranker.retrain_every``,
  default 20) and which labels the last round took.

The rest of what the ranker reads comes from the other repositories: the entity dictionary by
type (:meth:`~curation.store.entities.Entities.forms`), documents as ``(title, abstract)``
(:meth:`~curation.store.documents.Documents.parts`) and the KB citations of a schema's relations
by query key (:meth:`~curation.store.citations.Citations.cited_by_query`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

_ACTIVE_KEY = "ranker.active.{schema}"


# -- each schema's default ranking (curation.evaluation.best) --------------------------------------
_DEFAULT_KEY = "ranking.default.{schema}"


# -- learn as you label ---------------------------------------------------------------------------
_EVERY_KEY = "ranker.retrain_every"
_THROUGH_KEY = "ranker.labels_through.{schema}"
#: New labels on a schema that start a ranker round, unless the workspace says otherwise.
DEFAULT_RETRAIN_EVERY = 20


@dataclass(frozen=True)
class RankingChoice:
    """The measurement that chose a schema's default ranking (kept in ``meta`` as JSON).

    Attributes:
        best: The configuration measured best ("bm25+rerank", "ranked", ...).
        metric: The metric compared ("ndcg@10").
        split: The split it was measured on ("test").
        scores: Configuration -> its score.
        queries: How many queries were scored.
        seed: The split's seed.
        notes: Configurations left out, and why.
        measured_at: When (UTC, ISO 8601).
        by: Who asked for the measurement.
        dense_version: The dense version behind the hybrid configuration, if measured.
        ranker_version: The ranker version behind "ranked", if measured.
    """

    best: str
    metric: str = "ndcg@10"
    split: str = "test"
    scores: dict[str, float] = field(default_factory=dict)
    queries: int = 0
    seed: int | None = None
    notes: tuple[str, ...] = ()
    measured_at: str = ""
    by: str = ""
    dense_version: str | None = None
    ranker_version: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (versions left out when not measured, as before)."""
        out = {**asdict(self), "notes": list(self.notes)}
        return {k: v for k, v in out.items()
                if not (k in ("dense_version", "ranker_version") and v is None)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankingChoice | None:
        """The stored form read back (unknown keys ignored); None without a ``best``."""
        if not data.get("best"):
            return None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "best": str(data["best"]), "notes": tuple(known.get("notes", ())),
                      "scores": {str(k): float(v) for k, v in known.get("scores", {}).items()}})


class Rankers:
    """The learned ranker's settings in ``meta``: active version, defaults, rounds."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def active(self, schema: str) -> str | None:
        """The id of the schema's active ranker version, or None."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (_ACTIVE_KEY.format(schema=schema),)).fetchone()
        return row[0] if row and row[0] else None

    def set_active(self, schema: str, ident: str | None, *, actor: str,
                          reason: str = "") -> None:
        """Make ``ident`` the schema's active ranker (None: none), audited as ``actor``."""
        key = _ACTIVE_KEY.format(schema=schema)
        with self.ws.transaction():
            old = self.active(schema)
            if old == ident:
                return
            if ident is None:
                self.ws.conn.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                self.ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                     (key, ident))
            self.ws.audit(actor, "activate" if ident else "deactivate", "ranker",
                          ident or old or "", before={key: old},
                          after={key: ident, "reason": reason})

    def default_ranking(self, schema: str) -> RankingChoice | None:
        """The stored measurement that chose the schema's default ranking, or None."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (_DEFAULT_KEY.format(schema=schema),)).fetchone()
        if not row or not row[0]:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            logger.warning("meta %s is not JSON; ignoring it", _DEFAULT_KEY.format(schema=schema))
            return None
        if not isinstance(value, dict):
            return None
        try:
            return RankingChoice.from_json(value)
        except (TypeError, ValueError):
            logger.warning("meta %s is not a ranking measurement; ignoring it",
                           _DEFAULT_KEY.format(schema=schema))
            return None

    def set_default_ranking(self, schema: str, choice: RankingChoice, *, actor: str) -> None:
        """Store the measurement that chose the schema's default ranking (audited)."""
        key = _DEFAULT_KEY.format(schema=schema)
        record = choice.to_json()
        with self.ws.transaction():
            old = self.default_ranking(schema)
            self.ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                 (key, json.dumps(record, sort_keys=True)))
            self.ws.audit(actor, "choose", "default ranking", schema,
                          before={"best": old.best if old else None}, after=record)

    def retrain_every(self) -> int:
        """New labels per schema that start a ranker round (0: never automatically)."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?", (_EVERY_KEY,)).fetchone()
        try:
            if not row or row[0] in (None, ""):
                return DEFAULT_RETRAIN_EVERY
            return max(int(row[0]), 0)
        except ValueError:
            logger.warning("meta %s=%r is not a number; using %d", _EVERY_KEY, row[0],
                           DEFAULT_RETRAIN_EVERY)
            return DEFAULT_RETRAIN_EVERY

    def set_retrain_every(self, every: int, *, actor: str) -> None:
        """Change :meth:`retrain_every` (audited)."""
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise CurationError(f"The ranker retrains after N new labels; N must be a whole number "
                                f">= 0 (0: never automatically), got {every!r}")
        with self.ws.transaction():
            old = self.retrain_every()
            self.ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                 (_EVERY_KEY, str(every)))
            self.ws.audit(actor, "set", "setting", _EVERY_KEY, before={"value": old},
                          after={"value": every})

    def labels_waiting(self, schema: str) -> int:
        """Label rows of ``schema`` given since the last ranker round took its labels."""
        through = self._through(schema)
        return int(self.ws.conn.execute("SELECT COUNT(*) FROM labels WHERE schema = ? AND id > ?",
                                        (schema, through)).fetchone()[0])

    def claim_labels(self, schema: str, at_least: int) -> int | None:
        """When ``at_least`` label rows of ``schema`` arrived since the last claim, mark them taken
        by a ranker round and return how many; else None. One transaction, so two processes
        labelling at once never both start a round for the same labels."""
        if at_least <= 0:
            return None
        with self.ws.transaction():
            through = self._through(schema)
            count, last = self.ws.conn.execute(
                "SELECT COUNT(*), MAX(id) FROM labels WHERE schema = ? AND id > ?",
                (schema, through)).fetchone()
            if int(count) < at_least:
                return None
            self.ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                 (_THROUGH_KEY.format(schema=schema), str(int(last))))
        return int(count)

    def _through(self, schema: str) -> int:
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (_THROUGH_KEY.format(schema=schema),)).fetchone()
        return int(row[0]) if row and str(row[0]).isdigit() else 0
