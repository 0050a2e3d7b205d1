"""Citation edges fetched online (NCBI elink) into the ``citations`` table.

The file import of citation edges is :func:`curation.store.importer.import_citations`; this is
the same insert for edges that come from elsewhere (``kbcurate fetch citations``).
"""

from __future__ import annotations

from collections.abc import Iterable

from curation.store.importer import insert_pairs
from curation.store.workspace import Workspace


def insert_citation_edges(ws: Workspace, edges: Iterable[tuple[str, str]], *, reader: str,
                          path: str, actor: str) -> int:
    """Add (citing PMID, cited PMID) edges, known ones ignored (one audited import run).

    Args:
        ws: The workspace.
        edges: The edges.
        reader, path, actor: How the import run is recorded (e.g. ``elink``,
            ``elink:12 PMIDs``, ``cli``).

    Returns:
        The number of edges added.
    """
    return insert_pairs(ws, "INSERT OR IGNORE INTO citations(citing, cited) VALUES (?, ?)",
                        edges, reader=reader, path=path, actor=actor)
