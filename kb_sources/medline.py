"""MEDLINE text reader (PubMed "Save > Format: PubMed" export, ``PMID- / TI  - / AB  -`` tags).

Lines are read through :func:`kb_sources.io.iter_lines` (gzip, strict UTF-8, line-length limit),
checked for the ``TAG - value`` layout, and parsed with :func:`Bio.Medline.parse`.

Mapping: ``PMID`` -> doc_id, ``TI`` -> title, ``AB`` -> abstract, ``JT`` (else ``TA``) -> journal,
``DP`` -> year, ``MH`` -> MeSH descriptor names (major-topic ``*`` and ``/qualifier`` parts
removed: ``Sequence Alignment/*methods`` -> ``Sequence Alignment``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from Bio import Medline

from kb_sources.checks import check_text, is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import iter_lines
from kb_sources.pubmed_xml import collapse_spaces, refuse_non_pubmed
from kb_sources.read_stats import DuplicateCheck, ReadStats
from kb_sources.types import Document

logger = logging.getLogger(__name__)

_YEAR = re.compile(r"\b(1[5-9]\d\d|2\d\d\d)\b")
_CONTINUATION = "      "


def read_medline(
    path: str | Path, *, source: str = "medline", stats: ReadStats | None = None
) -> Iterator[Document]:
    """Read a MEDLINE text file (plain or gzip) as documents.

    Args:
        path: File of MEDLINE records separated by blank lines.
        source: Source label stored on every document.
        stats: Collects skipped repeats (see :mod:`kb_sources.read_stats`).

    Returns:
        An iterator of documents in file order. A PMID repeated with an identical record is
        skipped and counted in ``stats``; repeated with a different record it is refused.

    Raises:
        InputFormatError: Missing/empty/truncated file, a binary file, invalid UTF-8, a line that
            is not ``TAG - value`` (with its line number), a record without a numeric PMID, an
            over-long field, or a PMID repeated with different content.
    """
    p = Path(path)
    stats = stats if stats is not None else ReadStats(p)
    refuse_non_pubmed(p)
    repeats = DuplicateCheck(p, stats, what="PMID",
                             fix="keep one record per PMID (delete or merge the other)")
    lines = _MedlineLines(p, iter_lines(p))
    for record in Medline.parse(lines):
        document = _to_document(record, p, lines.record_start, source)
        if not repeats.is_repeat(document.doc_id, document, line=lines.record_start):
            yield document
    stats.log_summary()


class _MedlineLines:
    """Checks the MEDLINE line layout and remembers where the current record started."""

    def __init__(self, path: Path, lines: Iterable[tuple[int, str]]) -> None:
        self.path = path
        self.lines = lines
        self.record_start = 0

    def __iter__(self) -> Iterator[str]:
        in_record = False
        for line_no, line in self.lines:
            if not line.strip():
                in_record = False
                yield "\n"
                continue
            if line.startswith(_CONTINUATION):
                if not in_record:
                    self._fail(line_no, line, "continuation line outside a record")
            elif not _is_tag_line(line):
                self._fail(line_no, line, "not a 'TAG - value' line")
            elif not in_record:
                in_record = True
                self.record_start = line_no
            yield line + "\n"

    def _fail(self, line_no: int, line: str, problem: str) -> None:
        raise InputFormatError(
            self.path, f"{problem}: {line[:60]!r}", line=line_no,
            expected="MEDLINE text: 'PMID- 123', 'TI  - title', continuation lines indented "
            "by 6 spaces, records separated by a blank line",
            fix="export from PubMed with 'Save > Format: PubMed', or pick the reader that "
            "matches this file",
        )


def _is_tag_line(line: str) -> bool:
    tag = line[:4].rstrip()
    return bool(tag) and tag.replace(" ", "").isalnum() and line[4:6] in ("- ", "-")


def _to_document(record: dict, path: Path, line: int, source: str) -> Document:
    pmid = _text(record.get("PMID"))
    if not is_pmid(pmid):
        raise InputFormatError(
            path, f"record has no numeric PMID (found {pmid[:40]!r})", line=line,
            expected="a 'PMID- digits' line in every record",
            fix="check that records are separated by exactly one blank line",
        )
    title = _text(record.get("TI"))
    abstract = _text(record.get("AB"))
    for field_name, value in (("TI", title), ("AB", abstract)):
        check_text(path, field_name, value, line=line, record=pmid)
    year = _YEAR.search(_text(record.get("DP")))
    return Document(
        doc_id=pmid,
        title=title,
        abstract=abstract,
        source=source,
        journal=_text(record.get("JT")) or _text(record.get("TA")),
        year=int(year.group(1)) if year else None,
        mesh=tuple(dict.fromkeys(h for h in map(mesh_descriptor, record.get("MH", [])) if h)),
    )


def _text(value: str | list[str] | None) -> str:
    """A Medline field as one string (Bio joins text keys already; others arrive as lists)."""
    if value is None:
        return ""
    if isinstance(value, list):
        value = " ".join(value)
    return collapse_spaces(value)


def mesh_descriptor(heading: str) -> str:
    """Descriptor name of an ``MH`` value.

    ``'Sequence Alignment/*methods'`` -> ``'Sequence Alignment'``;
    ``'*Software'`` -> ``'Software'``.
    """
    return heading.split("/", 1)[0].strip().lstrip("*").strip()
