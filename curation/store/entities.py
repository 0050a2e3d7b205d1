"""The entity dictionary: entities and their synonyms (the matcher's surface forms).

Sources, all in the ``synonyms`` table (``entity_key, synonym, source``):

* KB records: gene symbols and aliases, drug names, UniProt gene and protein names (written by
  the importer through :func:`curation.store.importer.add_entity`, source = the KB);
* PubTator corpora: every mention text of a normalised id
  (:meth:`Entities.harvest_annotation_synonyms`, source ``"pubtator"``);
* other term lists such as MeSH entry terms (:meth:`Entities.add_synonyms`, any source name);
* curators (:meth:`Entities.add_curator_synonym` / :meth:`Entities.remove_curator_synonym`,
  audited).

:class:`Entities`, built on a workspace (``Entities(ws)``), holds the SQL of the ``entities`` and
``synonyms`` tables: it writes the synonyms above and reads entities, their synonyms and surface
forms, and the dictionary keys of a text.

Entity keys are ``type:id`` (or ``type:lower-cased text`` without an id), as
:attr:`kb_sources.types.Entity.key`, so a BioRED gene annotation (``gene:673``) and a CIViC gene
with the same Entrez id share their synonyms.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Entity

logger = logging.getLogger(__name__)

CURATOR_SOURCE = "curator"
PUBTATOR_SOURCE = "pubtator"
_MAX_SYNONYM = 200
_KEYS_PER_QUERY = 500


def with_synonyms(entity: Entity, synonyms: Iterable[str]) -> Entity:
    """``entity`` with ``synonyms`` added to its own (sorted, without its text)."""
    forms = set(entity.synonyms).union(synonyms) - {entity.text}
    merged = tuple(sorted(forms))
    return entity if merged == entity.synonyms else replace(entity, synonyms=merged)


def _clean(synonym: str) -> str:
    text = " ".join(synonym.split())
    if not text:
        raise CurationError("The synonym is empty; type the surface form to add")
    if len(text) > _MAX_SYNONYM:
        raise CurationError(f"The synonym is {len(text)} characters long; "
                            f"synonyms have at most {_MAX_SYNONYM}")
    return text


#: Separates the synonyms that one query concatenates (a control character no text holds).
_SEP = "\x1f"


class Entities:
    """The entity dictionary: entities and their synonyms."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def synonyms(self, entity_key: str) -> tuple[str, ...]:
        """Every synonym stored for an entity key, sorted."""
        return self.synonyms_by_key([entity_key]).get(entity_key, ())

    def synonyms_by_key(self, entity_keys: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Entity key -> every synonym stored for it (sorted), for many keys at once.

        Keys without synonyms are absent. One query per 500 keys.
        """
        keys = sorted(set(entity_keys))
        found: dict[str, list[str]] = defaultdict(list)
        for i in range(0, len(keys), _KEYS_PER_QUERY):
            chunk = keys[i:i + _KEYS_PER_QUERY]
            rows = self.ws.conn.execute(
                "SELECT entity_key, synonym FROM synonyms WHERE entity_key IN "
                f"({','.join('?' * len(chunk))}) ORDER BY entity_key, synonym", chunk)
            for key, synonym in rows:
                found[key].append(synonym)
        return {key: tuple(forms) for key, forms in found.items()}

    def get(self, key: str) -> Entity:
        """The stored entity with all its synonyms (from every source).

        Raises:
            CurationError: No entity has this key.
        """
        row = self.ws.conn.execute("SELECT key, type, id, text FROM entities WHERE key = ?",
                                   (key,)).fetchone()
        if row is None:
            raise CurationError(
                f"No entity with key {key!r} in this workspace. Keys look like 'gene:673' or "
                "'drug:vemurafenib'; import a KB or a PubTator corpus first, or check the spelling")
        return with_synonyms(Entity(row["text"], row["type"], row["id"]), self.synonyms(key))

    def _require_entity(self, entity_key: str) -> None:
        if not self.exists(entity_key):
            raise CurationError(
                f"No entity with key {entity_key!r}: add synonyms to an entity that a KB record or "
                "corpus introduced (see the entity list), or check the key")

    def add_curator_synonym(self, entity_key: str, synonym: str, actor: str) -> bool:
        """Add a curator's synonym to an entity (audited); False when it was already there.

        Raises:
            CurationError: Unknown entity key, or an empty or over-long synonym.
        """
        text = _clean(synonym)
        with self.ws.transaction():
            self._require_entity(entity_key)
            cursor = self.ws.conn.execute(
                "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
                (entity_key, text, CURATOR_SOURCE))
            added = cursor.rowcount > 0
            if added:
                self.ws.audit(actor, "add", "synonym", entity_key, after={"synonym": text})
        return added

    def remove_curator_synonym(self, entity_key: str, synonym: str, actor: str) -> bool:
        """Remove a synonym a curator added (audited); False when there was none.

        Synonyms from KB records and corpora are not removed: they return at the next import.
        """
        text = _clean(synonym)
        with self.ws.transaction():
            cursor = self.ws.conn.execute(
                "DELETE FROM synonyms WHERE entity_key = ? AND synonym = ? AND source = ?",
                (entity_key, text, CURATOR_SOURCE))
            removed = cursor.rowcount > 0
            if removed:
                self.ws.audit(actor, "remove", "synonym", entity_key, before={"synonym": text})
        return removed

    def add_synonyms(self, entity: Entity, synonyms: Iterable[str], source: str) -> int:
        """Store an entity (if new) and synonyms from a term list (MeSH entry terms, ...).

        Returns:
            Synonyms added.
        """
        forms = {" ".join(s.split()) for s in (entity.text, *synonyms)} - {""}
        with self.ws.transaction():
            self.ws.conn.execute(
                "INSERT OR IGNORE INTO entities(key, type, id, text) VALUES (?, ?, ?, ?)",
                (entity.key, entity.type, entity.id, entity.text))
            before = self.ws.conn.total_changes
            self.ws.conn.executemany(
                "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
                [(entity.key, form, source) for form in sorted(forms)])
            return self.ws.conn.total_changes - before

    def harvest_annotation_synonyms(self, *, actor: str = "harvest",
                                    types: Iterable[str] | None = None) -> int:
        """Turn stored PubTator annotations into synonyms per normalised id.

        Every mention text of an id becomes a synonym of ``type:id``; a new entity takes the most
        frequent mention as its text. Annotations without ids are skipped. Idempotent.

        Args:
            actor: Recorded in the audit log.
            types: Entity types to harvest (default: all).

        Returns:
            Synonyms added.
        """
        wanted = set(types) if types is not None else None
        texts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for row in self.ws.conn.execute("SELECT text, type, ids FROM annotations"):
            if wanted is not None and row["type"] not in wanted:
                continue
            for ident in json.loads(row["ids"] or "[]"):
                if ident and ident != "-":
                    texts[(row["type"], ident)][" ".join(row["text"].split())] += 1
        added = 0
        with self.ws.transaction():
            for (etype, ident), counter in texts.items():
                entity = Entity(counter.most_common(1)[0][0], etype, ident)
                self.ws.conn.execute(
                    "INSERT OR IGNORE INTO entities(key, type, id, text) VALUES (?, ?, ?, ?)",
                    (entity.key, etype, ident, entity.text))
                before = self.ws.conn.total_changes
                self.ws.conn.executemany(
                    "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
                    [(entity.key, t, PUBTATOR_SOURCE) for t in sorted(counter) if t])
                added += self.ws.conn.total_changes - before
            self.ws.audit(actor, "harvest", "synonyms", "annotations",
                          after={"ids": len(texts), "synonyms_added": added})
        logger.info("harvested synonyms of %d ids (%d added)", len(texts), added)
        return added

    def key_for_text(self, etype: str, text: str,
                            slot: tuple[str, str]) -> str | None:
        """The key of the entity of type ``etype`` whose text or a synonym is ``text``
        (case-insensitive): one that fills ``slot`` (schema, slot name) in a KB relation first, then
        an exact text match, then the smallest key. None when there is none."""
        row = self.ws.conn.execute(
            "SELECT e.key FROM entities e LEFT JOIN synonyms s ON s.entity_key = e.key "
            "WHERE e.type = ? AND (lower(e.text) = lower(?) OR lower(s.synonym) = lower(?)) "
            "ORDER BY EXISTS (SELECT 1 FROM relation_slots rs JOIN relations r ON r.id = "
            "rs.relation_id WHERE rs.entity_key = e.key AND r.schema = ? AND rs.slot = ?) DESC, "
            "lower(e.text) = lower(?) DESC, e.key LIMIT 1",
            (etype, text, text, *slot, text)).fetchone()
        return row[0] if row is not None else None

    def of_type(self, etype: str, slot: tuple[str, str]) -> list[tuple[str, str]]:
        """``(key, text)`` of every entity of type ``etype``: the ones that fill ``slot`` (schema,
        slot name) in a KB relation first, then by key."""
        rows = self.ws.conn.execute(
            "SELECT e.key, e.text, EXISTS (SELECT 1 FROM relation_slots rs JOIN relations r ON "
            "r.id = rs.relation_id WHERE rs.entity_key = e.key AND r.schema = ? AND rs.slot = ?) "
            "AS fills FROM entities e WHERE e.type = ? ORDER BY fills DESC, e.key",
            (*slot, etype)).fetchall()
        return [(r["key"], r["text"]) for r in rows]

    def answer_slot_entities(self, schema: str, answer: str) -> list[Entity]:
        """Every entity that fills slot ``answer`` of some KB relation of ``schema``, with its
        synonyms (sorted, its own text left out), by key."""
        rows = self.ws.conn.execute(
            "SELECT e.key, e.type, e.id, e.text, group_concat(s.synonym, char(31)) AS syn "
            "FROM entities e LEFT JOIN synonyms s ON s.entity_key = e.key WHERE e.key IN ("
            "SELECT DISTINCT rs.entity_key FROM relation_slots rs JOIN relations r "
            "ON r.id = rs.relation_id WHERE r.schema = ? AND rs.slot = ?) GROUP BY e.key "
            "ORDER BY e.key", (schema, answer))
        out = []
        for row in rows:
            forms = {s for s in (row["syn"] or "").split(_SEP) if s}
            synonyms = tuple(sorted(forms - {row["text"]}))
            out.append(Entity(row["text"], row["type"], row["id"], synonyms))
        return out

    def dictionary_keys(self, etype: str, forms: Sequence[str],
                        ids: Sequence[str]) -> dict[str, str]:
        """Lower-case surface form, and ``#id``, -> key of the entity of type ``etype`` that the
        entity dictionary (entities with their synonyms) holds under that text (``forms``, lower
        case) or id (``ids``); the smallest key when several match. Empty without ``forms``."""
        if not forms:
            return {}
        fmarks, imarks = ",".join("?" * len(forms)), ",".join("?" * len(ids))
        rows = self.ws.conn.execute(
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

    def exists(self, key: str) -> bool:
        """Whether the workspace holds an entity with this key."""
        row = self.ws.conn.execute("SELECT 1 FROM entities WHERE key = ?", (key,)).fetchone()
        return row is not None

    def names(self, keys: Sequence[str]) -> dict[str, str]:
        """Entity key -> its text, for the keys the workspace knows (one query)."""
        rows = self.ws.conn.execute(
            f"SELECT key, text FROM entities WHERE key IN ({','.join('?' * len(keys))})", keys)
        return {row["key"]: row["text"] for row in rows}

    def forms(self, types: Sequence[str]) -> dict[str, list[str]]:
        """Entity key -> its surface forms (text first, then synonyms) for entities of ``types``."""
        if not types:
            return {}
        marks = ",".join("?" * len(types))
        out: dict[str, list[str]] = defaultdict(list)
        for key, text in self.ws.conn.execute(
                f"SELECT key, text FROM entities WHERE type IN ({marks}) ORDER BY key",
                tuple(types)):
            out[key].append(text)
        for key, synonym in self.ws.conn.execute(
                f"SELECT s.entity_key, s.synonym FROM synonyms s JOIN entities e "
                f"ON e.key = s.entity_key WHERE e.type IN ({marks}) "
                f"ORDER BY s.entity_key, s.synonym", tuple(types)):
            if synonym not in out[key]:
                out[key].append(synonym)
        return dict(out)
