"""Citation edges: the ``citations`` table, and the PMIDs the KB relations cite.

:class:`Citations`, built on a workspace (``Citations(ws)``), holds their SQL. The file import of
citation edges is :func:`curation.store.importer.import_citations`; :meth:`Citations.insert` is
the same insert for edges fetched online (NCBI elink, ``kbcurate fetch citations``);
:meth:`Citations.edges` reads every edge (BiCA's citation graph) and
:meth:`Citations.cited_by_query` the PMIDs cited per query key.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from curation.store.importer import insert_pairs
from curation.store.workspace import Workspace


class Citations:
    """The citations table: KB citation edges between documents."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def cited_by_query(self, schema: str) -> dict[str, set[str]]:
        """query_key -> PMIDs that the schema's KB relations with that query key cite."""
        out: dict[str, set[str]] = defaultdict(set)
        for key, pmid in self.ws.conn.execute(
                "SELECT r.query_key, p.pmid FROM relations r JOIN relation_pmids p "
                "ON p.relation_id = r.id WHERE r.schema = ?", (schema,)):
            out[key].add(pmid)
        return dict(out)

    def insert(self, edges: Iterable[tuple[str, str]], *, reader: str,
                              path: str, actor: str) -> int:
        """Add (citing PMID, cited PMID) edges, known ones ignored (one audited import run).

        Args:
            edges: The edges.
            reader, path, actor: How the import run is recorded (e.g. ``elink``,
                ``elink:12 PMIDs``, ``cli``).

        Returns:
            The number of edges added.
        """
        return insert_pairs(self.ws, "INSERT OR IGNORE INTO citations(citing, cited) VALUES (?, ?)",
                            edges, reader=reader, path=path, actor=actor)

    def edges(self) -> list[tuple[str, str]]:
        """Distinct citing -> cited edges with both ends in the workspace (no self-citations).

        Returns:
            ``(citing, cited)`` doc id pairs, sorted.
        """
        return [(a, b) for a, b in self.ws.conn.execute(
            "SELECT c.citing, c.cited FROM citations c "
            "JOIN documents x ON x.doc_id = c.citing JOIN documents y ON y.doc_id = c.cited "
            "WHERE c.citing != c.cited ORDER BY c.citing, c.cited")]
