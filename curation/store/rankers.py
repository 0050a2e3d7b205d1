"""What the learned ranker (``curation/ranking``) reads from and keeps in the workspace database.

* the entity dictionary by type (every surface form: entity texts and their synonyms), which the
  ranker tags abstracts with to count answer-type entities;
* documents as ``(title, abstract)``, for title / abstract features;
* the KB citations of a schema's relations by query key (the "cited by the KB for another
  relation of the same query entity" feature);
* which ranker version is active per schema, a workspace setting in ``meta`` (audited);
* each schema's default ranking (the measurement that chose it, ``meta``, audited);
* learn as you label: how many new labels start a ranker round (``ranker.retrain_every``,
  default 20) and which labels the last round took.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from curation.store.documents import document_parts  # noqa: F401 (re-exported)
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

_ACTIVE_KEY = "ranker.active.{schema}"
_CHUNK = 500


def entity_forms(ws: Workspace, types: Sequence[str]) -> dict[str, list[str]]:
    """Entity key -> its surface forms (text first, then synonyms) for entities of ``types``."""
    if not types:
        return {}
    marks = ",".join("?" * len(types))
    out: dict[str, list[str]] = defaultdict(list)
    for key, text in ws.conn.execute(
            f"SELECT key, text FROM entities WHERE type IN ({marks}) ORDER BY key", tuple(types)):
        out[key].append(text)
    for key, synonym in ws.conn.execute(
            f"SELECT s.entity_key, s.synonym FROM synonyms s JOIN entities e "
            f"ON e.key = s.entity_key WHERE e.type IN ({marks}) "
            f"ORDER BY s.entity_key, s.synonym", tuple(types)):
        if synonym not in out[key]:
            out[key].append(synonym)
    return dict(out)


def cited_by_query(ws: Workspace, schema: str) -> dict[str, set[str]]:
    """query_key -> PMIDs that the schema's KB relations with that query key cite."""
    out: dict[str, set[str]] = defaultdict(set)
    for key, pmid in ws.conn.execute(
            "SELECT r.query_key, p.pmid FROM relations r JOIN relation_pmids p "
            "ON p.relation_id = r.id WHERE r.schema = ?", (schema,)):
        out[key].add(pmid)
    return dict(out)


def active_ranker(ws: Workspace, schema: str) -> str | None:
    """The id of the schema's active ranker version, or None."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                          (_ACTIVE_KEY.format(schema=schema),)).fetchone()
    return row[0] if row and row[0] else None


def set_active_ranker(ws: Workspace, schema: str, ident: str | None, *, actor: str,
                      reason: str = "") -> None:
    """Make ``ident`` the schema's active ranker (None: none), audited as ``actor``."""
    key = _ACTIVE_KEY.format(schema=schema)
    with ws.transaction():
        old = active_ranker(ws, schema)
        if old == ident:
            return
        if ident is None:
            ws.conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                            "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, ident))
        ws.audit(actor, "activate" if ident else "deactivate", "ranker", ident or old or "",
                 before={key: old}, after={key: ident, "reason": reason})


# -- each schema's default ranking (curation.evaluation.best) --------------------------------------
_DEFAULT_KEY = "ranking.default.{schema}"


def default_ranking(ws: Workspace, schema: str) -> dict[str, Any] | None:
    """The stored measurement that chose the schema's default ranking, or None."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                          (_DEFAULT_KEY.format(schema=schema),)).fetchone()
    if not row or not row[0]:
        return None
    try:
        value = json.loads(row[0])
    except ValueError:
        logger.warning("meta %s is not JSON; ignoring it", _DEFAULT_KEY.format(schema=schema))
        return None
    return value if isinstance(value, dict) else None


def set_default_ranking(ws: Workspace, schema: str, record: dict[str, Any], *,
                        actor: str) -> None:
    """Store the measurement that chose the schema's default ranking (audited)."""
    key = _DEFAULT_KEY.format(schema=schema)
    with ws.transaction():
        old = default_ranking(ws, schema)
        ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (key, json.dumps(record, sort_keys=True)))
        ws.audit(actor, "choose", "default ranking", schema,
                 before={"best": (old or {}).get("best")}, after=record)


# -- learn as you label ---------------------------------------------------------------------------
_EVERY_KEY = "ranker.retrain_every"
_THROUGH_KEY = "ranker.labels_through.{schema}"
#: New labels on a schema that start a ranker round, unless the workspace says otherwise.
DEFAULT_RETRAIN_EVERY = 20


def retrain_every(ws: Workspace) -> int:
    """New labels per schema that start a ranker round (0: never automatically)."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?", (_EVERY_KEY,)).fetchone()
    try:
        return max(int(row[0]), 0) if row and row[0] not in (None, "") else DEFAULT_RETRAIN_EVERY
    except ValueError:
        logger.warning("meta %s=%r is not a number; using %d", _EVERY_KEY, row[0],
                       DEFAULT_RETRAIN_EVERY)
        return DEFAULT_RETRAIN_EVERY


def set_retrain_every(ws: Workspace, every: int, *, actor: str) -> None:
    """Change :func:`retrain_every` (audited)."""
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise CurationError(f"The ranker retrains after N new labels; N must be a whole number "
                            f">= 0 (0: never automatically), got {every!r}")
    with ws.transaction():
        old = retrain_every(ws)
        ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (_EVERY_KEY, str(every)))
        ws.audit(actor, "set", "setting", _EVERY_KEY, before={"value": old},
                 after={"value": every})


def labels_waiting(ws: Workspace, schema: str) -> int:
    """Label rows of ``schema`` given since the last ranker round took its labels."""
    through = _through(ws, schema)
    return int(ws.conn.execute("SELECT COUNT(*) FROM labels WHERE schema = ? AND id > ?",
                               (schema, through)).fetchone()[0])


def claim_labels(ws: Workspace, schema: str, at_least: int) -> int | None:
    """When ``at_least`` label rows of ``schema`` arrived since the last claim, mark them taken
    by a ranker round and return how many; else None. One transaction, so two processes
    labelling at once never both start a round for the same labels."""
    if at_least <= 0:
        return None
    with ws.transaction():
        through = _through(ws, schema)
        count, last = ws.conn.execute(
            "SELECT COUNT(*), MAX(id) FROM labels WHERE schema = ? AND id > ?",
            (schema, through)).fetchone()
        if int(count) < at_least:
            return None
        ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (_THROUGH_KEY.format(schema=schema), str(int(last))))
    return int(count)


def _through(ws: Workspace, schema: str) -> int:
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?",
                          (_THROUGH_KEY.format(schema=schema),)).fetchone()
    return int(row[0]) if row and str(row[0]).isdigit() else 0
