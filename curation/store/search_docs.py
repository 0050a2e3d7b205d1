"""What the Curate page's search (``curation/search``) reads from the workspace database.

* documents: the corpus fingerprint of an index build (:func:`corpus_hashes`),
  the card fields of ranked abstracts (:func:`documents_by_id`), cheap change markers;
* the entity dictionary: a typed entity by text or synonym (:func:`entity_key_for_text`), the
  entities that fill a schema's answer slot in KB records (:func:`answer_slot_entities`), the
  dictionary keys of annotated forms and ids (:func:`dictionary_keys`);
* PubTator annotations of ranked documents (:func:`annotation_rows`);
* the relations a schema has: schemas, sources, evidence levels, counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from curation.store.workspace import Workspace
from kb_sources.types import Entity

_CHUNK = 500
_SEP = "\x1f"

#: One stored annotation: (doc_id, text with spaces collapsed, type, ids).
AnnotationRow = tuple[str, str, str, tuple[str, ...]]


@dataclass(frozen=True)
class DocumentRow:
    """A document's fields that a ranked card shows (as stored)."""

    doc_id: str
    title: str
    abstract: str
    year: int | None
    journal: str


# -- documents ------------------------------------------------------------------------------------
def corpus_hashes(ws: Workspace) -> list[tuple[str, str]]:
    """Every document as ``(doc_id, content_hash)``, in doc_id order."""
    return [(r[0], r[1]) for r in ws.conn.execute(
        "SELECT doc_id, content_hash FROM documents ORDER BY doc_id")]


def documents_by_id(ws: Workspace, doc_ids: Sequence[str]) -> dict[str, DocumentRow]:
    """doc_id -> its :class:`DocumentRow`, for the ids that exist (one query per 500 ids)."""
    out: dict[str, DocumentRow] = {}
    ids = list(dict.fromkeys(doc_ids))
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i:i + _CHUNK]
        rows = ws.conn.execute(
            "SELECT doc_id, title, abstract, year, journal FROM documents WHERE doc_id IN "
            f"({','.join('?' * len(chunk))})", chunk)
        out.update({r["doc_id"]: DocumentRow(r["doc_id"], r["title"], r["abstract"], r["year"],
                                             r["journal"]) for r in rows})
    return out


def documents_marker(ws: Workspace) -> tuple[int, str | None]:
    """(number of documents, latest ``updated_at``; None when there are none)."""
    n, last = ws.conn.execute("SELECT COUNT(*), MAX(updated_at) FROM documents").fetchone()
    return n, last


def corpus_counts(ws: Workspace) -> tuple[int, int]:
    """(documents, KB relations)."""
    docs, rels = ws.conn.execute(
        "SELECT (SELECT COUNT(*) FROM documents), (SELECT COUNT(*) FROM relations)").fetchone()
    return int(docs), int(rels)


# -- relations ------------------------------------------------------------------------------------
def schemas_by_relations(ws: Workspace) -> list[str]:
    """Names of the schemas that have KB relations, most relations first (then by name)."""
    rows = ws.conn.execute("SELECT schema, COUNT(*) FROM relations GROUP BY 1 ORDER BY 2 DESC, 1")
    return [r[0] for r in rows]


def relation_sources(ws: Workspace, schema: str) -> list[str]:
    """The distinct sources (KBs) of ``schema``'s relations, sorted."""
    return [r[0] for r in ws.conn.execute(
        "SELECT DISTINCT source FROM relations WHERE schema = ? ORDER BY source", (schema,))]


def relation_evidence_levels(ws: Workspace, schema: str) -> list[str]:
    """Distinct non-empty ``attributes.evidence_level`` values of ``schema``'s relations, as
    sorted text."""
    rows = ws.conn.execute(
        "SELECT DISTINCT json_extract(data, '$.attributes.evidence_level') FROM relations "
        "WHERE schema = ?", (schema,))
    return sorted(str(r[0]) for r in rows if r[0])


# -- entities and annotations ---------------------------------------------------------------------
def entity_key_for_text(ws: Workspace, etype: str, text: str,
                        slot: tuple[str, str]) -> str | None:
    """The key of the entity of type ``etype`` whose text or a synonym is ``text``
    (case-insensitive): one that fills ``slot`` (schema, slot name) in a KB relation first, then
    an exact text match, then the smallest key. None when there is none."""
    row = ws.conn.execute(
        "SELECT e.key FROM entities e LEFT JOIN synonyms s ON s.entity_key = e.key "
        "WHERE e.type = ? AND (lower(e.text) = lower(?) OR lower(s.synonym) = lower(?)) "
        "ORDER BY EXISTS (SELECT 1 FROM relation_slots rs JOIN relations r ON r.id = "
        "rs.relation_id WHERE rs.entity_key = e.key AND r.schema = ? AND rs.slot = ?) DESC, "
        "lower(e.text) = lower(?) DESC, e.key LIMIT 1",
        (etype, text, text, *slot, text)).fetchone()
    return row[0] if row is not None else None


def entities_of_type(ws: Workspace, etype: str, slot: tuple[str, str]) -> list[tuple[str, str]]:
    """``(key, text)`` of every entity of type ``etype``: the ones that fill ``slot`` (schema,
    slot name) in a KB relation first, then by key."""
    rows = ws.conn.execute(
        "SELECT e.key, e.text, EXISTS (SELECT 1 FROM relation_slots rs JOIN relations r ON "
        "r.id = rs.relation_id WHERE rs.entity_key = e.key AND r.schema = ? AND rs.slot = ?) "
        "AS fills FROM entities e WHERE e.type = ? ORDER BY fills DESC, e.key",
        (*slot, etype)).fetchall()
    return [(r["key"], r["text"]) for r in rows]


def answer_slot_entities(ws: Workspace, schema: str, answer: str) -> list[Entity]:
    """Every entity that fills slot ``answer`` of some KB relation of ``schema``, with its
    synonyms (sorted, its own text left out), by key."""
    rows = ws.conn.execute(
        "SELECT e.key, e.type, e.id, e.text, group_concat(s.synonym, char(31)) AS syn "
        "FROM entities e LEFT JOIN synonyms s ON s.entity_key = e.key WHERE e.key IN ("
        "SELECT DISTINCT rs.entity_key FROM relation_slots rs JOIN relations r "
        "ON r.id = rs.relation_id WHERE r.schema = ? AND rs.slot = ?) GROUP BY e.key "
        "ORDER BY e.key", (schema, answer))
    out = []
    for row in rows:
        synonyms = tuple(sorted({s for s in (row["syn"] or "").split(_SEP) if s} - {row["text"]}))
        out.append(Entity(row["text"], row["type"], row["id"], synonyms))
    return out


def annotation_rows(ws: Workspace, doc_ids: Sequence[str],
                    types: Sequence[str]) -> list[AnnotationRow]:
    """The documents' annotations of ``types`` as :data:`AnnotationRow`, ids without the "-"
    placeholder."""
    if not doc_ids or not types:
        return []
    rows = ws.conn.execute(
        f"SELECT doc_id, text, type, ids FROM annotations WHERE doc_id IN "
        f"({','.join('?' * len(doc_ids))}) AND type IN ({','.join('?' * len(types))})",
        (*doc_ids, *types))
    return [(r["doc_id"], " ".join(r["text"].split()), r["type"],
             tuple(i for i in json.loads(r["ids"] or "[]") if i and i != "-")) for r in rows]


def dictionary_keys(ws: Workspace, etype: str, forms: Sequence[str],
                    ids: Sequence[str]) -> dict[str, str]:
    """Lower-case surface form, and ``#id``, -> key of the entity of type ``etype`` that the
    entity dictionary (entities with their synonyms) holds under that text (``forms``, lower
    case) or id (``ids``); the smallest key when several match. Empty without ``forms``."""
    if not forms:
        return {}
    fmarks, imarks = ",".join("?" * len(forms)), ",".join("?" * len(ids))
    rows = ws.conn.execute(
        f"SELECT e.key, lower(e.text) FROM entities e WHERE e.type = ? AND lower(e.text) IN "
        f"({fmarks}) UNION SELECT e.key, lower(s.synonym) FROM entities e JOIN synonyms s ON "
        f"s.entity_key = e.key WHERE e.type = ? AND lower(s.synonym) IN ({fmarks}) "
        f"UNION SELECT e.key, '#' || e.id FROM entities e WHERE e.type = ? AND e.id != '' "
        f"AND e.id IN ({imarks}) ORDER BY 1",
        (etype, *forms, etype, *forms, etype, *ids))
    out: dict[str, str] = {}
    for key, form in rows:
        out.setdefault(form, key)
    return out
