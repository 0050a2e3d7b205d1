"""The ``pubmed_searches`` and ``pubmed_hits`` tables: what each "Search PubMed" found.

One row per search (who ran it, when, the Entrez query, PubMed's count, how many records it
fetched and imported) and one row per PMID it took, in PubMed's relevance order. A hit's
``fetched_at`` is set when that search imported the document (it was new to the workspace): the
Curate page's cards say "from PubMed, DATE" for those, and a watch can tell new hits from
known ones. :class:`PubmedHits`, built on a workspace, holds the SQL; the search service
(:mod:`curation.pubmed.search`) records a search inside the transaction that imports its
documents, so both are kept or neither.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from curation.store.clock import utcnow
from curation.store.workspace import Workspace

_CHUNK = 500


@dataclass(frozen=True)
class PubmedSearch:
    """One recorded PubMed search.

    Attributes:
        id: The search's id.
        ran_at: When it ran (UTC, ISO 8601).
        actor: Who ran it (a user name, ``cli``).
        schema: The relation schema.
        query_key: The partial relation it searched for.
        pubmed_query: The Entrez query sent.
        hit_count: How many records PubMed found in all.
        fetched: Records fetched (cache or network).
        imported: Records new to the workspace, imported by this search.
    """

    id: int
    ran_at: str
    actor: str
    schema: str
    query_key: str
    pubmed_query: str
    hit_count: int
    fetched: int
    imported: int

    @classmethod
    def from_row(cls, row: Any) -> PubmedSearch:
        return cls(**dict(row))


class PubmedHits:
    """The pubmed_searches and pubmed_hits tables."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def record(self, *, actor: str, schema: str, query_key: str, pubmed_query: str,
               hit_count: int, pmids: Sequence[str], fetched: int, imported: Collection[str],
               at: str | None = None) -> int:
        """Store one search and its PMIDs (in PubMed's order); ``imported``: the PMIDs it added
        to the workspace (their ``fetched_at`` is the search's time). Joins the caller's
        transaction when one is open. Returns the search's id."""
        at = at or utcnow()
        with self.ws.transaction():
            cur = self.ws.conn.execute(
                "INSERT INTO pubmed_searches(ran_at, actor, schema, query_key, pubmed_query, "
                "hit_count, fetched, imported) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (at, actor, schema, query_key, pubmed_query, hit_count, fetched, len(imported)))
            search_id = int(cur.lastrowid)
            new = set(imported)
            self.ws.conn.executemany(
                "INSERT INTO pubmed_hits(search_id, pmid, pubmed_rank, fetched_at) "
                "VALUES (?, ?, ?, ?)",
                [(search_id, pmid, rank, at if pmid in new else None)
                 for rank, pmid in enumerate(dict.fromkeys(pmids), start=1)])
        return search_id

    def fetch_dates(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """doc_id -> when a PubMed search first imported it (UTC, ISO 8601), for the documents
        a search imported."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, str] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i:i + _CHUNK]
            rows = self.ws.conn.execute(
                "SELECT pmid, MIN(fetched_at) FROM pubmed_hits WHERE fetched_at IS NOT NULL "
                f"AND pmid IN ({','.join('?' * len(chunk))}) GROUP BY pmid ORDER BY pmid", chunk)
            out.update({row[0]: row[1] for row in rows})
        return out

    def searches(self, schema: str | None = None, query_key: str | None = None,
                 limit: int = 20) -> list[PubmedSearch]:
        """The most recent searches first, of a schema and partial relation when given."""
        sql, args = "SELECT * FROM pubmed_searches WHERE 1 = 1", []
        for column, value in (("schema", schema), ("query_key", query_key)):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        rows = self.ws.conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit))
        return [PubmedSearch.from_row(r) for r in rows]

    def relation_documents(self, schema: str, query_key: str, limit: int = 10_000
                           ) -> list[str]:
        """The PMIDs any PubMed search of the relation found that are in the workspace (the
        screening queue adds them to the first stages' candidates), best PubMed rank first."""
        rows = self.ws.conn.execute(
            "SELECT h.pmid, MIN(h.pubmed_rank) AS best FROM pubmed_hits h "
            "JOIN pubmed_searches s ON s.id = h.search_id "
            "JOIN documents d ON d.doc_id = h.pmid "
            "WHERE s.schema = ? AND s.query_key = ? GROUP BY h.pmid ORDER BY best, h.pmid "
            "LIMIT ?", (schema, query_key, limit))
        return [str(r[0]) for r in rows]

    def hits(self, search_id: int) -> list[tuple[str, int, str | None]]:
        """(pmid, PubMed rank, fetched_at) of one search, in PubMed's order."""
        return [(r[0], int(r[1]), r[2]) for r in self.ws.conn.execute(
            "SELECT pmid, pubmed_rank, fetched_at FROM pubmed_hits WHERE search_id = ? "
            "ORDER BY pubmed_rank", (search_id,))]
