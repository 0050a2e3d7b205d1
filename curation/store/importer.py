"""Importing reader output into a workspace: idempotent, audited, all or nothing.

* All or nothing: a reader error (or a killed process) half-way leaves the workspace unchanged.
  The import is still written in short transactions (about 0.25 s of rows each), so a curator's
  label never waits long for the write lock; :mod:`curation.store.import_log` rolls back the
  batches of an import that did not finish.
* Importing the same file twice adds nothing.
* Merge rules for documents and relations: :mod:`curation.store.import_rows`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from tqdm.auto import tqdm

from curation.store.import_log import BatchSizer, ImportRun, importing
from curation.store.import_rows import (
    DOC_FIELDS,
    add_entity,
    import_documents,
    import_relations,
    query_key,
    row_hash,
)
from curation.store.workspace import Workspace, utcnow
from kb_sources.read_stats import ReadIssue
from kb_sources.registry import ReaderKind, get_reader
from kb_sources.types import Document, Relation

__all__ = ["ImportReport", "add_entity", "import_citations", "import_file", "import_items",
           "import_mesh_headings", "import_mesh_tree", "insert_pairs", "query_key"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_COUNTS = ("documents_added", "documents_updated", "documents_unchanged", "documents_held",
           "relations_added", "relations_updated", "relations_unchanged")


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
    documents_held: int = 0  # labelled documents that kept their text (import_rows)
    read_issues: tuple[ReadIssue, ...] = ()  # input the reader skipped (counted, warned)

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
        text = (f"{self.path}: documents +{self.documents_added} ~{self.documents_updated} "
                f"={self.documents_unchanged}; relations +{self.relations_added} "
                f"~{self.relations_updated} ={self.relations_unchanged}")
        if self.documents_held:
            text += (f"; {self.documents_held} labelled document(s) kept the text their labels "
                     "were given on (the offered text is in the audit log, action 'held')")
        return text + "".join(f"; warning: {i.summary()}" for i in self.read_issues)


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
    """Read ``path`` with a registered reader and import everything (all or nothing).

    Raises:
        UnknownNameError: No such reader.
        InputFormatError: The file is malformed (the workspace is left unchanged).
        SchemaError: A relation does not fit its schema.
    """
    spec = get_reader(kind, reader)
    items = spec.read(path, **options)
    report = import_items(ws, items, reader=f"{kind}:{reader}", path=str(path), actor=actor,
                          progress=progress)
    return replace(report, read_issues=tuple(items.issues))


def import_items(
    ws: Workspace,
    items: Iterable[Relation | Document],
    *,
    reader: str,
    path: str,
    actor: str = "cli",
    progress: bool = True,
    batch_size: int | None = None,
) -> ImportReport:
    """Import relations and documents, all or nothing; see the module docstring for rules.

    Args:
        batch_size: Records per transaction; None adapts it so each takes about 0.25 s.

    Raises:
        WorkspaceBusyError: Another import is running.
    """
    schemas = ws.schemas()
    counts = dict.fromkeys(_COUNTS, 0)
    sizer = BatchSizer(size=batch_size, fixed=True) if batch_size else BatchSizer()
    bar = tqdm(items, desc=f"import {Path(path).name}", unit=" records", disable=not progress,
               mininterval=0.5)
    try:
        with importing(ws, actor=actor, kind=reader.split(":")[0], reader=reader,
                       path=path) as run:
            for docs, rels in _chunks(bar, sizer):
                with run.batch(sizer, len(docs) + len(rels)):
                    if docs:  # documents first: relations may cite them
                        _merge_counts(counts, import_documents(run, docs, actor))
                    if rels:
                        _merge_counts(counts, import_relations(run, rels, schemas, actor))
            report = ImportReport(reader=reader, path=path, **counts)
            run.finish(added=report.added, updated=report.updated, unchanged=report.unchanged,
                       sha256=_sha256(path))
    finally:
        bar.close()
    logger.info("imported %s", report.summary())
    return report


def _batched(items: Iterable[T], sizer: BatchSizer) -> Iterator[list[T]]:
    """Lists of ``sizer.size`` items (read before each batch's transaction starts)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= sizer.size:
            yield batch
            batch = []
    if batch:
        yield batch


def _chunks(
    items: Iterable[Relation | Document], sizer: BatchSizer
) -> Iterator[tuple[list[Document], list[Relation]]]:
    for batch in _batched(items, sizer):
        for item in batch:
            if not isinstance(item, Document | Relation):
                raise TypeError(
                    f"reader yielded {type(item).__name__}; expected Relation or Document")
        yield ([i for i in batch if isinstance(i, Document)],
               [i for i in batch if isinstance(i, Relation)])


def _merge_counts(counts: dict[str, int], delta: dict[str, int]) -> None:
    for key, value in delta.items():
        counts[key] += value


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
    """Insert (a, b) rows with ``sql`` (all or nothing, in short batches); returns rows added."""
    added = 0
    sizer = BatchSizer(size=1000)
    with importing(ws, actor=actor, kind=reader, reader=reader, path=path) as run:
        for batch in _batched(rows, sizer):
            with run.batch(sizer, len(batch)):
                added += max(0, ws.conn.executemany(sql, batch).rowcount)
        run.finish(added=added, updated=0, unchanged=0, sha256=_sha256(path))
    return added


def import_mesh_headings(ws: Workspace, path: str | Path, *, actor: str = "cli",
                         progress: bool = True) -> int:
    """Attach MeSH headings (pmid -> descriptors) to documents that have none yet.

    Documents not in the workspace are ignored; returns the number of documents updated.
    """
    from kb_sources.mesh import read_mesh_headings

    updated = 0
    sizer = BatchSizer()
    rows = tqdm(read_mesh_headings(Path(path)), desc=f"import {Path(path).name}", unit=" pmids",
                disable=not progress, mininterval=0.5)
    with importing(ws, actor=actor, kind="mesh-headings", reader="mesh-headings",
                   path=str(path)) as run:
        for batch in _batched(rows, sizer):
            with run.batch(sizer, len(batch)):
                updated += sum(_attach_headings(run, pmid, descriptors, actor)
                               for pmid, descriptors in batch)
        run.finish(added=0, updated=updated, unchanged=0, sha256=_sha256(str(path)))
    return updated


def _attach_headings(run: ImportRun, pmid: str, descriptors: Iterable[str], actor: str) -> bool:
    """Give one document its MeSH headings when it has none; True when it changed."""
    ws = run.ws
    descriptors = list(descriptors)
    row = ws.conn.execute("SELECT * FROM documents WHERE doc_id = ?", (pmid,)).fetchone()
    if row is None or row["mesh"] != "[]" or not descriptors:
        return False
    merged = {f: row[f] for f in DOC_FIELDS}
    merged["mesh"] = json.dumps(descriptors, ensure_ascii=False)
    run.remember("document", pmid)
    ws.conn.execute("UPDATE documents SET mesh = ?, content_hash = ?, updated_at = ? "
                    "WHERE doc_id = ?", (merged["mesh"], row_hash(merged), utcnow(), pmid))
    ws.audit(actor, "update", "document", pmid, before={"mesh": "[]"},
             after={"mesh": merged["mesh"]})
    return True
