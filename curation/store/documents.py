"""The documents table, read side: a document's text in one place.

:func:`document_text` is the one definition of how a (title, abstract) becomes text for a model
(``"{title} {abstract}"`` unless a format says otherwise); :func:`document_texts` reads many,
:func:`all_document_parts` the whole corpus.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def all_document_parts(ws: Workspace, *, by_id: bool = False) -> list[tuple[str, str, str]]:
    """Every document as ``(doc_id, title, abstract)``: in doc_id order with ``by_id`` (index
    builds), else in the database's order (what the seeded training samplers were built on)."""
    sql = "SELECT doc_id, title, abstract FROM documents" + (" ORDER BY doc_id" if by_id else "")
    return [(r[0], r[1], r[2]) for r in ws.conn.execute(sql).fetchall()]


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


def document_texts(ws: Workspace, doc_ids: Sequence[str],
                   document_format: str = PLAIN_FORMAT) -> list[str]:
    """The texts of ``doc_ids``, in order.

    Raises:
        CurationError: A document is not in the workspace (names up to five of them).
    """
    parts = document_parts(ws, doc_ids)
    missing = [d for d in doc_ids if d not in parts]
    if missing:
        raise CurationError(f"{len(missing)} document(s) are not in the workspace "
                            f"({', '.join(missing[:5])}); re-import them or drop their labels")
    return [document_text(*parts[d], document_format) for d in doc_ids]
