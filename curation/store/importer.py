"""Importing reader output into a workspace: idempotent, audited, all or nothing.

* One transaction per import: a reader error half-way leaves the workspace unchanged.
* Importing the same file twice adds nothing.
* Relations are keyed by (source, record_id): a changed record is updated and audited.
* Documents are keyed by doc_id (PMID). The first source owns the text; a later source of the
  same PMID only fills what is missing (MeSH, references, journal, year, an empty title) and
  adds annotations, so importing two corpora that share abstracts never flip-flops.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from curation.store.workspace import Workspace, utcnow
from kb_sources.errors import SchemaError
from kb_sources.registry import ReaderKind, get_reader
from kb_sources.schema import Schema
from kb_sources.types import Annotation, Document, Entity, Relation

logger = logging.getLogger(__name__)

_CHUNK = 2000


@dataclass(frozen=True)
class ImportReport:
    """What one import changed."""

    reader: str
    path: str
    documents_added: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    relations_added: int = 0
    relations_updated: int = 0
    relations_unchanged: int = 0

    @property
    def added(self) -> int:
        return self.documents_added + self.relations_added

    @property
    def updated(self) -> int:
        return self.documents_updated + self.relations_updated

    @property
    def unchanged(self) -> int:
        return self.documents_unchanged + self.relations_unchanged

    def summary(self) -> str:
        return (f"{self.path}: documents +{self.documents_added} ~{self.documents_updated} "
                f"={self.documents_unchanged}; relations +{self.relations_added} "
                f"~{self.relations_updated} ={self.relations_unchanged}")


def import_file(
    ws: Workspace,
    kind: ReaderKind,
    reader: str,
    path: str | Path,
    *,
    actor: str = "cli",
    progress: bool = True,
    **options: Any,
) -> ImportReport:
    """Read ``path`` with a registered reader and import everything in one transaction.

    Raises:
        UnknownNameError: No such reader.
        InputFormatError: The file is malformed (the workspace is left unchanged).
        SchemaError: A relation does not fit its schema.
    """
    spec = get_reader(kind, reader)
    items = spec.read(path, **options)
    return import_items(ws, items, reader=f"{kind}:{reader}", path=str(path), actor=actor,
                        progress=progress)


def import_items(
    ws: Workspace,
    items: Iterable[Relation | Document],
    *,
    reader: str,
    path: str,
    actor: str = "cli",
    progress: bool = True,
) -> ImportReport:
    """Import relations and documents (one transaction); see the module docstring for rules."""
    schemas = ws.schemas()
    counts = dict.fromkeys(
        ("documents_added", "documents_updated", "documents_unchanged", "relations_added",
         "relations_updated", "relations_unchanged"), 0)
    bar = tqdm(items, desc=f"import {Path(path).name}", unit=" records", disable=not progress,
               mininterval=0.5)
    with ws.transaction():
        for docs, rels in _chunks(bar):
            if docs:
                _merge_counts(counts, _import_documents(ws, docs, actor))
            if rels:
                _merge_counts(counts, _import_relations(ws, rels, schemas, actor))
        report = ImportReport(reader=reader, path=path, **counts)
        ws.conn.execute(
            "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, unchanged)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (utcnow(), actor, reader.split(":")[0], reader, path, _sha256(path), report.added,
             report.updated, report.unchanged),
        )
    bar.close()
    logger.info("imported %s", report.summary())
    return report


def _chunks(
    items: Iterable[Relation | Document],
) -> Iterator[tuple[list[Document], list[Relation]]]:
    docs: list[Document] = []
    rels: list[Relation] = []
    for item in items:
        if isinstance(item, Document):
            docs.append(item)
        elif isinstance(item, Relation):
            rels.append(item)
        else:
            raise TypeError(f"reader yielded {type(item).__name__}; expected Relation or Document")
        if len(docs) + len(rels) >= _CHUNK:
            # documents first: relations may cite them
            yield docs, rels
            docs, rels = [], []
    if docs or rels:
        yield docs, rels


def _merge_counts(counts: dict[str, int], delta: dict[str, int]) -> None:
    for key, value in delta.items():
        counts[key] += value


# -- documents ------------------------------------------------------------------------------
_DOC_FIELDS = ("title", "abstract", "journal", "year", "mesh", "refs")


def _doc_row(doc: Document) -> dict[str, Any]:
    return {"title": doc.title, "abstract": doc.abstract, "journal": doc.journal,
            "year": doc.year, "mesh": json.dumps(list(doc.mesh), ensure_ascii=False),
            "refs": json.dumps(list(doc.references))}


def _row_hash(row: dict[str, Any]) -> str:
    blob = json.dumps([row[f] for f in _DOC_FIELDS], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _merge_doc(old: dict[str, Any], new: dict[str, Any], same_source: bool) -> dict[str, Any]:
    """Same source: its non-empty fields replace the old ones. Other source: fill empty fields.

    Fields a source does not provide are never blanked, so the metadata that several sources
    contribute accumulates and re-imports are no-ops.
    """
    merged = dict(old)
    for f in _DOC_FIELDS:
        if new[f] in ("", None, "[]"):
            continue
        if same_source or old[f] in ("", None, "[]"):
            merged[f] = new[f]
    return merged


def _import_documents(ws: Workspace, docs: list[Document], actor: str) -> dict[str, int]:
    conn = ws.conn
    docs = list({d.doc_id: d for d in docs}.values())  # last occurrence in a chunk wins
    ids = [d.doc_id for d in docs]
    existing = {
        r["doc_id"]: dict(r) for r in conn.execute(
            f"SELECT * FROM documents WHERE doc_id IN ({','.join('?' * len(ids))})", ids)
    }
    counts = {"documents_added": 0, "documents_updated": 0, "documents_unchanged": 0}
    now = utcnow()
    inserts = []
    for doc in docs:
        row = _doc_row(doc)
        old = existing.get(doc.doc_id)
        if old is None:
            inserts.append((doc.doc_id, *(row[f] for f in _DOC_FIELDS), doc.source,
                            _row_hash(row), now, now))
            counts["documents_added"] += 1
            continue
        merged = _merge_doc(old, row, same_source=old["source"] == doc.source)
        new_hash = _row_hash(merged)
        changed = new_hash != old["content_hash"]
        if changed:
            conn.execute(
                "UPDATE documents SET title=?, abstract=?, journal=?, year=?, mesh=?, refs=?, "
                "content_hash=?, updated_at=? WHERE doc_id=?",
                (*(merged[f] for f in _DOC_FIELDS), new_hash, now, doc.doc_id))
            ws.audit(actor, "update", "document", doc.doc_id,
                     before={f: old[f] for f in _DOC_FIELDS if old[f] != merged[f]},
                     after={f: merged[f] for f in _DOC_FIELDS if old[f] != merged[f]})
        if doc.annotations and _replace_annotations(ws, doc):
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


def _annotation_rows(doc_id: str, annotations: Iterable[Annotation]) -> list[tuple[Any, ...]]:
    return [(doc_id, a.start, a.end, a.text, a.type, json.dumps(list(a.ids)))
            for a in annotations]


def _insert_annotations(ws: Workspace, doc_id: str, annotations: Iterable[Annotation]) -> None:
    ws.conn.executemany(
        "INSERT INTO annotations(doc_id, start, end, text, type, ids) VALUES (?, ?, ?, ?, ?, ?)",
        _annotation_rows(doc_id, annotations))


def _replace_annotations(ws: Workspace, doc: Document) -> bool:
    """Replace a document's annotations when they differ; True when something changed."""
    new = sorted(_annotation_rows(doc.doc_id, doc.annotations))
    old = sorted(tuple(r) for r in ws.conn.execute(
        "SELECT doc_id, start, end, text, type, ids FROM annotations WHERE doc_id = ?",
        (doc.doc_id,)))
    if new == old:
        return False
    ws.conn.execute("DELETE FROM annotations WHERE doc_id = ?", (doc.doc_id,))
    _insert_annotations(ws, doc.doc_id, doc.annotations)
    return True


# -- relations ------------------------------------------------------------------------------
def query_key(schema: Schema, slots: dict[str, tuple[Entity, ...]]) -> str:
    """Identity of a partial relation: the schema's query slots and their entities' keys."""
    parts = [f"{s}=" + ",".join(sorted(e.key for e in slots.get(s, ())))
             for s in schema.query_slots]
    return "|".join(parts)


def _import_relations(
    ws: Workspace, rels: list[Relation], schemas: dict[str, Schema], actor: str
) -> dict[str, int]:
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


def _sha256(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        return ""
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()





def import_mesh_tree(ws: Workspace, path: str | Path, *, actor: str = "cli",
                     progress: bool = True) -> int:
    """Import a MeSH tree file (``Term;TreeNumber`` lines); returns tree numbers added."""
    from kb_sources.mesh import iter_mesh_entries

    rows = tqdm(iter_mesh_entries(Path(path)), desc=f"import {Path(path).name}",
                unit=" terms", disable=not progress, mininterval=0.5)
    return insert_pairs(ws, "INSERT OR IGNORE INTO mesh_tree(term, tree_number) VALUES (?, ?)",
                         rows, reader="mesh", path=str(path), actor=actor)


def import_citations(ws: Workspace, path: str | Path, *, actor: str = "cli",
                     progress: bool = True) -> int:
    """Import citation edges (citing PMID, cited PMID); returns edges added."""
    from kb_sources.citations import read_citation_edges

    rows = tqdm(read_citation_edges(Path(path)), desc=f"import {Path(path).name}",
                unit=" edges", disable=not progress, mininterval=0.5)
    return insert_pairs(ws, "INSERT OR IGNORE INTO citations(citing, cited) VALUES (?, ?)",
                         rows, reader="citations", path=str(path), actor=actor)


def insert_pairs(ws: Workspace, sql: str, rows: Iterable[tuple[str, str]], *, reader: str,
                  path: str, actor: str) -> int:
    """Insert (a, b) rows with ``sql`` in one transaction; returns rows added."""
    with ws.transaction():
        before = ws.conn.total_changes
        batch: list[tuple[str, str]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= 10_000:
                ws.conn.executemany(sql, batch)
                batch.clear()
        ws.conn.executemany(sql, batch)
        added = ws.conn.total_changes - before
        ws.conn.execute(
            "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, unchanged)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0)",
            (utcnow(), actor, reader, reader, path, _sha256(path), added))
    return added


def import_mesh_headings(ws: Workspace, path: str | Path, *, actor: str = "cli",
                         progress: bool = True) -> int:
    """Attach MeSH headings (pmid -> descriptors) to documents that have none yet.

    Documents not in the workspace are ignored; returns the number of documents updated.
    """
    from kb_sources.mesh import read_mesh_headings

    updated = 0
    rows = tqdm(read_mesh_headings(Path(path)), desc=f"import {Path(path).name}", unit=" pmids",
                disable=not progress, mininterval=0.5)
    with ws.transaction():
        for pmid, descriptors in rows:
            row = ws.conn.execute("SELECT * FROM documents WHERE doc_id = ?", (pmid,)).fetchone()
            if row is None or row["mesh"] != "[]" or not descriptors:
                continue
            merged = {f: row[f] for f in _DOC_FIELDS}
            merged["mesh"] = json.dumps(list(descriptors), ensure_ascii=False)
            ws.conn.execute("UPDATE documents SET mesh = ?, content_hash = ?, updated_at = ? "
                            "WHERE doc_id = ?", (merged["mesh"], _row_hash(merged), utcnow(), pmid))
            ws.audit(actor, "update", "document", pmid, before={"mesh": "[]"},
                     after={"mesh": merged["mesh"]})
            updated += 1
        ws.conn.execute(
            "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, unchanged)"
            " VALUES (?, ?, 'mesh-headings', 'mesh-headings', ?, ?, 0, ?, 0)",
            (utcnow(), actor, str(path), _sha256(str(path)), updated))
    return updated
