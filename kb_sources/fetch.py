"""Online fetchers: PubMed search and records and citation links from NCBI E-utilities.

Parsers never touch the network; these functions do, and only when called. Every E-utilities
request goes through :func:`kb_sources.eutils_http.eutils_request` (the configurable base URL
``$KBCURATE_EUTILS_URL``, ``tool``/``email``/``api_key`` from :class:`EntrezSettings` on every
request, a :class:`Throttle` shared with the other processes of the cache folder, time-outs, a
deadline and a size limit per call, redirects only within the base URL's origin, retries with
backoff, ``<ERROR>`` answers as :class:`EutilsError`). An error raised while reading an answer
quotes the server's text: it comes again through :func:`kb_sources.eutils.redacting` (no key,
no e-mail, nothing chained).

- :func:`esearch`: PubMed ids for a query, in relevance order, with the history server's
  ``WebEnv``/``query_key`` (:class:`SearchHistory`). At most ``retmax`` ids are kept, each
  once, in the order of the answer (a server sending more is logged); ``<Count>`` and
  ``<RetStart>`` must be ASCII digits (at most 12), else :class:`FetchError`; the answer may
  be at most :data:`ESEARCH_MAX_BYTES`;
- :func:`fetch_pubmed`: records by PMID (efetch, batches of :data:`EFETCH_BATCH`; POST from 200
  ids on); :func:`fetch_pubmed_history`: records of a search by its ``WebEnv``;
- :func:`elink_citations`: the PMIDs a paper cites.

An efetch answer yields only the PMIDs asked for: by id, those of the batch; by ``WebEnv``, the
ids esearch listed for those positions (``expected``). Other records, and further copies of a
PMID (the first is kept), are dropped before anything is cached, with a warning naming them.

Records and links are cached as plain files (one per PMID) when ``cache_dir`` is set:

- ``cache_dir/pubmed/<pmid>.xml``: the article as a one-record ``PubmedArticleSet`` (readable
  by :func:`kb_sources.pubmed_xml.read_pubmed_xml`);
- ``cache_dir/elink-<linkname>/<pmid>.json``: ``{"pmid", "linkname", "cited": [...]}``.

Responses are parsed with defusedxml (no entity expansion). The CIViC nightly download lives in
:mod:`kb_sources.civic_download` (re-exported here).
"""

from __future__ import annotations

import io
import json
import logging
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from kb_sources.checks import is_pmid
from kb_sources.civic_download import CIVIC_NIGHTLY_URL, download_civic_nightly
from kb_sources.eutils import (
    DEFAULT_EUTILS_URL,
    EUTILS_URL_ENV,
    EntrezSettings,
    EutilsError,
    FetchError,
    Throttle,
    ascii_number,
    eutils_base_url,
    redact,
    redacting,
    redacting_iter,
)
from kb_sources.eutils_http import eutils_request
from kb_sources.fetch_cache import RecordCache, cached_pmids, pubmed_cache
from kb_sources.pubmed_xml import article_to_document, iter_article_elements, read_pubmed_xml
from kb_sources.types import Document

__all__ = ["CIVIC_NIGHTLY_URL", "DEFAULT_EUTILS_URL", "EFETCH_BATCH", "EFETCH_SOURCE",
           "EUTILS_BASE_URL", "EUTILS_URL_ENV", "ELINK_BATCH", "ESEARCH_MAX", "ESEARCH_MAX_BYTES",
           "EntrezSettings", "EsearchResult", "EutilsError", "FetchError", "SearchHistory",
           "Throttle", "cached_pmids", "download_civic_nightly", "elink_citations", "esearch",
           "eutils_base_url", "fetch_pubmed", "fetch_pubmed_history"]

logger = logging.getLogger(__name__)

#: NCBI's E-utilities (the default of ``$KBCURATE_EUTILS_URL``).
EUTILS_BASE_URL = DEFAULT_EUTILS_URL
#: PMIDs per efetch request (NCBI recommends POST and at most a few hundred ids per call).
EFETCH_BATCH = 200
#: PMIDs per elink request.
ELINK_BATCH = 100
#: Most ids one esearch request may return (NCBI's limit for ``retmax``).
ESEARCH_MAX = 10_000
#: Largest esearch answer (bytes; 10,000 ids are about 200 KB). It is parsed whole.
ESEARCH_MAX_BYTES = 4 << 20
#: PMIDs named in a warning about dropped records.
NAMED_IN_WARNINGS = 5
#: Source label of fetched documents.
EFETCH_SOURCE = "pubmed-efetch"
#: Dates esearch's ``datetype`` may filter on (Entrez, publication, modification dates).
DATE_TYPES = ("edat", "pdat", "mdat")


@dataclass(frozen=True)
class SearchHistory:
    """Where the E-utilities history server keeps a search's result (``WebEnv``, ``query_key``)."""

    webenv: str
    query_key: str


@dataclass(frozen=True)
class EsearchResult:
    """One esearch answer.

    Attributes:
        term: The query as sent.
        count: How many records match in all (``ids`` holds at most ``retmax`` of them).
        ids: The PMIDs of this page, in the requested order (relevance by default).
        retstart: Position of the first id in the whole result.
        history: The result on the history server (None without ``usehistory``).
        translation: How PubMed read the query (``QueryTranslation``).
        warnings: Phrases PubMed did not find and other notes (``ErrorList``/``WarningList``).
    """

    term: str
    count: int
    ids: tuple[str, ...]
    retstart: int = 0
    history: SearchHistory | None = None
    translation: str = ""
    warnings: tuple[str, ...] = ()


def esearch(
    term: str, settings: EntrezSettings, *, throttle: Throttle | None = None,
    retmax: int = 200, retstart: int = 0, sort: str = "relevance", usehistory: bool = True,
    mindate: str | None = None, maxdate: str | None = None, datetype: str = "edat",
) -> EsearchResult:
    """Search PubMed (esearch, XML answer).

    Args:
        term: An Entrez query ("BRAF[tiab] AND V600E[tiab]").
        settings: E-utilities settings.
        throttle: Share one throttle between calls; by default the call makes its own.
        retmax: Ids to return (1 to :data:`ESEARCH_MAX`).
        retstart: Position of the first id to return.
        sort: PubMed's order ("relevance", "pub_date", ...; "" for PubMed's default).
        usehistory: Keep the result on the history server (for :func:`fetch_pubmed_history`).
        mindate: Earliest date (YYYY, YYYY/MM or YYYY/MM/DD); needs ``maxdate`` too.
        maxdate: Latest date.
        datetype: Which date the range filters on (``edat``: added to PubMed).

    Raises:
        FetchError: Empty term, bad arguments, a failed request or an unreadable answer.
        EutilsError: E-utilities answered with an error message (an invalid query).
    """
    if not term.strip():
        raise FetchError("The PubMed query is empty. Fix: fill at least one slot or type a query")
    if not 1 <= retmax <= ESEARCH_MAX or retstart < 0:
        raise FetchError(f"esearch: retmax {retmax} / retstart {retstart} out of range; expected "
                         f"1 <= retmax <= {ESEARCH_MAX} and retstart >= 0")
    if (mindate is None) != (maxdate is None) or datetype not in DATE_TYPES:
        raise FetchError("esearch: give both mindate and maxdate (or neither) and a datetype of "
                         + ", ".join(DATE_TYPES))
    params: dict[str, str | int] = {"db": "pubmed", "term": term, "retmode": "xml",
                                    "retmax": retmax, "retstart": retstart}
    if sort:
        params["sort"] = sort
    if usehistory:
        params["usehistory"] = "y"
    if mindate is not None and maxdate is not None:
        params.update(mindate=mindate, maxdate=maxdate, datetype=datetype)
    data = eutils_request("esearch.fcgi", settings, throttle or Throttle.for_settings(settings),
                          params, max_bytes=ESEARCH_MAX_BYTES)
    return redacting(settings, _parse_esearch, data, term, retmax, settings)


def _parse_esearch(data: bytes, term: str, retmax: int,
                   settings: EntrezSettings) -> EsearchResult:
    root = _xml(data, "esearch response")
    if root.tag != "eSearchResult" or root.find("Count") is None:
        raise FetchError(f"esearch response is not an eSearchResult (root <{root.tag}>). Fix: "
                         f"check {EUTILS_URL_ENV} points at E-utilities")
    listed = [i for i in ((e.text or "").strip() for e in root.iterfind("IdList/Id"))
              if is_pmid(i)]
    ids = tuple(dict.fromkeys(listed))[:retmax]
    if len(listed) > len(ids):
        logger.warning("esearch listed %s ids (%s repeated) for retmax %d; kept the first %d "
                       "distinct ones", f"{len(listed):,}", f"{len(listed) - len(set(listed)):,}",
                       retmax, len(ids))
    webenv = (root.findtext("WebEnv") or "").strip()
    key = (root.findtext("QueryKey") or "").strip()
    notes = [redact(f"{e.tag}: {(e.text or '').strip()}", settings)
             for part in ("ErrorList", "WarningList")
             for e in root.iterfind(f"{part}/*") if (e.text or "").strip()]
    for note in notes:
        logger.info("esearch %r: %s", term[:80], note)
    return EsearchResult(term=term, count=_number(root, "Count"), ids=ids,
                         retstart=_number(root, "RetStart"),
                         history=SearchHistory(webenv, key) if webenv and key else None,
                         translation=(root.findtext("QueryTranslation") or "").strip(),
                         warnings=tuple(notes))


def _number(root: ET.Element, tag: str) -> int:
    """The number in ``<tag>`` (0 when the element is absent).

    Raises:
        FetchError: Anything but 1 to 12 ASCII digits.
    """
    text = root.findtext(tag)
    if text is None:
        return 0
    value = ascii_number(text)
    if value is None:
        shown = text.strip()
        shown = shown if len(shown) <= 40 else f"{shown[:40]}..."
        raise FetchError(f"esearch response: <{tag}> is {shown!r}; expected a number of at most "
                         f"12 ASCII digits. Fix: check {EUTILS_URL_ENV} points at E-utilities")
    return value


def _xml(data: bytes, name: str) -> ET.Element:
    try:
        return fromstring(data, forbid_entities=True, forbid_external=True)
    except (ET.ParseError, DefusedXmlException) as exc:
        raise FetchError(f"{name} is not readable XML ({exc}). Fix: retry later") from exc


def fetch_pubmed(
    pmids: Iterable[str | int], settings: EntrezSettings, *, throttle: Throttle | None = None,
    source: str = EFETCH_SOURCE,
) -> Iterator[Document]:
    """Fetch PubMed records with efetch (XML, batches of :data:`EFETCH_BATCH`) as documents.

    Cached PMIDs come first (no request), then the fetched ones batch by batch. PMIDs PubMed
    does not return are logged and skipped (and not cached, so a later call asks again);
    records of other PMIDs in an answer, and repeats, are dropped before caching (logged).

    Args:
        pmids: PMIDs to fetch; duplicates are dropped.
        settings: E-utilities settings.
        throttle: Share one throttle between calls; by default each call makes its own.
        source: Source label of the documents.

    Raises:
        FetchError: A non-PMID in ``pmids``, a request that failed after retries, or an
            E-utilities error message.
        InputFormatError: The response is not PubMed XML.
    """
    wanted = _check_pmids(pmids)
    throttle = throttle or Throttle.for_settings(settings)
    cache = pubmed_cache(settings.cache_dir)
    missing = []
    for pmid in wanted:
        path = cache.get(pmid)
        cached = [] if path is None else [d for d in read_pubmed_xml(path, source=source)
                                          if d.doc_id == pmid]
        if cached:
            yield cached[0]
        else:
            missing.append(pmid)
    for batch in _batches(missing, EFETCH_BATCH):
        data = eutils_request("efetch.fcgi", settings, throttle,
                              {"db": "pubmed", "id": ",".join(batch), "retmode": "xml"})
        name = f"efetch response for PMIDs {batch[0]}..{batch[-1]} ({len(batch)} requested)"
        yield from _documents_from_efetch(data, name, batch, cache, source, settings)


def fetch_pubmed_history(
    history: SearchHistory, settings: EntrezSettings, *, expected: Sequence[str],
    retstart: int = 0, retmax: int | None = None, throttle: Throttle | None = None,
    source: str = EFETCH_SOURCE,
) -> list[Document]:
    """Fetch the records at positions ``retstart .. retstart + retmax`` of a search kept on the
    history server (efetch with ``WebEnv`` and ``query_key``), caching each.

    Args:
        history: The search on the history server.
        settings: E-utilities settings.
        expected: The PMIDs esearch listed for these positions: only these are kept (and
            cached); any other record of the answer is dropped with a warning.
        retstart: Position of the first record.
        retmax: Records to fetch (default: as many as ``expected``).
        throttle: Share one throttle between calls; by default the call makes its own.
        source: Source label of the documents.

    Raises:
        EutilsError: The history server no longer knows the search (an expired ``WebEnv``).
        FetchError: A failed request.
        InputFormatError: The response is not PubMed XML.
    """
    retmax = len(expected) if retmax is None else retmax
    data = eutils_request("efetch.fcgi", settings, throttle or Throttle.for_settings(settings),
                          {"db": "pubmed", "query_key": history.query_key,
                           "WebEnv": history.webenv, "retstart": retstart, "retmax": retmax,
                           "retmode": "xml"})
    cache = pubmed_cache(settings.cache_dir)
    name = f"efetch response for search positions {retstart}..{retstart + retmax - 1}"
    return list(_documents_from_efetch(data, name, expected, cache, source, settings))


def _documents_from_efetch(data: bytes, name: str, expected: Sequence[str], cache: RecordCache,
                           source: str, settings: EntrezSettings) -> Iterator[Document]:
    """The records of ``expected`` in an efetch answer, each once, cached as they come; other
    records and repeats are dropped before caching and logged. Errors and logs are redacted."""
    wanted = set(expected)
    returned: set[str] = set()
    unasked: list[str] = []
    repeated: list[str] = []
    elements = iter_article_elements(io.BytesIO(data), name,
                                     clean=lambda text: redact(text, settings))
    for index, element in enumerate(redacting_iter(elements, settings), start=1):
        doc = redacting(settings, article_to_document, element, name, index=index, source=source)
        if doc.doc_id not in wanted or doc.doc_id in returned:
            (repeated if doc.doc_id in returned else unasked).append(doc.doc_id)
            continue
        cache.put(doc.doc_id, _single_article_set(element))
        returned.add(doc.doc_id)
        yield doc
    if unasked:
        logger.warning("%s: dropped %d record(s) nobody asked for: %s", name, len(unasked),
                       _some(unasked))
    if repeated:
        logger.warning("%s: dropped %d repeated record(s) (the first copy is kept): %s", name,
                       len(repeated), _some(repeated))
    absent = [p for p in expected if p not in returned]
    if absent:
        logger.warning("PubMed returned no record for %d PMID(s): %s", len(absent),
                       ", ".join(absent[:20]))


def _some(pmids: Sequence[str]) -> str:
    """The first distinct PMIDs of a list, for a warning ("1, 2, 3 and 4 more")."""
    distinct = list(dict.fromkeys(pmids))
    shown = ", ".join(distinct[:NAMED_IN_WARNINGS])
    more = len(distinct) - NAMED_IN_WARNINGS
    return f"{shown} and {more:,} more" if more > 0 else shown


def _single_article_set(element: ET.Element) -> bytes:
    body = ET.tostring(element, encoding="unicode")
    head = '<?xml version="1.0" encoding="UTF-8"?>\n<PubmedArticleSet>\n'
    return f"{head}{body}\n</PubmedArticleSet>\n".encode()


def elink_citations(
    pmids: Iterable[str | int], settings: EntrezSettings, *, throttle: Throttle | None = None,
    linkname: str = "pubmed_pubmed_refs",
) -> Iterator[tuple[str, str]]:
    """Yield ``(citing_pmid, cited_pmid)`` edges from elink (references PubMed knows of).

    Args:
        pmids: Citing PMIDs; duplicates are dropped.
        settings: E-utilities settings.
        throttle: Share one throttle between calls; by default each call makes its own.
        linkname: The elink link name (``pubmed_pubmed_refs``: papers the PMID cites;
            ``pubmed_pubmed_citedin``: papers citing it).

    Raises:
        FetchError: A non-PMID, a failed request or an unreadable/error response.
    """
    wanted = _check_pmids(pmids)
    throttle = throttle or Throttle.for_settings(settings)
    cache = RecordCache(settings.cache_dir, f"elink-{linkname}", ".json")
    missing = []
    for pmid in wanted:
        path = cache.get(pmid)
        if path is None:
            missing.append(pmid)
        else:
            yield from ((pmid, cited) for cited in json.loads(path.read_text())["cited"])
    for batch in _batches(missing, ELINK_BATCH):
        # one id= parameter per PMID: NCBI answers one LinkSet per PMID, not one merged set
        data = eutils_request("elink.fcgi", settings, throttle,
                              {"dbfrom": "pubmed", "db": "pubmed", "linkname": linkname,
                               "id": batch})
        links = redacting(settings, _parse_elink, data, linkname)
        for pmid in batch:
            cited = links.get(pmid, [])
            record = {"pmid": pmid, "linkname": linkname, "cited": cited}
            cache.put(pmid, json.dumps(record).encode())
            yield from ((pmid, c) for c in cited)


def _parse_elink(data: bytes, linkname: str) -> dict[str, list[str]]:
    root = _xml(data, "elink response")
    links: dict[str, list[str]] = {}
    for linkset in root.iterfind("LinkSet"):
        source = (linkset.findtext("IdList/Id") or "").strip()
        for linkdb in linkset.iterfind("LinkSetDb"):
            if (linkdb.findtext("LinkName") or "").strip() == linkname:
                ids = ((i.text or "").strip() for i in linkdb.iterfind("Link/Id"))
                links.setdefault(source, []).extend(i for i in ids if is_pmid(i))
    return links


def _check_pmids(pmids: Iterable[str | int]) -> list[str]:
    wanted = list(dict.fromkeys(str(p).strip() for p in pmids))
    bad = [p for p in wanted if not is_pmid(p)]
    if bad:
        raise FetchError(f"not PubMed ids: {', '.join(map(repr, bad[:5]))}. Expected digits "
                         "such as '29768149'. Fix: remove prefixes such as 'PMID:'")
    return wanted


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
