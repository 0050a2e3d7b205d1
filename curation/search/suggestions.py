"""Answer-slot suggestions from the top-ranked abstracts, and confirmed source suggestions.

The tool suggests, the curator decides. For a partial relation ("BRAF + V600E -> ?") the
candidates are the entities that could fill the answer slot:

* the KB's own answer entities of the schema (every drug any PO record names, every catalyst any
  PTM record names), with their synonyms, found in the abstracts by the
  :class:`~curation.matching.matcher.EntityMatcher`;
* PubTator annotations of the answer type in those abstracts (chemicals for a drug slot).

Each candidate carries how many abstracts mention it, which ones, and ``new`` when the partial
relation does not already list it as an answer. A curator turns one into a
:class:`SourceSuggestion` (PMID, the relation's slots, a required comment, who confirmed it),
kept in the workspace and exported as CSV in the shape of a CIViC source suggestion.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curation.access.users import User
from curation.matching.matcher import EntityMatcher
from curation.store.relations import PartialRelation
from curation.store.workspace import Workspace, utcnow
from kb_sources.checks import is_pmid as _is_pmid
from kb_sources.errors import CurationError
from kb_sources.schema import Schema
from kb_sources.types import Entity

logger = logging.getLogger(__name__)

#: Annotation types that also fill an answer slot of a given entity type.
ANNOTATION_ALIASES: dict[str, tuple[str, ...]] = {"drug": ("drug", "chemical"),
                                                  "chemical": ("chemical", "drug")}
#: Slot name -> column name of a CIViC source suggestion.
CIVIC_COLUMNS: dict[str, str] = {"treatment": "therapy"}
_SEP = "\x1f"


def is_pmid(value: str) -> bool:
    """True for a PubMed id (1-10 ASCII digits; :func:`kb_sources.checks.is_pmid`)."""
    return _is_pmid(value or "")


@dataclass(frozen=True)
class Candidate:
    """One possible answer found in the top-k abstracts.

    Attributes:
        key: Entity key (``drug:vemurafenib``, ``chemical:D000077484``).
        text: Display text.
        entity: The entity with synonyms (for highlighting), when it came from the KB.
        pmids: Abstracts that mention it, in ranking order.
        new: Not yet an answer of this partial relation in the KB.
        sources: Where the candidate came from: "kb" and/or "pubtator".
    """

    key: str
    text: str
    entity: Entity
    pmids: tuple[str, ...]
    new: bool
    sources: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.pmids)


def kb_answer_entities(ws: Workspace, schema: Schema) -> list[Entity]:
    """Every entity that fills the answer slot of some KB record of the schema (with synonyms)."""
    rows = ws.conn.execute(
        "SELECT e.key, e.type, e.id, e.text, group_concat(s.synonym, char(31)) AS syn "
        "FROM entities e LEFT JOIN synonyms s ON s.entity_key = e.key WHERE e.key IN ("
        "SELECT DISTINCT rs.entity_key FROM relation_slots rs JOIN relations r "
        "ON r.id = rs.relation_id WHERE r.schema = ? AND rs.slot = ?) GROUP BY e.key "
        "ORDER BY e.key", (schema.name, schema.answer))
    out = []
    for row in rows:
        synonyms = tuple(sorted({s for s in (row["syn"] or "").split(_SEP) if s} - {row["text"]}))
        out.append(Entity(row["text"], row["type"], row["id"], synonyms))
    return out


def _forms(entity: Entity) -> set[str]:
    return {f.strip().lower() for f in (entity.text, *entity.synonyms) if f.strip()}


def _known(partial: PartialRelation) -> tuple[set[str], set[str]]:
    """Keys and lower-case surface forms of the partial relation's known answers."""
    ents = [e for answer in partial.answers for e in answer]
    return {e.key for e in ents}, {f for e in ents for f in _forms(e)}


def answer_candidates(
    ws: Workspace,
    schema: Schema,
    partial: PartialRelation,
    docs: Sequence[tuple[str, str]],
    matcher: EntityMatcher,
    *,
    kb_entities: Sequence[Entity] | None = None,
) -> list[Candidate]:
    """Answer-slot candidates mentioned in ``docs`` (``(doc_id, text)`` in ranking order).

    Args:
        ws: The workspace (KB answer entities and PubTator annotations).
        schema: The partial relation's schema.
        partial: The partial relation (its known answers decide ``new``; its query entities are
            never candidates).
        docs: The top-ranked documents as ``(doc_id, title + " " + abstract)``.
        matcher: The process-wide matcher.
        kb_entities: Pre-loaded :func:`kb_answer_entities` (loaded when None).

    Returns:
        Candidates, most supported first (then new before known, then by text).
    """
    entities = kb_answer_entities(ws, schema) if kb_entities is None else kb_entities
    query_keys = {e.key for ents in partial.query.values() for e in ents}
    query_forms = {f for ents in partial.query.values() for e in ents for f in _forms(e)}
    found: dict[str, tuple[Entity, list[str], set[str]]] = {}
    by_form: dict[str, str] = {}
    for entity in entities:
        if entity.key in query_keys:
            continue
        pmids = [doc_id for doc_id, text in docs if matcher.mentions(entity, text)]
        for form in _forms(entity):
            by_form.setdefault(form, entity.key)
        if pmids:
            found[entity.key] = (entity, pmids, {"kb"})
    kb = {e.key: e for e in entities}
    _add_annotations(ws, schema, [d for d, _ in docs], found, (by_form, kb),
                     query_keys | query_forms)
    for entity, pmids, sources in found.values():
        if "kb" not in sources:  # annotated somewhere: count every abstract that names it
            pmids.extend(d for d, text in docs if d not in pmids and matcher.mentions(entity, text))
    known_keys, known_forms = _known(partial)
    out = [Candidate(key, ent.text, ent, _ordered(pmids, docs),
                     key not in known_keys and not (_forms(ent) & known_forms),
                     tuple(sorted(sources)))
           for key, (ent, pmids, sources) in found.items()]
    out.sort(key=lambda c: (-c.count, not c.new, c.text.lower()))
    return out


def _add_annotations(ws: Workspace, schema: Schema, doc_ids: Sequence[str],
                     found: dict[str, tuple[Entity, list[str], set[str]]],
                     lookup: tuple[Mapping[str, str], Mapping[str, Entity]],
                     excluded: set[str]) -> None:
    """Merge PubTator annotations of the answer type into ``found``: onto a KB entity with the
    same surface form, else one candidate per annotated id (or text)."""
    by_form, kb = lookup
    if not doc_ids:
        return
    etype = schema.slot(schema.answer).type
    types = ANNOTATION_ALIASES.get(etype, (etype,))
    marks = ",".join("?" * len(doc_ids))
    tmarks = ",".join("?" * len(types))
    rows = ws.conn.execute(
        f"SELECT doc_id, text, type, ids FROM annotations WHERE doc_id IN ({marks}) "
        f"AND type IN ({tmarks})", (*doc_ids, *types))
    for row in rows:
        text = " ".join(row["text"].split())
        ids = [i for i in json.loads(row["ids"] or "[]") if i and i != "-"]
        key = by_form.get(text.lower()) or (f"{row['type']}:{ids[0]}" if ids
                                             else f"{row['type']}:{text.lower()}")
        if key in excluded or text.lower() in excluded:
            continue
        entity = kb.get(key) or Entity(text, row["type"], ids[0] if ids else "")
        _, pmids, sources = found.setdefault(key, (entity, [], set()))
        if row["doc_id"] not in pmids:
            pmids.append(row["doc_id"])
        sources.add("pubtator")


def _ordered(pmids: Sequence[str], docs: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    rank = {doc_id: i for i, (doc_id, _) in enumerate(docs)}
    return tuple(sorted(set(pmids), key=lambda p: rank.get(p, len(rank))))


# -- confirmed source suggestions ----------------------------------------------------------------
@dataclass(frozen=True)
class SourceSuggestion:
    """A PMID a curator confirmed as evidence for a relation, with the required comment."""

    id: int
    created_at: str
    confirmed_by: str
    schema: str
    query_key: str
    pmid: str
    slots: dict[str, str]
    answer: str
    answer_key: str
    comment: str

    @classmethod
    def from_row(cls, row: Any) -> SourceSuggestion:
        data = dict(row)
        data["slots"] = json.loads(data["slots"])
        return cls(**data)


def add_suggestion(
    ws: Workspace, *, user: User | None, schema: Schema, partial: PartialRelation, pmid: str,
    answer: str, comment: str, answer_key: str = "",
) -> SourceSuggestion:
    """Store a confirmed source suggestion (audited).

    Raises:
        CurationError: No user, a PMID that is not digits, an empty answer or comment, or the
            same suggestion stored before.
    """
    if user is None or not user.name.strip():
        raise CurationError("A source suggestion needs the curator who confirms it; sign in first")
    if not is_pmid(pmid.strip()):
        raise CurationError(f"PMID {pmid!r} is not a PubMed id (digits only); suggest a PubMed "
                            "abstract")
    if not answer.strip():
        raise CurationError(f"Name the {schema.answer} this abstract supports")
    if not comment.strip():
        raise CurationError("A source suggestion needs a comment (what the abstract shows); "
                            "CIViC requires one")
    slots = {s: " + ".join(e.text for e in partial.query.get(s, ())) for s in schema.query_slots}
    with ws.transaction():
        if ws.conn.execute(
                "SELECT 1 FROM source_suggestions WHERE schema = ? AND query_key = ? AND pmid = ? "
                "AND answer_key = ? AND answer = ?",
                (schema.name, partial.query_key, pmid.strip(), answer_key, answer.strip())
        ).fetchone():
            raise CurationError(f"PMID {pmid} is already suggested for {answer.strip()} on this "
                                "relation; see the suggestion list")
        new_id = int(ws.conn.execute(
            "INSERT INTO source_suggestions(created_at, confirmed_by, schema, query_key, pmid, "
            "slots, answer, answer_key, comment) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (utcnow(), user.name, schema.name, partial.query_key, pmid.strip(),
             json.dumps(slots, ensure_ascii=False), answer.strip(), answer_key,
             comment.strip())).lastrowid)
        ws.audit(user.name, "suggest", "source_suggestion", str(new_id),
                 after={"pmid": pmid.strip(), "answer": answer.strip(), "query_key":
                        partial.query_key})
    return get_suggestion(ws, new_id)


def get_suggestion(ws: Workspace, suggestion_id: int) -> SourceSuggestion:
    row = ws.conn.execute("SELECT * FROM source_suggestions WHERE id = ?",
                          (suggestion_id,)).fetchone()
    if row is None:
        raise CurationError(f"No source suggestion with id {suggestion_id}")
    return SourceSuggestion.from_row(row)


def list_suggestions(ws: Workspace, *, schema: str | None = None,
                     query_key: str | None = None) -> list[SourceSuggestion]:
    """Stored suggestions, newest first, optionally for one schema / partial relation."""
    sql, params = "SELECT * FROM source_suggestions WHERE 1 = 1", []
    for column, value in (("schema", schema), ("query_key", query_key)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    return [SourceSuggestion.from_row(r) for r in ws.conn.execute(sql + " ORDER BY id DESC",
                                                                  params)]


def remove_suggestion(ws: Workspace, suggestion_id: int, *, user: User | None) -> None:
    """Delete a suggestion (its confirmer or an admin; audited)."""
    old = get_suggestion(ws, suggestion_id)
    if user is None or (user.name != old.confirmed_by and not user.is_admin):
        raise CurationError(f"Only {old.confirmed_by} or an admin may remove suggestion "
                            f"{suggestion_id}")
    with ws.transaction():
        ws.conn.execute("DELETE FROM source_suggestions WHERE id = ?", (suggestion_id,))
        ws.audit(user.name, "remove", "source_suggestion", str(suggestion_id),
                 before={"pmid": old.pmid, "answer": old.answer, "comment": old.comment})


def suggestion_rows(suggestions: Sequence[SourceSuggestion],
                    schemas: Mapping[str, Schema]) -> list[dict[str, str]]:
    """Rows in CIViC source-suggestion shape: pmid, the relation's slots (``treatment`` is
    ``therapy``), comment, confirmed_by, created_at."""
    rows = []
    for s in suggestions:
        schema = schemas.get(s.schema)
        answer_slot = schema.answer if schema else "answer"
        row = {"pmid": s.pmid}
        for slot, text in s.slots.items():
            row[CIVIC_COLUMNS.get(slot, slot)] = text
        row[CIVIC_COLUMNS.get(answer_slot, answer_slot)] = s.answer
        row.update(comment=s.comment, confirmed_by=s.confirmed_by, created_at=s.created_at,
                   schema=s.schema)
        rows.append(row)
    return rows


def suggestions_csv(suggestions: Sequence[SourceSuggestion],
                    schemas: Mapping[str, Schema]) -> str:
    """CSV text of :func:`suggestion_rows` (columns in first-seen order)."""
    rows = suggestion_rows(suggestions, schemas)
    columns = list(dict.fromkeys(k for row in rows for k in row)) or [
        "pmid", "gene", "variant", "therapy", "comment", "confirmed_by", "created_at"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
