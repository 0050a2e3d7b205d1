"""Citation edges: which PMID cites which (TSV with a header).

Accepted layouts (extra columns such as ``link_type`` and ``source_file`` are ignored)::

    citing_pmid<TAB>cited_pmid
    19127292<TAB>17363749

The BiCA recipe walks this graph for hard negatives; edges from PubMed XML reference lists and
E-utilities ``elink`` (:func:`kb_sources.fetch.elink_citations`) have the same shape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from kb_sources.checks import is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_tsv

logger = logging.getLogger(__name__)

#: Columns a citation-edge file must have.
CITATION_COLUMNS = ("citing_pmid", "cited_pmid")


def read_citation_edges(path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield ``(citing_pmid, cited_pmid)`` pairs in file order (plain or gzip TSV).

    Args:
        path: TSV with a ``citing_pmid`` / ``cited_pmid`` header; the first paper cites the
            second.

    Raises:
        InputFormatError: Missing/empty/truncated file, a header without the two columns, or a
            value that is not a PMID (the message names the file and line).
    """
    p = Path(path)
    for line_no, row in iter_tsv(p, CITATION_COLUMNS, format_name="citation edge TSV"):
        citing, cited = row["citing_pmid"].strip(), row["cited_pmid"].strip()
        for column, value in zip(CITATION_COLUMNS, (citing, cited), strict=True):
            if not is_pmid(value):
                raise InputFormatError(
                    p, f"{column} {value!r} is not a PMID", line=line_no,
                    expected="digits in both columns (e.g. 19127292<TAB>17363749)",
                    fix="strip prefixes such as 'paper:' or 'PMID:' and drop rows without a "
                    "PubMed id",
                )
        yield citing, cited
