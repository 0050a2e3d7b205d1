"""What the learned ranker (``curation/ranking``) keeps in the workspace database.

:class:`Rankers`, built on a workspace (``Rankers(ws)``), holds the SQL of the ranker's ``meta``
settings:

* which ranker version is active per schema (admins only, an existing version only, audited;
  a round promotes its version only if the active one is still the one it started from: a
  compare-and-swap, so an admin's choice made meanwhile stands);
* each schema's default ranking (:class:`RankingChoice`, the measurement that chose it, admins
  only, audited);
* learn as you label: how many new labels start a ranker round (``ranker.retrain_every``,
  default 20, admins only) and which labels the last round took;
* one ranker round per schema at a time: a ``ranker_rounds`` row while a round runs (its
  process, machine and heartbeat; a row whose process is gone is taken over).

The versions themselves (numbers, checksums, manifests) are
:class:`~curation.store.ranker_versions.RankerVersions`.

The rest of what the ranker reads comes from the other repositories: the entity dictionary by
type (:meth:`~curation.store.entities.Entities.forms`), documents as ``(title, abstract)``
(:meth:`~curation.store.documents.Documents.parts`) and the KB citations of a schema's relations
by query key (:meth:`~curation.store.citations.Citations.cited_by_query`).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from curation.store.errors import Actor, require_admin_actor
from curation.store.import_log import pid_alive, this_host
from curation.store.ranker_versions import RankerVersions
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import CurationError, InputFormatError
from kb_sources.json_text import parse_json

logger = logging.getLogger(__name__)

_ACTIVE_KEY = "ranker.active.{schema}"
#: ``expected`` of :meth:`Rankers.set_active` that accepts whatever is active now.
ANY_ACTIVE = "<any>"
#: A round on another machine counts as running until its heartbeat is this old (seconds).
ROUND_STALE_S = 3600.0
#: Tokens of the rounds this process holds now (a row of this process not here is stale).
_HELD: set[str] = set()


# -- each schema's default ranking (curation.evaluation.best) --------------------------------------
_DEFAULT_KEY = "ranking.default.{schema}"
#: Below this many scored queries a choice is said to be untrustworthy (the evaluation's
#: ``MIN_SCORED_QUERIES``, which a test keeps equal; here for records stored without warnings).
FEW_QUERIES = 20


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
        warnings: Why the choice may not be trusted (too few queries), said wherever the
            default is named.
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
    warnings: tuple[str, ...] = ()

    def caution(self) -> str:
        """One short line when the choice rests on too few queries (empty otherwise)."""
        if 0 < self.queries < FEW_QUERIES:
            return (f"measured on only {self.queries} {self.split} queries (< {FEW_QUERIES}): "
                    "too few to choose between rankings")
        return self.warnings[0] if self.warnings else ""

    def to_json(self) -> dict[str, Any]:
        """The stored form (versions and warnings left out when there are none, as before)."""
        out = {**asdict(self), "notes": list(self.notes), "warnings": list(self.warnings)}
        return {k: v for k, v in out.items()
                if not (k in ("dense_version", "ranker_version") and v is None)
                and not (k == "warnings" and not v)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankingChoice | None:
        """The stored form read back (unknown keys ignored); None without a ``best``."""
        if not data.get("best"):
            return None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "best": str(data["best"]), "notes": tuple(known.get("notes", ())),
                      "warnings": tuple(str(w) for w in known.get("warnings", ())),
                      "scores": {str(k): float(v) for k, v in known.get("scores", {}).items()}})


# -- one round per schema ----------------------------------------------------------------------
class RoundRunning(CurationError):
    """Another ranker round of the schema is running now."""


@dataclass(frozen=True)
class RankerRoundLock:
    """The row of a running ranker round (``started_from``: the version active at its start)."""

    schema: str
    token: str
    started_at: str
    started_by: str
    started_from: str | None
    pid: int | None
    host: str
    beat: str | None

    def alive(self, now: datetime | None = None) -> bool:
        """Whether the round may still run: on this machine its process decides; on another,
        a heartbeat within :data:`ROUND_STALE_S`."""
        if self.pid == os.getpid() and self.host == this_host():
            return self.token in _HELD
        if not self.host or self.host == this_host():
            return bool(self.pid) and pid_alive(int(self.pid))
        try:
            then = datetime.fromisoformat(str(self.beat or self.started_at))
        except ValueError:
            return True
        then = then if then.tzinfo else then.replace(tzinfo=UTC)
        return ((now or datetime.now(UTC)) - then).total_seconds() < ROUND_STALE_S

    def describe(self) -> str:
        where = f" on {self.host}" if self.host and self.host != this_host() else ""
        return (f"started {self.started_at} by {self.started_by}, process {self.pid}{where}, "
                f"from {self.started_from or 'no active version'}")



class Rankers:
    """The learned ranker's settings in ``meta``: active version, defaults, rounds."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def active(self, schema: str) -> str | None:
        """The id of the schema's active ranker version, or None."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (_ACTIVE_KEY.format(schema=schema),)).fetchone()
        return row[0] if row and row[0] else None

    def set_active(self, schema: str, ident: str | None, *, user: Actor, reason: str = "",
                   expected: str | None = ANY_ACTIVE) -> bool:
        """Make ``ident`` the schema's active ranker (None: none), audited as ``user``.

        ``expected``: change only if the active version is still this one (a compare-and-swap:
        a round promotes its version only over the version it started from); returns False,
        changing nothing, when it is not.

        Raises:
            PermissionDenied: ``user`` is not an admin.
            CurationError: ``ident`` is no saved version of ``schema``.
        """
        actor = require_admin_actor(user, "Activating a ranker version")
        key = _ACTIVE_KEY.format(schema=schema)
        with self.ws.transaction():
            if ident is not None and not RankerVersions(self.ws).exists(ident, schema):
                known = ", ".join(r.ident for r in RankerVersions(self.ws).saved(schema))
                raise CurationError(f"No ranker version {ident} of {schema} is saved in this "
                                    f"workspace (saved: {known or 'none'}); pick a saved one or "
                                    f"train one (kbcurate rank train --schema {schema})")
            old = self.active(schema)
            if expected != ANY_ACTIVE and old != expected:
                return False
            if old == ident:
                return True
            if ident is None:
                self.ws.conn.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                self.ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                     (key, ident))
            self.ws.audit(actor, "activate" if ident else "deactivate", "ranker",
                          ident or old or "", before={key: old},
                          after={key: ident, "reason": reason})
        return True

    def default_ranking(self, schema: str) -> RankingChoice | None:
        """The stored measurement that chose the schema's default ranking, or None."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (_DEFAULT_KEY.format(schema=schema),)).fetchone()
        if not row or not row[0]:
            return None
        where = f"meta {_DEFAULT_KEY.format(schema=schema)} in the workspace database"
        try:
            value = parse_json(row[0], where, expected="a ranking measurement (a JSON object)",
                               fix="measure it again (kbcurate evaluate --retriever best)")
        except InputFormatError as exc:
            logger.warning("%s; ignoring it", exc)
            return None
        if not isinstance(value, dict):
            return None
        try:
            return RankingChoice.from_json(value)
        except (TypeError, ValueError):
            logger.warning("meta %s is not a ranking measurement; ignoring it",
                           _DEFAULT_KEY.format(schema=schema))
            return None

    def set_default_ranking(self, schema: str, choice: RankingChoice, *, user: Actor) -> None:
        """Store the measurement that chose the schema's default ranking (audited).

        Raises:
            PermissionDenied: ``user`` is not an admin.
            CurationError: No such schema, or the ranker version measured is no saved version
                of it.
        """
        actor = require_admin_actor(user, "Choosing a schema's default ranking")
        if schema not in self.ws.schemas():
            raise CurationError(f"No schema {schema!r} in this workspace (schemas: "
                                f"{', '.join(sorted(self.ws.schemas())) or 'none'})")
        measured = choice.ranker_version
        if measured is not None and not RankerVersions(self.ws).exists(measured, schema):
            raise CurationError(f"The measurement names ranker version {measured}, which is no "
                                f"saved version of {schema}; measure again")
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

    def set_retrain_every(self, every: int, *, user: Actor) -> None:
        """Change :meth:`retrain_every` (audited).

        Raises:
            PermissionDenied: ``user`` is not an admin.
            CurationError: Not a whole number >= 0.
        """
        actor = require_admin_actor(user, "Changing when the ranker retrains")
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

    # -- one round per schema --------------------------------------------------------------
    def begin_round(self, schema: str, *, started_by: str) -> RankerRoundLock:
        """Take the schema's round lock (a round whose process is gone is taken over).

        Raises:
            RoundRunning: A live round of ``schema`` holds it.
        """
        with self.ws.transaction():
            held = self._round_row(schema)
            if held is not None and held.alive():
                raise RoundRunning(f"A ranker round of {schema} is already running "
                                   f"({held.describe()}); one round per schema runs at a time. "
                                   "Wait for it to end: its version then shows in kbcurate "
                                   "rank list and on the Models page")
            if held is not None:
                logger.warning("taking over the ranker round lock of %s: %s is gone", schema,
                               held.describe())
                self.ws.conn.execute("DELETE FROM ranker_rounds WHERE schema = ?", (schema,))
            row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                                       (_ACTIVE_KEY.format(schema=schema),)).fetchone()
            now = utcnow()
            lock = RankerRoundLock(schema, uuid.uuid4().hex, now, started_by,
                                   row[0] if row and row[0] else None, os.getpid(), this_host(),
                                   now)
            self.ws.conn.execute(
                "INSERT INTO ranker_rounds(schema, token, started_at, started_by, started_from, "
                "pid, host, beat) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (schema, lock.token, now, started_by, lock.started_from, lock.pid, lock.host,
                 now))
        _HELD.add(lock.token)
        return lock

    def beat_round(self, lock: RankerRoundLock) -> None:
        """The round is alive (for processes on other machines)."""
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE ranker_rounds SET beat = ? WHERE schema = ? AND "
                                 "token = ?", (utcnow(), lock.schema, lock.token))

    def end_round(self, lock: RankerRoundLock) -> None:
        """Release the lock (only this round's: a taken-over row is left alone)."""
        _HELD.discard(lock.token)
        with self.ws.transaction():
            self.ws.conn.execute("DELETE FROM ranker_rounds WHERE schema = ? AND token = ?",
                                 (lock.schema, lock.token))

    def running_round(self, schema: str) -> RankerRoundLock | None:
        """The live round of ``schema``, or None."""
        held = self._round_row(schema)
        return held if held is not None and held.alive() else None

    def _round_row(self, schema: str) -> RankerRoundLock | None:
        row = self.ws.conn.execute("SELECT * FROM ranker_rounds WHERE schema = ?",
                                   (schema,)).fetchone()
        if row is None:
            return None
        return RankerRoundLock(row["schema"], row["token"], row["started_at"],
                               row["started_by"], row["started_from"], row["pid"],
                               row["host"] or "", row["beat"])
