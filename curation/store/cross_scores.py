"""The ``cross_scores`` table: the cross-encoder's scores, cached per version, query and document
(issue 45).

A cross-encoder reads the query and the abstract together, one transformer pass per pair: far too
slow for a page, so its scores are computed in the background (the ``cross_scores`` job of
:mod:`curation.search.cross_scores`) and the learned ranker reads them from here as a feature. A
row is keyed by

* ``model``: the cross version and its weights (:func:`model_key`: "disease_gene-cross@2:
  3fa4c1d2e5b6"), so a retrained version never reads another's scores;
* ``query``: a hash of the query text the cross-encoder read (:func:`text_key`; whitespace
  folded), so a relation's template text and a curator's edited question are kept apart;
* ``doc_id``, with the ``content_hash`` the document had when it was read: a score whose
  document changed since no longer counts (it is read again), and removing a document removes
  its scores.

:class:`CrossScores`, built on a workspace, holds the SQL. A score that is not here is a missing
feature, never an error. :meth:`CrossScores.active_version` finds a schema's active cross
version (a workspace setting beside the schema's active dense version).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence

from curation.store.models import CROSS_KIND, Models, ModelVersion
from curation.store.settings import Settings
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

#: The ``meta`` key naming a schema's active cross-encoder version (its registry status stays
#: ``candidate``: ``Models.active`` keeps naming the dense version; set by
#: :func:`curation.training.cross_versions.activate_cross`).
ACTIVE_KEY = "cross_active:{schema}"

_CHUNK = 400


def text_key(text: str) -> str:
    """The cache key of a query text: SHA-256 of its words joined by single spaces (24 hex)."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:24]


def model_key(version: ModelVersion) -> str:
    """The cache key of a cross version: its id and the first 12 hex digits of its weights'
    SHA-256 ("disease_gene-cross@2:3fa4c1d2e5b6")."""
    return f"{version.id}:{version.sha256[:12]}"


def is_cross_version(version: ModelVersion) -> bool:
    """Whether a registered version is a cross-encoder (manifest ``kind`` ``"cross"``)."""
    return version.manifest.get("kind") == CROSS_KIND


class CrossScores:
    """The cross_scores table."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def put_many(self, model: str, text: str, scores: Mapping[str, float]) -> int:
        """Store the scores of one query's documents (replacing older ones); documents no longer
        in the workspace are skipped. One transaction. Returns the rows written.

        Raises:
            CurationError: An empty model key or query text, or a score that is not a finite
                number (nothing is written then).
        """
        if not model.strip() or not text.strip():
            raise CurationError(f"A cross score needs a model key and a query text, got "
                                f"model={model!r}, text={text!r}")
        bad = {d: s for d, s in scores.items()
               if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s)}
        if bad:
            doc, value = next(iter(bad.items()))
            raise CurationError(f"Cross scores must be finite numbers; {len(bad)} are not (e.g. "
                                f"{doc}: {value!r}); nothing was stored")
        query = text_key(text)
        with self.ws.transaction():
            cur = self.ws.conn.executemany(
                "INSERT INTO cross_scores(model, query, doc_id, doc_hash, score) "
                "SELECT ?, ?, doc_id, content_hash, ? FROM documents WHERE doc_id = ? "
                "ON CONFLICT(model, query, doc_id) DO UPDATE SET doc_hash = excluded.doc_hash, "
                "score = excluded.score",
                [(model, query, float(s), d) for d, s in scores.items()])
        return max(int(cur.rowcount or 0), 0) if len(scores) else 0

    def get_many(self, model: str, text: str, doc_ids: Iterable[str]) -> dict[str, float]:
        """doc_id -> cached score of the query text, for the documents that have one read from
        their current content (the others are simply absent)."""
        ids = list(dict.fromkeys(doc_ids))
        query = text_key(text)
        out: dict[str, float] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            rows = self.ws.conn.execute(
                "SELECT c.doc_id, c.score FROM cross_scores c JOIN documents d "
                "ON d.doc_id = c.doc_id AND d.content_hash = c.doc_hash "
                f"WHERE c.model = ? AND c.query = ? AND c.doc_id IN ({','.join('?' * len(chunk))})",
                (model, query, *chunk))
            out.update({str(r[0]): float(r[1]) for r in rows})
        return out

    def scored_docs(self, model: str, text: str) -> dict[str, float]:
        """doc_id -> cached score of every document of the query text that has one read from
        its current content."""
        rows = self.ws.conn.execute(
            "SELECT c.doc_id, c.score FROM cross_scores c JOIN documents d "
            "ON d.doc_id = c.doc_id AND d.content_hash = c.doc_hash "
            "WHERE c.model = ? AND c.query = ? ORDER BY c.doc_id", (model, text_key(text)))
        return {str(r[0]): float(r[1]) for r in rows}

    def missing(self, model: str, text: str, doc_ids: Sequence[str]) -> list[str]:
        """The ids among ``doc_ids`` without a current cached score, in their order."""
        have = self.get_many(model, text, doc_ids)
        return [d for d in dict.fromkeys(doc_ids) if d not in have]

    def scored_texts(self, model: str, texts: Iterable[str]) -> int:
        """How many of these query texts have at least one cached score of ``model``."""
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        found = 0
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i:i + _CHUNK]
            found += int(self.ws.conn.execute(
                "SELECT COUNT(DISTINCT query) FROM cross_scores WHERE model = ? AND query IN "
                f"({','.join('?' * len(chunk))})", (model, *chunk)).fetchone()[0])
        return found

    def active_version(self, schema: str) -> ModelVersion | None:
        """The schema's active cross-encoder version (:data:`ACTIVE_KEY`), or None: none set,
        or it is gone, retired or no cross-encoder (then the ranker's cross features are
        missing, never an error)."""
        ident = Settings(self.ws).value(ACTIVE_KEY.format(schema=schema))
        if not ident or not Models(self.ws).is_version(ident):
            return None
        version = Models(self.ws).get(ident)
        ok = is_cross_version(version) and version.status.value != "retired"
        return version if ok else None

    def count(self, model: str | None = None) -> int:
        """Cached scores (of one model key when given)."""
        if model is None:
            return int(self.ws.conn.execute("SELECT COUNT(*) FROM cross_scores").fetchone()[0])
        return int(self.ws.conn.execute("SELECT COUNT(*) FROM cross_scores WHERE model = ?",
                                        (model,)).fetchone()[0])
