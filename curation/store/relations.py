"""Partial relations: KB records grouped by their query slots, the answer hidden.

A curator picks a partial relation ("BRAF + V600E -> ?") and looks for abstracts that complete it.
All records of a schema that share the query-slot entities form one partial relation; their
answer-slot fillers are the answers the KB already knows, and their PMIDs the evidence it cites.

:class:`Relations`, built on a workspace (``Relations(ws)``), holds the SQL of the relations
tables: the partial relations, the schemas, sources and evidence levels, the rows a trainer or an
evaluation reads, and the stamp that tells when the KB changed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from curation.store.entities import Entities, with_synonyms
from curation.store.workspace import Workspace
from curation.templates import Query, render_query
from kb_sources.errors import CurationError
from kb_sources.schema import Schema, get_schema
from kb_sources.types import Entity, Relation


@dataclass(frozen=True)
class PartialRelation:
    """Query-slot entities of a schema with the answers and PMIDs the KB already has.

    Attributes:
        schema: Schema name.
        query_key: Stable identity (see :func:`curation.store.importer.query_key`).
        query: Query slot -> entities.
        answers: Known answer fillers (one tuple per KB record with an answer; may be empty).
        pmids: PMIDs cited by any record of the group.
        sources: KBs the records come from.
        n_records: Number of KB records in the group.
        attributes: Attribute name -> sorted distinct values across the records.
    """

    schema: str
    query_key: str
    query: dict[str, tuple[Entity, ...]]
    answers: tuple[tuple[Entity, ...], ...]
    pmids: tuple[str, ...]
    sources: tuple[str, ...]
    n_records: int
    attributes: dict[str, tuple[str, ...]]

    def answer_texts(self) -> list[str]:
        """Distinct answers as display text ("Dabrafenib + Trametinib"), in first-seen order."""
        seen: dict[str, None] = {}
        for ents in self.answers:
            seen.setdefault(" + ".join(e.text for e in ents), None)
        return list(seen)

    def render(self, schema: Schema, template: str | int | None = None) -> Query:
        """The templated query text for this partial relation."""
        return render_query(schema, self.query, template)


def _select_relations(
    schema: Schema, filters: Mapping[str, str], source: str | None
) -> tuple[str, list[Any]]:
    sql = "SELECT query_key, data FROM relations r WHERE r.schema = ?"
    params: list[Any] = [schema.name]
    if source:
        sql += " AND r.source = ?"
        params.append(source)
    for name, value in filters.items():
        pattern = "%" + value.strip().lower().replace("\\", "\\\\").replace("%", "\\%") \
            .replace("_", "\\_") + "%"
        if name in schema.slot_names:
            sql += (" AND EXISTS (SELECT 1 FROM relation_slots rs LEFT JOIN synonyms s "
                    "ON s.entity_key = rs.entity_key WHERE rs.relation_id = r.id AND rs.slot = ? "
                    "AND (lower(rs.text) LIKE ? ESCAPE '\\' OR lower(s.synonym) LIKE ? "
                    "ESCAPE '\\'))")
            params += [name, pattern, pattern]
        else:
            sql += " AND lower(json_extract(r.data, ?)) LIKE ? ESCAPE '\\'"
            params += [f'$.attributes."{name}"', pattern]
    return sql + " ORDER BY r.id", params


def _representative(rels: list[Relation], slot: str) -> tuple[Entity, ...]:
    """The slot's entities with their most frequent text across the group; synonyms merged."""
    first = rels[0].slots.get(slot, ())
    out = []
    for i, ent in enumerate(first):
        texts = Counter(r.slots[slot][i].text for r in rels if len(r.slots.get(slot, ())) > i)
        forms = {f for r in rels if len(r.slots.get(slot, ())) > i
                 for f in (r.slots[slot][i].text, *r.slots[slot][i].synonyms)}
        best = max(texts.items(), key=lambda kv: (kv[1], kv[0] == ent.text))[0]
        out.append(Entity(best, ent.type, ent.id, tuple(sorted(forms - {best}))))
    return tuple(out)


def _group(schema: Schema, key: str, rels: list[Relation]) -> PartialRelation:
    pmids: dict[str, None] = {}
    attributes: dict[str, set[str]] = {}
    for rel in rels:
        for p in rel.pmids:
            pmids.setdefault(p, None)
        for k, v in rel.attributes.items():
            if v:
                attributes.setdefault(k, set()).add(v)
    return PartialRelation(
        schema=schema.name,
        query_key=key,
        query={s: _representative(rels, s) for s in schema.query_slots},
        answers=tuple(r.slots[schema.answer] for r in rels if r.slots.get(schema.answer)),
        pmids=tuple(pmids),
        sources=tuple(sorted({r.source for r in rels})),
        n_records=len(rels),
        attributes={k: tuple(sorted(v)) for k, v in sorted(attributes.items())},
    )


class Relations:
    """The relations table (and its slots and citations), grouped for curators."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def partial(
        self, schema: str,
        filters: Mapping[str, str] | None = None,
        *,
        source: str | None = None,
        limit: int | None = None,
    ) -> list[PartialRelation]:
        """Partial relations of one schema, most-cited first.

        Entities carry the synonyms of their KB records and every synonym the workspace stores
        for their key (:mod:`curation.store.entities`), so the matcher highlights them all.

        Args:
            schema: Schema name (case-insensitive).
            filters: Slot or attribute name -> text. A slot filter matches entities whose text or
                synonym contains the text (case-insensitive); an attribute filter (``level=A``,
                ``disease=melanoma``) matches attribute values the same way.
            source: Only records from this KB.
            limit: At most this many partial relations.

        Raises:
            UnknownNameError: Unknown schema.
            CurationError: A filter names neither a slot of the schema nor an attribute of its
                relations (the message lists both).
        """
        sch = get_schema(schema, self.ws.schemas())
        self._check_filter_names(sch, filters or {})
        sql, params = _select_relations(sch, filters or {}, source)
        groups: dict[str, list[Relation]] = {}
        for row in self.ws.conn.execute(sql, params):
            relation = Relation.from_json(json.loads(row["data"]))
            groups.setdefault(row["query_key"], []).append(relation)
        out = [_group(sch, key, rels) for key, rels in groups.items()]
        out.sort(key=lambda p: (-len(p.pmids), -p.n_records, p.query_key))
        return self._with_workspace_synonyms(out[:limit] if limit is not None else out)

    def _with_workspace_synonyms(self, partials: list[PartialRelation]) -> list[PartialRelation]:
        """Partial relations whose entities also carry the workspace's synonyms (curators', MeSH
        entry terms, PubTator mentions), not only those of the KB records: the matcher's forms."""
        keys = {e.key for p in partials for ents in (*p.query.values(), *p.answers) for e in ents}
        stored = Entities(self.ws).synonyms_by_key(keys)
        if not stored:
            return partials

        def merged(ents: tuple[Entity, ...]) -> tuple[Entity, ...]:
            return tuple(with_synonyms(e, stored.get(e.key, ())) for e in ents)

        return [replace(p, query={slot: merged(ents) for slot, ents in p.query.items()},
                        answers=tuple(merged(ents) for ents in p.answers)) for p in partials]

    def attributes(self, schema: str) -> list[str]:
        """The attribute names the schema's relations carry (``evidence_level``, ...), sorted."""
        names: set[str] = set()
        rows = self.ws.conn.execute("SELECT data FROM relations WHERE schema = ?", (schema,))
        for (data,) in rows:
            attributes = json.loads(data).get("attributes") or {}
            names.update(attributes)
        return sorted(names)

    def _check_filter_names(self, schema: Schema, filters: Mapping[str, str]) -> None:
        unknown = [n for n in filters if n not in schema.slot_names]
        if not unknown:
            return
        attributes = self.attributes(schema.name)
        unknown = [n for n in unknown if n not in attributes]
        if unknown:
            raise CurationError(
                f"Schema {schema.name} has no slot or attribute {', '.join(map(repr, unknown))}; "
                f"filter by a slot ({', '.join(schema.slot_names)}) or an attribute of its "
                f"relations ({', '.join(attributes) or 'none'}), e.g. "
                f"{schema.slot_names[0]}=TEXT")

    def schemas(self) -> list[str]:
        """Names of the schemas that have KB relations, most relations first (then by name)."""
        rows = self.ws.conn.execute(
            "SELECT schema, COUNT(*) FROM relations GROUP BY 1 ORDER BY 2 DESC, 1")
        return [r[0] for r in rows]

    def sources(self, schema: str) -> list[str]:
        """The distinct sources (KBs) of ``schema``'s relations, sorted."""
        return [r[0] for r in self.ws.conn.execute(
            "SELECT DISTINCT source FROM relations WHERE schema = ? ORDER BY source", (schema,))]

    def evidence_levels(self, schema: str) -> list[str]:
        """Distinct non-empty ``attributes.evidence_level`` values of ``schema``'s relations, as
        sorted text."""
        rows = self.ws.conn.execute(
            "SELECT DISTINCT json_extract(data, '$.attributes.evidence_level') FROM relations "
            "WHERE schema = ?", (schema,))
        return sorted(str(r[0]) for r in rows if r[0])

    def rows(self, schema: str) -> list[tuple[str, str]]:
        """A schema's KB relations in import order.

        Returns:
            ``(query_key, data)`` per relation, ``data`` the relation's JSON text.
        """
        return [(r[0], r[1]) for r in self.ws.conn.execute(
            "SELECT query_key, data FROM relations WHERE schema = ? ORDER BY id", (schema,))]

    def evaluable_schemas(self) -> list[str]:
        """Schemas whose relations cite at least one document of the workspace (so have gold),
        by name."""
        rows = self.ws.conn.execute(
            "SELECT DISTINCT r.schema FROM relations r JOIN relation_pmids p "
            "ON p.relation_id = r.id JOIN documents d ON d.doc_id = p.pmid ORDER BY r.schema")
        return [r[0] for r in rows]

    def stamp(self) -> str:
        """A stamp that changes when a relation or a curator synonym changes (the entities of a
        relation carry the workspace synonyms): counts, newest ``updated_at`` and newest rowid."""
        n, last = self.ws.conn.execute("SELECT COUNT(*), MAX(updated_at) FROM relations").fetchone()
        s, s_last = self.ws.conn.execute("SELECT COUNT(*), MAX(rowid) FROM synonyms").fetchone()
        return f"{n}:{last}:{s}:{s_last}"

    def slot_texts(self, schema: str, query_key: str) -> list[tuple[str, str]]:
        """(slot, entity text) of the first KB record of a partial relation, in stored order;
        [] when no record has that key."""
        rows = self.ws.conn.execute(
            "SELECT slot, text FROM relation_slots WHERE relation_id = (SELECT MIN(id) FROM "
            "relations WHERE schema = ? AND query_key = ?) ORDER BY rowid", (schema, query_key))
        return [(row["slot"], row["text"]) for row in rows]

    def record_entities(self, schema: str, query_key: str,
                        limit: int = 500) -> list[tuple[str, str, str]]:
        """(source, record_id, entity_key) of each entity of each KB record of a partial
        relation, in import order (at most ``limit`` records); [] when none has that key."""
        rows = self.ws.conn.execute(
            "SELECT r.source, r.record_id, rs.entity_key FROM (SELECT id, source, record_id "
            "FROM relations WHERE schema = ? AND query_key = ? ORDER BY id LIMIT ?) r "
            "JOIN relation_slots rs ON rs.relation_id = r.id ORDER BY r.id, rs.rowid",
            (schema, query_key, limit))
        return [(row[0], row[1], row[2]) for row in rows]
