"""Row-level import rules: how one document or relation is merged into the workspace.

Called by :mod:`curation.store.importer` inside one batch of an import; every change to an
existing row is announced to the :class:`~curation.store.import_log.ImportRun` first, so the
import can be rolled back. The rules:

* Relations are keyed by (source, record_id): a changed record is updated and audited.
* Documents are keyed by doc_id (PMID). The first source owns the text; a later source of the
  same PMID only fills what is missing (MeSH, references, journal, year, an empty title) and
  adds annotations, so importing two corpora that share abstracts never flip-flops.
* A labelled document keeps the title and abstract its labels were given on: an import that
  brings another text for it (a PubMed correction, or a record a server slipped in) changes
  neither; the offered text is kept in the audit log (action ``held``) and the document is
  counted as held (:data:`TEXT_FIELDS`). Its other fields (MeSH, journal, ...) still update.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from typing import Any

from curation.store.import_log import ImportRun
from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import SchemaError
from kb_sources.schema import Schema
from kb_sources.types import Annotation, Document, Entity, Relation

logger = logging.getLogger(__name__)

# -- documents ------------------------------------------------------------------------------
DOC_FIELDS = ("title", "abstract", "journal", "year", "mesh", "refs")
#: The fields a label was given on: an import never changes them on a labelled document.
TEXT_FIELDS = ("title", "abstract")


def _doc_row(doc: Document) -> dict[str, Any]:
    return {"title": doc.title, "abstract": doc.abstract, "journal": doc.journal,
            "year": doc.year, "mesh": json.dumps(list(doc.mesh), ensure_ascii=False),
            "refs": json.dumps(list(doc.references))}


def row_hash(row: dict[str, Any]) -> str:
    blob = json.dumps([row[f] for f in DOC_FIELDS], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _merge_doc(old: dict[str, Any], new: dict[str, Any], same_source: bool) -> dict[str, Any]:
    """Same source: its non-empty fields replace the old ones. Other source: fill empty fields.

    Fields a source does not provide are never blanked, so the metadata that several sources
    contribute accumulates and re-imports are no-ops.
    """
    merged = dict(old)
    for f in DOC_FIELDS:
        if new[f] in ("", None, "[]"):
            continue
        if same_source or old[f] in ("", None, "[]"):
            merged[f] = new[f]
    return merged


def import_documents(run: ImportRun, docs: list[Document], actor: str) -> dict[str, int]:
    ws, conn = run.ws, run.ws.conn
    docs = list({d.doc_id: d for d in docs}.values())  # last occurrence in a chunk wins
    ids = [d.doc_id for d in docs]
    marks = ",".join("?" * len(ids))
    existing = {r["doc_id"]: dict(r) for r in conn.execute(
        f"SELECT * FROM documents WHERE doc_id IN ({marks})", ids)}
    labelled = {r[0] for r in conn.execute(
        f"SELECT DISTINCT doc_id FROM labels WHERE doc_id IN ({marks})", ids)} \
        if existing else set()
    counts = {"documents_added": 0, "documents_updated": 0, "documents_unchanged": 0,
              "documents_held": 0}
    now = utcnow()
    inserts = []
    for doc in docs:
        row = _doc_row(doc)
        old = existing.get(doc.doc_id)
        if old is None:
            inserts.append((doc.doc_id, *(row[f] for f in DOC_FIELDS), doc.source,
                            row_hash(row), now, now))
            counts["documents_added"] += 1
            continue
        merged = _merge_doc(old, row, same_source=old["source"] == doc.source)
        if doc.doc_id in labelled and _hold_text(ws, actor, old, merged):
            counts["documents_held"] += 1
        changed = _update_document(run, actor, old, merged, now)
        if doc.annotations and _replace_annotations(run, doc):
            changed = True
        counts["documents_updated" if changed else "documents_unchanged"] += 1
    conn.executemany(
        "INSERT INTO documents(doc_id, title, abstract, journal, year, mesh, refs, source, "
        "content_hash, added_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", inserts)
    new_ids = {row[0] for row in inserts}
    for doc in docs:
        if doc.doc_id in new_ids and doc.annotations:
            _insert_annotations(ws, doc.doc_id, doc.annotations)
    return counts


def _hold_text(ws: Workspace, actor: str, old: dict[str, Any], merged: dict[str, Any]) -> bool:
    """Keep a labelled document's title and abstract in ``merged`` (the text its labels were
    given on); the offered text goes to the audit log. True when a text was held back."""
    offered = {f: merged[f] for f in TEXT_FIELDS if merged[f] != old[f]}
    if not offered:
        return False
    merged.update({f: old[f] for f in offered})
    ws.audit(actor, "held", "document", old["doc_id"], before={f: old[f] for f in offered},
             after=offered)
    logger.warning("document %s is labelled: kept the text its labels were given on; the "
                   "import offered another %s (in the audit log, action 'held')", old["doc_id"],
                   " and ".join(offered))
    return True


def _update_document(run: ImportRun, actor: str, old: dict[str, Any], merged: dict[str, Any],
                     now: str) -> bool:
    """Write ``merged`` over ``old`` when it differs (announced and audited); True if so."""
    new_hash = row_hash(merged)
    if new_hash == old["content_hash"]:
        return False
    doc_id = old["doc_id"]
    run.remember("document", doc_id)
    run.ws.conn.execute(
        "UPDATE documents SET title=?, abstract=?, journal=?, year=?, mesh=?, refs=?, "
        "content_hash=?, updated_at=? WHERE doc_id=?",
        (*(merged[f] for f in DOC_FIELDS), new_hash, now, doc_id))
    run.ws.audit(actor, "update", "document", doc_id,
                 before={f: old[f] for f in DOC_FIELDS if old[f] != merged[f]},
                 after={f: merged[f] for f in DOC_FIELDS if old[f] != merged[f]})
    return True


def _annotation_rows(doc_id: str, annotations: Iterable[Annotation]) -> list[tuple[Any, ...]]:
    return [(doc_id, a.start, a.end, a.text, a.type, json.dumps(list(a.ids)))
            for a in annotations]


def _insert_annotations(ws: Workspace, doc_id: str, annotations: Iterable[Annotation]) -> None:
    ws.conn.executemany(
        "INSERT INTO annotations(doc_id, start, end, text, type, ids) VALUES (?, ?, ?, ?, ?, ?)",
        _annotation_rows(doc_id, annotations))


def _replace_annotations(run: ImportRun, doc: Document) -> bool:
    """Replace a document's annotations when they differ; True when something changed."""
    ws = run.ws
    new = sorted(_annotation_rows(doc.doc_id, doc.annotations))
    old = sorted(tuple(r) for r in ws.conn.execute(
        "SELECT doc_id, start, end, text, type, ids FROM annotations WHERE doc_id = ?",
        (doc.doc_id,)))
    if new == old:
        return False
    run.remember("annotations", doc.doc_id)
    ws.conn.execute("DELETE FROM annotations WHERE doc_id = ?", (doc.doc_id,))
    _insert_annotations(ws, doc.doc_id, doc.annotations)
    return True


# -- relations ------------------------------------------------------------------------------
def query_key(schema: Schema, slots: dict[str, tuple[Entity, ...]]) -> str:
    """Identity of a partial relation: the schema's query slots and their entities' keys."""
    parts = [f"{s}=" + ",".join(sorted(e.key for e in slots.get(s, ())))
             for s in schema.query_slots]
    return "|".join(parts)


def import_relations(
    run: ImportRun, rels: list[Relation], schemas: dict[str, Schema], actor: str
) -> dict[str, int]:
    ws = run.ws
    counts = {"relations_added": 0, "relations_updated": 0, "relations_unchanged": 0}
    now = utcnow()
    for rel in rels:
        schema = schemas.get(rel.schema)
        if schema is None:
            raise SchemaError(
                f"Relation {rel.source}:{rel.record_id} uses schema {rel.schema!r}, which this "
                f"workspace does not know (available: {', '.join(sorted(schemas))}). Add it "
                "with: kbcurate schema add FILE.toml")
        schema.validate_relation(rel)
        data = json.dumps(rel.to_json(), ensure_ascii=False, sort_keys=True)
        digest = rel.content_hash()
        old = ws.conn.execute(
            "SELECT id, data, content_hash FROM relations WHERE source = ? AND record_id = ?",
            (rel.source, rel.record_id)).fetchone()
        if old is not None and old["content_hash"] == digest:
            counts["relations_unchanged"] += 1
            continue
        qkey = query_key(schema, rel.slots)
        if old is None:
            rel_id = ws.conn.execute(
                "INSERT INTO relations(source, record_id, schema, query_key, data, content_hash,"
                " added_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (rel.source, rel.record_id, rel.schema, qkey, data, digest, now, now)).lastrowid
            counts["relations_added"] += 1
        else:
            rel_id = old["id"]
            run.remember("relation", rel_id)
            ws.conn.execute(
                "UPDATE relations SET schema=?, query_key=?, data=?, content_hash=?, updated_at=?"
                " WHERE id=?", (rel.schema, qkey, data, digest, now, rel_id))
            ws.conn.execute("DELETE FROM relation_slots WHERE relation_id = ?", (rel_id,))
            ws.conn.execute("DELETE FROM relation_pmids WHERE relation_id = ?", (rel_id,))
            ws.audit(actor, "update", "relation", f"{rel.source}:{rel.record_id}",
                     before=json.loads(old["data"]), after=rel.to_json())
            counts["relations_updated"] += 1
        _index_relation(ws, rel_id, rel)
    return counts


def _index_relation(ws: Workspace, rel_id: int, rel: Relation) -> None:
    conn = ws.conn
    conn.executemany(
        "INSERT INTO relation_slots(relation_id, slot, entity_key, text) VALUES (?, ?, ?, ?)",
        [(rel_id, slot, e.key, e.text) for slot, ents in rel.slots.items() for e in ents])
    conn.executemany("INSERT OR IGNORE INTO relation_pmids(relation_id, pmid) VALUES (?, ?)",
                     [(rel_id, p) for p in rel.pmids])
    for ents in rel.slots.values():
        for e in ents:
            add_entity(ws, e, source=rel.source)


def add_entity(ws: Workspace, entity: Entity, source: str) -> None:
    """Record an entity and its surface forms as synonyms (inside a transaction)."""
    ws.conn.execute("INSERT OR IGNORE INTO entities(key, type, id, text) VALUES (?, ?, ?, ?)",
                    (entity.key, entity.type, entity.id, entity.text))
    forms = {entity.text, *entity.synonyms} - {""}
    ws.conn.executemany(
        "INSERT OR IGNORE INTO synonyms(entity_key, synonym, source) VALUES (?, ?, ?)",
        [(entity.key, form, source) for form in sorted(forms)])
