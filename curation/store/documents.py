"""The documents table, read side: a document's text in one place.

:func:`document_text` is the one definition of how a (title, abstract) becomes text for a model
(``"{title} {abstract}"`` unless a format says otherwise). :class:`Documents`, built on a
workspace (``Documents(ws)``), holds the SQL of the ``documents`` and ``annotations`` tables:
:meth:`Documents.texts` reads many texts, :meth:`Documents.all_parts` the whole corpus, and its
other methods the corpus counts and hashes, titles, card rows and annotations.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import joined_text

#: How a document becomes text unless a recipe's format says otherwise.
PLAIN_FORMAT = "{title} {abstract}"
_CHUNK = 500


def document_text(title: str, abstract: str, document_format: str = PLAIN_FORMAT) -> str:
    """A document's text in ``document_format`` (``{title}``, ``{abstract}``); the plain format
    is :func:`kb_sources.types.joined_text`, stripped."""
    if document_format == PLAIN_FORMAT:
        return joined_text(title or "", abstract or "").strip()
    return document_format.format(title=title or "", abstract=abstract or "").strip()


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

    @property
    def text(self) -> str:
        """The document's text (:func:`document_text`), as the matcher and the rerank read it."""
        return document_text(self.title or "", self.abstract or "")


class Documents:
    """The documents table and the annotations of its documents."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def all_parts(self, *, by_id: bool = False) -> list[tuple[str, str, str]]:
        """Every document as ``(doc_id, title, abstract)``: in doc_id order with ``by_id`` (index
        builds), else in the database's order (what the seeded training samplers were built on)."""
        sql = "SELECT doc_id, title, abstract FROM documents"
        sql += " ORDER BY doc_id" if by_id else ""
        return [(r[0], r[1], r[2]) for r in self.ws.conn.execute(sql).fetchall()]

    def parts(self, doc_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """doc_id -> (title, abstract) for the ids that exist."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            for doc_id, title, abstract in self.ws.conn.execute(
                    f"SELECT doc_id, title, abstract FROM documents WHERE doc_id IN "
                    f"({','.join('?' * len(chunk))})", tuple(chunk)):
                out[doc_id] = (title or "", abstract or "")
        return out

    def texts(self, doc_ids: Sequence[str],
                       document_format: str = PLAIN_FORMAT) -> list[str]:
        """The texts of ``doc_ids``, in order.

        Raises:
            CurationError: A document is not in the workspace (names up to five of them).
        """
        parts = self.parts(doc_ids)
        missing = [d for d in doc_ids if d not in parts]
        if missing:
            raise CurationError(f"{len(missing)} document(s) are not in the workspace "
                                f"({', '.join(missing[:5])}); re-import them or drop their labels")
        return [document_text(*parts[d], document_format) for d in doc_ids]

    def annotation_ids(self, annotation_types: Sequence[str], doc_ids: Sequence[str]
                       ) -> list[tuple[str, str]]:
        """The ids of the documents' annotations of ``annotation_types`` (lower-case names), 500
        documents a query.

        Returns:
            ``(doc_id, ids JSON)`` per annotation.
        """
        types = ", ".join("?" * len(annotation_types))
        out: list[tuple[str, str]] = []
        for start in range(0, len(doc_ids), _CHUNK):
            chunk = list(doc_ids[start:start + _CHUNK])
            out += [(r[0], r[1]) for r in self.ws.conn.execute(
                f"SELECT doc_id, ids FROM annotations WHERE lower(type) IN ({types}) AND doc_id "
                f"IN ({', '.join('?' * len(chunk))})", (*annotation_types, *chunk))]
        return out

    def annotation_mentions(self, annotation_types: Sequence[str]
                            ) -> list[tuple[str, str, str]]:
        """Annotations of ``annotation_types`` (lower-case names) that carry ids.

        Returns:
            ``(mention text, ids JSON, source of its document)`` per annotation.
        """
        marks = ", ".join("?" * len(annotation_types))
        return [(r[0], r[1], r[2]) for r in self.ws.conn.execute(
            "SELECT a.text, a.ids, d.source FROM annotations a JOIN documents d "
            f"ON d.doc_id = a.doc_id WHERE lower(a.type) IN ({marks}) AND a.ids != '[]'",
            tuple(annotation_types))]

    def corpus_hashes(self) -> list[tuple[str, str]]:
        """Every document as ``(doc_id, content_hash)``, in doc_id order."""
        return [(r[0], r[1]) for r in self.ws.conn.execute(
            "SELECT doc_id, content_hash FROM documents ORDER BY doc_id")]

    def rows_by_id(self, doc_ids: Sequence[str]) -> dict[str, DocumentRow]:
        """doc_id -> its :class:`DocumentRow`, for the ids that exist (one query per 500 ids)."""
        out: dict[str, DocumentRow] = {}
        ids = list(dict.fromkeys(doc_ids))
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            rows = self.ws.conn.execute(
                "SELECT doc_id, title, abstract, year, journal FROM documents WHERE doc_id IN "
                f"({','.join('?' * len(chunk))})", chunk)
            out.update({r["doc_id"]: DocumentRow(r["doc_id"], r["title"], r["abstract"], r["year"],
                                                 r["journal"]) for r in rows})
        return out

    def marker(self) -> tuple[int, str | None]:
        """(number of documents, latest ``updated_at``; None when there are none)."""
        n, last = self.ws.conn.execute("SELECT COUNT(*), MAX(updated_at) FROM documents").fetchone()
        return n, last

    def counts(self) -> tuple[int, int]:
        """(documents, KB relations)."""
        docs, rels = self.ws.conn.execute(
            "SELECT (SELECT COUNT(*) FROM documents), (SELECT COUNT(*) FROM relations)").fetchone()
        return int(docs), int(rels)

    def annotation_rows(self, doc_ids: Sequence[str],
                        types: Sequence[str]) -> list[AnnotationRow]:
        """The documents' annotations of ``types`` as :data:`AnnotationRow`, ids without the "-"
        placeholder."""
        if not doc_ids or not types:
            return []
        rows = self.ws.conn.execute(
            f"SELECT doc_id, text, type, ids FROM annotations WHERE doc_id IN "
            f"({','.join('?' * len(doc_ids))}) AND type IN ({','.join('?' * len(types))})",
            (*doc_ids, *types))
        return [(r["doc_id"], " ".join(r["text"].split()), r["type"],
                 tuple(i for i in json.loads(r["ids"] or "[]") if i and i != "-")) for r in rows]

    def annotation_types(self) -> list[tuple[str, str]]:
        """The distinct annotation types of each document.

        Returns:
            ``(doc_id, type)`` pairs, each once, types as stored (not lower-cased), in order.
        """
        return [(r[0], r[1]) for r in self.ws.conn.execute(
            "SELECT DISTINCT doc_id, type FROM annotations ORDER BY doc_id, type")]

    def ids(self) -> set[str]:
        """The ids of every document in the workspace."""
        return {r[0] for r in self.ws.conn.execute("SELECT doc_id FROM documents")}

    def titles(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id -> title of the documents the workspace holds (one query per 500 ids)."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, str] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            rows = self.ws.conn.execute("SELECT doc_id, title FROM documents WHERE doc_id IN "
                                        f"({','.join('?' * len(chunk))})", chunk)
            out.update({row["doc_id"]: row["title"] for row in rows})
        return out
