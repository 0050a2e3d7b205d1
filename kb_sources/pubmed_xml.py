"""PubMed XML reader: efetch output, baseline/update files and 2016-style MEDLINE citation sets.

Streams the file with :func:`defusedxml.ElementTree.iterparse` (entity declarations and external
references refused; the usual ``<!DOCTYPE PubmedArticleSet PUBLIC ...>`` line is fine) and
turns each ``PubmedArticle`` (or top-level ``MedlineCitation``) into a
:class:`~kb_sources.types.Document`.
Processed elements are cleared, so memory stays flat on 30,000-article baseline files.

Extracted fields: PMID, ArticleTitle and AbstractText (inline markup such as ``<i>`` flattened,
whitespace collapsed, abstract sections joined by one space), journal title, publication year
(``PubDate/Year``, else the first year in ``MedlineDate``), MeSH descriptor names, and cited PMIDs
(``ReferenceList`` ``ArticleId[@IdType='pubmed']`` plus ``CommentsCorrections[@RefType='Cites']``).

The parsing core (:func:`parse_pubmed_xml`, :func:`iter_article_elements`,
:func:`article_to_document`) works on any binary stream, so :mod:`kb_sources.fetch` parses
E-utilities responses with the same code.
"""

from __future__ import annotations

import gzip
import logging
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException, EntitiesForbidden
from defusedxml.ElementTree import iterparse

from kb_sources.checks import check_text, is_pmid
from kb_sources.errors import InputFormatError
from kb_sources.io import open_binary, refuse_binary
from kb_sources.read_stats import ReadStats
from kb_sources.types import Document

logger = logging.getLogger(__name__)

#: Root elements this reader accepts.
ROOT_TAGS = ("PubmedArticleSet", "MedlineCitationSet")
#: Children of the root that are turned into documents.
RECORD_TAGS = ("PubmedArticle", "MedlineCitation")
#: Most bytes read for one record; PubMed's largest articles (thousands of authors and
#: references) are a few MB. Bounds memory on a small gzip that expands to one huge element.
MAX_RECORD_BYTES = 64_000_000

# Only ASCII whitespace (pretty-printing); non-breaking and thin spaces are text.
_SPACES = re.compile(r"[ \t\r\n]+")
_YEAR = re.compile(r"\b(1[5-9]\d\d|2\d\d\d)\b")

# An ElementTree element (the pure-Python class defusedxml builds); typed loosely on purpose.
Element = Any


def read_pubmed_xml(
    path: str | Path, *, abstract_labels: bool = False, source: str = "pubmed-xml",
    stats: ReadStats | None = None,
) -> Iterator[Document]:
    """Read PubMed XML (plain or gzip) as documents.

    Args:
        path: A ``PubmedArticleSet`` (efetch, baseline/update file) or ``MedlineCitationSet``.
        abstract_labels: Prefix structured-abstract sections with their label
            ("METHODS: ..."). Off by default, so the text matches other corpora of the same
            abstracts (PubTator, the abstract pool).
        source: Source label stored on every document.
        stats: Accepted for the common reader signature; nothing is skipped silently here.

    Returns:
        An iterator of documents in file order (book articles and deletions are skipped).

    Raises:
        InputFormatError: Missing/empty/truncated file, a binary file, malformed XML (with its
            line), entity declarations, an unexpected root element, an article without a numeric
            PMID, or one record over :data:`MAX_RECORD_BYTES`.
    """
    p = Path(path)
    refuse_non_pubmed(p)
    with open_binary(p) as fh:
        yield from parse_pubmed_xml(fh, p, abstract_labels=abstract_labels, source=source)


def refuse_non_pubmed(path: Path) -> None:
    """Refuse a binary file given to a PubMed reader (MEDLINE text or XML), naming it.

    Raises:
        InputFormatError: The file is binary or not decodable as UTF-8 text.
    """
    refuse_binary(
        path, "MEDLINE/PubMed data (text or XML)",
        expected="MEDLINE text ('PMID- 123', 'TI  - title', ...) or PubMed XML "
        "(<PubmedArticleSet>), plain or gzip",
        fix="check that this is the file you meant; export from PubMed with 'Save > Format: "
        "PubMed' (reader medline) or download XML with efetch (reader pubmed-xml)",
    )


def parse_pubmed_xml(
    stream: IO[bytes], name: str | Path, *, abstract_labels: bool = False,
    source: str = "pubmed-xml",
) -> Iterator[Document]:
    """Parse PubMed XML from a binary stream (a file, a gzip stream or ``io.BytesIO``).

    Args:
        stream: Binary stream positioned at the start of the XML.
        name: File name or URL used in error messages.
        abstract_labels: See :func:`read_pubmed_xml`.
        source: Source label stored on every document.

    Raises:
        InputFormatError: As for :func:`read_pubmed_xml`.
    """
    for index, element in enumerate(iter_article_elements(stream, name), start=1):
        yield article_to_document(
            element, name, index=index, abstract_labels=abstract_labels, source=source
        )


def iter_article_elements(
    stream: IO[bytes], name: str | Path, tags: tuple[str, ...] = RECORD_TAGS, *,
    clean: Callable[[str], str] = str,
) -> Iterator[Element]:
    """Yield each ``PubmedArticle`` / top-level ``MedlineCitation`` element of a stream.

    An element is cleared as soon as the consumer asks for the next one: use (or serialise) it
    before advancing.

    Args:
        stream: Binary stream positioned at the start of the XML.
        name: File name or URL used in error messages.
        tags: Children of the root to yield (others are counted and skipped); the baseline
            reader (:mod:`kb_sources.pubmed_baseline`) adds ``DeleteCitation``.
        clean: Applied to the log line naming skipped elements, whose tags are the file's
            text (:mod:`kb_sources.fetch` passes :func:`kb_sources.eutils.redact`).

    Raises:
        InputFormatError: Malformed XML (with line and column), entity declarations or external
            references, truncated gzip data, or an unexpected root element.
    """
    try:
        yield from _iter_records(_BoundedStream(stream, name), name, tags, clean)
    except EntitiesForbidden as exc:
        raise InputFormatError(
            name, f"entity declarations are refused (found <!ENTITY {exc.name} ...>)",
            expected="PubMed XML, which never declares entities",
            fix="remove the internal subset ('[ ... ]') from the DOCTYPE line or re-download "
            "the file from PubMed",
        ) from exc
    except DefusedXmlException as exc:
        raise InputFormatError(
            name, f"external entity references are refused ({exc})",
            expected="PubMed XML without external entities",
            fix="re-download the file from PubMed",
        ) from exc
    except ParseError as exc:
        line, column = exc.position
        raise InputFormatError(
            name, f"malformed XML at column {column + 1}: {_parse_problem(exc)}", line=line,
            expected="well-formed PubMed XML (UTF-8)",
            fix="re-download the file; if you edited it, check the tags near this line",
        ) from exc
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputFormatError(
            name, f"compressed data is truncated or corrupt ({exc})",
            expected="a complete gzip file", fix="re-download or re-compress the file",
        ) from exc


class _BoundedStream:
    """A binary stream that refuses to read more than :data:`MAX_RECORD_BYTES` per record.

    The parser holds a whole record in memory, so without a bound a small gzip that expands to
    one huge element would fill the memory before any check could run. ``_iter_records`` calls
    :meth:`record_done` after each record.
    """

    def __init__(self, stream: IO[bytes], name: str | Path) -> None:
        self._stream = stream
        self._name = name
        self._total = 0
        self._record_start = 0
        self.records = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size if size is not None and size >= 0 else 1 << 16)
        self._total += len(data)
        if self._total - self._record_start > MAX_RECORD_BYTES:
            raise InputFormatError(
                self._name, f"record #{self.records + 1} is longer than {MAX_RECORD_BYTES:,} "
                f"bytes (reading stopped at byte {self._total:,})",
                expected=f"PubMed records of at most {MAX_RECORD_BYTES:,} bytes each",
                fix="check that the file is PubMed XML and not corrupted (a missing closing tag "
                "or a huge text node)",
            )
        return data

    def record_done(self) -> None:
        self._record_start = self._total
        self.records += 1


def _iter_records(stream: _BoundedStream, name: str | Path, tags: tuple[str, ...],
                  clean: Callable[[str], str]) -> Iterator[Element]:
    root = None
    depth = 0
    skipped: dict[str, int] = {}
    for event, elem in iterparse(stream, events=("start", "end"), forbid_entities=True,
                                 forbid_external=True):
        if event == "start":
            if root is None:
                _check_root(elem, name)
                root = elem
            depth += 1
            continue
        depth -= 1
        if depth != 1:
            continue
        stream.record_done()
        if elem.tag in tags:
            yield elem
        else:
            skipped[elem.tag] = skipped.get(elem.tag, 0) + 1
        elem.clear()
        root.clear()
    if skipped:
        shown = ", ".join(f"{n} <{t}>" for t, n in skipped.items())
        logger.info("%s: skipped %s", name, clean(shown))


def _check_root(elem: Element, name: str | Path) -> None:
    if elem.tag not in ROOT_TAGS:
        raise InputFormatError(
            name, f"root element is <{elem.tag}>",
            expected=f"<{ROOT_TAGS[0]}> (efetch, baseline files) or <{ROOT_TAGS[1]}>",
            fix="export the records from PubMed as XML (efetch retmode=xml)",
        )


def _parse_problem(exc: ParseError) -> str:
    message = str(exc).split(":", 1)[0]
    if "invalid token" in message:
        message += " (a stray '<' or '&', a NUL byte, or bytes that are not UTF-8)"
    return message


def article_to_document(
    element: Element, name: str | Path, *, index: int = 0, abstract_labels: bool = False,
    source: str = "pubmed-xml",
) -> Document:
    """Convert one ``PubmedArticle`` or ``MedlineCitation`` element into a document.

    Args:
        element: The record element.
        name: File name or URL used in error messages.
        index: 1-based position of the record in its file (for errors when the PMID is missing).
        abstract_labels: Prefix abstract sections with their label.
        source: Source label stored on the document.

    Raises:
        InputFormatError: No numeric PMID, or a field over
            :data:`~kb_sources.checks.MAX_FIELD_CHARS`.
    """
    citation = element if element.tag == "MedlineCitation" else element.find("MedlineCitation")
    pmid = flat_text(citation.find("PMID")) if citation is not None else ""
    if not is_pmid(pmid):
        raise InputFormatError(
            name, f"article has no numeric PMID (found {pmid[:40]!r})", record=f"#{index}",
            expected="<MedlineCitation><PMID>digits</PMID>", fix="re-download the record",
        )
    article = citation.find("Article")
    if article is None:
        article = citation  # no <Article>: every find below returns None
    title = flat_text(article.find("ArticleTitle")) or flat_text(article.find("VernacularTitle"))
    abstract = _abstract(article.find("Abstract"), abstract_labels)
    for field_name, value in (("ArticleTitle", title), ("AbstractText", abstract)):
        check_text(name, field_name, value, record=pmid)
    journal = flat_text(article.find("Journal/Title")) or flat_text(
        citation.find("MedlineJournalInfo/MedlineTA")
    )
    return Document(
        doc_id=pmid,
        title=title,
        abstract=abstract,
        source=source,
        journal=journal,
        year=_year(article),
        mesh=_unique(flat_text(d) for d in citation.iterfind(
            "MeshHeadingList/MeshHeading/DescriptorName")),
        references=_references(element, citation),
    )


def _abstract(abstract: Element | None, labels: bool) -> str:
    if abstract is None:
        return ""
    parts = []
    for section in abstract.iterfind("AbstractText"):
        text = flat_text(section)
        label = section.get("Label")
        if text and labels and label:
            text = f"{label}: {text}"
        if text:
            parts.append(text)
    return " ".join(parts)


def _year(article: Element) -> int | None:
    candidates = (
        article.findtext("Journal/JournalIssue/PubDate/Year"),
        article.findtext("Journal/JournalIssue/PubDate/MedlineDate"),
        article.findtext("ArticleDate/Year"),
    )
    for text in candidates:
        match = _YEAR.search(text or "")
        if match:
            return int(match.group(1))
    return None


def _references(element: Element, citation: Element) -> tuple[str, ...]:
    ids: list[str] = []
    if element.tag == "PubmedArticle":
        ids += [flat_text(a) for a in element.iterfind(
            "PubmedData//ReferenceList/Reference/ArticleIdList/ArticleId[@IdType='pubmed']")]
    ids += [flat_text(p) for p in citation.iterfind(
        "CommentsCorrectionsList/CommentsCorrections[@RefType='Cites']/PMID")]
    return _unique(i for i in ids if is_pmid(i))


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def flat_text(element: Element | None) -> str:
    """All text inside an element (inline markup flattened), ASCII whitespace runs collapsed."""
    if element is None:
        return ""
    return collapse_spaces("".join(element.itertext()))


def collapse_spaces(text: str) -> str:
    """Collapse runs of ASCII whitespace (line wrapping, indentation) to one space and strip.

    Non-breaking and thin spaces are kept: they are part of the text.
    """
    return _SPACES.sub(" ", text).strip()
