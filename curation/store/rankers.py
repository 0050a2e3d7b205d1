"""What the learned ranker (``curation/ranking``) reads from and keeps in the workspace database.

* the entity dictionary by type (every surface form: entity texts and their synonyms), which the
  ranker tags abstracts with to count answer-type entities;
* documents as ``(title, abstract)``, for title / abstract features;
* the KB citations of a schema's relations by query key (the "cited by the KB for another
  relation of the same query entity" feature);
* which ranker version is active per schema, a workspace setting in ``meta`` (audited).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from curation.store.workspace import Workspace

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


def document_parts(ws: Workspace, doc_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
    """doc_id -> (title, abstract) for the ids that exist."""
    ids = list(dict.fromkeys(doc_ids))
    out: dict[str, tuple[str, str]] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i:i + _CHUNK]
        for doc_id, title, abstract in ws.conn.execute(
                f"SELECT doc_id, title, abstract FROM documents WHERE doc_id IN "
                f"({','.join('?' * len(chunk))})", tuple(chunk)):
            out[doc_id] = (title or "", abstract or "")
    return out


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
