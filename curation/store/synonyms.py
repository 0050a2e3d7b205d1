"""The workspace's synonym store: where the matcher's surface forms come from.

Sources, all in the ``synonyms`` table (``entity_key, synonym, source``):

* KB records: gene symbols and aliases, drug names, UniProt gene and protein names (written by
  the importer through :func:`curation.store.importer.add_entity`, source = the KB);
* PubTator corpora: every mention text of a normalised id (:func:`harvest_annotation_synonyms`,
  source ``"pubtator"``);
* other term lists such as MeSH entry terms (:func:`add_synonyms`, any source name);
* curators (:func:`add_curator_synonym` / :func:`remove_curator_synonym`, audited).

Entity keys are ``type:id`` (or ``type:lower-cased text`` without an id), as
:attr:`kb_sources.types.Entity.key`, so a BioRED gene annotation (``gene:673``) and a CIViC gene
with the same Entrez id share their synonyms.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import replace

from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Entity

logger = logging.getLogger(__name__)

CURATOR_SOURCE = "curator"
PUBTATOR_SOURCE = "pubtator"
_MAX_SYNONYM = 200
_KEYS_PER_QUERY = 500


def synonyms_for(ws: Workspace, entity_key: str) -> tuple[str, ...]:
    """Every synonym stored for an entity key, sorted."""
    return synonyms_by_key(ws, [entity_key]).get(entity_key, ())


def synonyms_by_key(ws: Workspace, entity_keys: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Entity key -> every synonym stored for it (sorted), for many keys at once.

    Keys without synonyms are absent. One query per 500 keys.
    """
    keys = sorted(set(entity_keys))
    found: dict[str, list[str]] = defaultdict(list)
    for i in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[i:i + _KEYS_PER_QUERY]
        rows = ws.conn.execute(
            "SELECT entity_key, synonym FROM synonyms WHERE entity_key IN "
            f"({','.join('?' * len(chunk))}) ORDER BY entity_key, synonym", chunk)
        for key, synonym in rows:
            found[key].append(synonym)
    return {key: tuple(forms) for key, forms in found.items()}


def with_synonyms(entity: Entity, synonyms: Iterable[str]) -> Entity:
    """``entity`` with ``synonyms`` added to its own (sorted, without its text)."""
    forms = set(entity.synonyms).union(synonyms) - {entity.text}
    merged = tuple(sorted(forms))
    return entity if merged == entity.synonyms else replace(entity, synonyms=merged)


def entity_from_store(ws: Workspace, key: str) -> Entity:
    """The stored entity with all its synonyms (from every source).

    Raises:
        CurationError: No entity has this key.
    """
    row = ws.conn.execute("SELECT key, type, id, text FROM entities WHERE key = ?",
                          (key,)).fetchone()
    if row is None:
        raise CurationError(
            f"No entity with key {key!r} in this workspace. Keys look like 'gene:673' or "
            "'drug:vemurafenib'; import a KB or a PubTator corpus first, or check the spelling")
    return with_synonyms(Entity(row["text"], row["type"], row["id"]), synonyms_for(ws, key))


def _clean(synonym: str) -> str:
    text = " ".join(synonym.split())
    if not text:
        raise CurationError("The synonym is empty; type the surface form to add")
    if len(text) > _MAX_SYNONYM:
        raise CurationError(f"The synonym is {len(text)} characters long; "
                            f"synonyms have at most {_MAX_SYNONYM}")
    return text


def _require_entity(ws: Workspace, entity_key: str) -> None:
    if ws.conn.execute("SELECT 1 FROM entities WHERE key = ?", (entity_key,)).fetchone() is None:
        raise CurationError(
            f"No entity with key {entity_key!r}: add synonyms to an entity that a KB record or "
            "corpus introduced (see the entity list), or check the key")


def add_curator_synonym(ws: Workspace, entity_key: str, synonym: str, actor: str) -> bool:
    """Add a curator's synonym to an entity (audited); False when it was already there.

    Raises:
        CurationError: Unknown entity key, or an empty or over-long synonym.
    """
    text = _clean(synonym)
    with ws.transaction():
        _require_entity(ws, entity_key)
        cursor = ws.conn.execute(
            "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
            (entity_key, text, CURATOR_SOURCE))
        added = cursor.rowcount > 0
        if added:
            ws.audit(actor, "add", "synonym", entity_key, after={"synonym": text})
    return added


def remove_curator_synonym(ws: Workspace, entity_key: str, synonym: str, actor: str) -> bool:
    """Remove a synonym a curator added (audited); False when there was none.

    Synonyms from KB records and corpora are not removed: they return at the next import.
    """
    text = _clean(synonym)
    with ws.transaction():
        cursor = ws.conn.execute(
            "DELETE FROM synonyms WHERE entity_key = ? AND synonym = ? AND source = ?",
            (entity_key, text, CURATOR_SOURCE))
        removed = cursor.rowcount > 0
        if removed:
            ws.audit(actor, "remove", "synonym", entity_key, before={"synonym": text})
    return removed


def add_synonyms(ws: Workspace, entity: Entity, synonyms: Iterable[str], source: str) -> int:
    """Store an entity (if new) and synonyms from a term list (MeSH entry terms, ...).

    Returns:
        Synonyms added.
    """
    forms = {" ".join(s.split()) for s in (entity.text, *synonyms)} - {""}
    with ws.transaction():
        ws.conn.execute("INSERT OR IGNORE INTO entities(key, type, id, text) VALUES (?, ?, ?, ?)",
                        (entity.key, entity.type, entity.id, entity.text))
        before = ws.conn.total_changes
        ws.conn.executemany(
            "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
            [(entity.key, form, source) for form in sorted(forms)])
        return ws.conn.total_changes - before


def harvest_annotation_synonyms(ws: Workspace, *, actor: str = "harvest",
                                types: Iterable[str] | None = None) -> int:
    """Turn stored PubTator annotations into synonyms per normalised id.

    Every mention text of an id becomes a synonym of ``type:id``; a new entity takes the most
    frequent mention as its text. Annotations without ids are skipped. Idempotent.

    Args:
        ws: The workspace.
        actor: Recorded in the audit log.
        types: Entity types to harvest (default: all).

    Returns:
        Synonyms added.
    """
    wanted = set(types) if types is not None else None
    texts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for row in ws.conn.execute("SELECT text, type, ids FROM annotations"):
        if wanted is not None and row["type"] not in wanted:
            continue
        for ident in json.loads(row["ids"] or "[]"):
            if ident and ident != "-":
                texts[(row["type"], ident)][" ".join(row["text"].split())] += 1
    added = 0
    with ws.transaction():
        for (etype, ident), counter in texts.items():
            entity = Entity(counter.most_common(1)[0][0], etype, ident)
            ws.conn.execute(
                "INSERT OR IGNORE INTO entities(key, type, id, text) VALUES (?, ?, ?, ?)",
                (entity.key, etype, ident, entity.text))
            before = ws.conn.total_changes
            ws.conn.executemany(
                "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
                [(entity.key, t, PUBTATOR_SOURCE) for t in sorted(counter) if t])
            added += ws.conn.total_changes - before
        ws.audit(actor, "harvest", "synonyms", "annotations",
                 after={"ids": len(texts), "synonyms_added": added})
    logger.info("harvested synonyms of %d ids (%d added)", len(texts), added)
    return added
