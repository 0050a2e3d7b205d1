"""Online fetchers: PubMed records and citation links from NCBI E-utilities, the CIViC nightly TSV.

Parsers never touch the network; these functions do, and only when called. E-utilities requests
go through ``Bio.Entrez`` (:func:`Bio.Entrez.efetch`, :func:`Bio.Entrez.elink`) with the contact
email, tool name and API key of :class:`EntrezSettings` passed as keywords on every call, so
Biopython's ``email``/``tool``/``api_key`` globals are neither read nor set and two settings can
be used side by side. Each call

- waits for a :class:`Throttle` (NCBI allows 3 requests/s without an API key, 10 with one;
  ``Bio.Entrez`` also spaces its own requests, 0.37 s or 0.1 s apart, which is harmless);
- is retried with exponential backoff on connection errors, HTTP 429 and 5xx. Our backoff wraps
  Biopython's: ``Bio.Entrez._open`` itself tries ``Bio.Entrez.max_tries`` times (default 3,
  sleeping ``Bio.Entrez.sleep_between_tries`` s after connection errors), so one of our attempts
  may be several HTTP requests. This module leaves those globals as the application set them;
- answers from an on-disk cache of plain files (one per PMID) when ``cache_dir`` is set:

  - ``cache_dir/pubmed/<pmid>.xml``: the article as a one-record ``PubmedArticleSet`` (readable
    by :func:`kb_sources.pubmed_xml.read_pubmed_xml`);
  - ``cache_dir/elink-<linkname>/<pmid>.json``: ``{"pmid", "linkname", "cited": [...]}``.

``Bio.Entrez`` hard-codes the ``eutils.ncbi.nlm.nih.gov`` URL (:data:`EUTILS_BASE_URL`) and opens
it without a timeout (the socket default applies; see :func:`socket.setdefaulttimeout`). Tests
point it at a local server by replacing ``Bio.Entrez.urlopen``. Responses are parsed with
defusedxml (no entity expansion), not ``Bio.Entrez.read``, whose validating parser may download
DTDs from NCBI. The CIViC download uses :mod:`urllib` directly.
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import os
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar
from urllib.error import HTTPError, URLError
from urllib.request import urlopen

from Bio import Entrez
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from kb_sources.checks import is_pmid
from kb_sources.errors import CurationError
from kb_sources.pubmed_xml import (
    article_to_document,
    iter_article_elements,
    read_pubmed_xml,
)
from kb_sources.types import Document

logger = logging.getLogger(__name__)

#: Where ``Bio.Entrez`` sends E-utilities requests (hard-coded there; efetch.fcgi etc. below it).
EUTILS_BASE_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
#: CIViC nightly evidence export.
CIVIC_NIGHTLY_URL = "https://civicdb.org/downloads/nightly/nightly-ClinicalEvidenceSummaries.tsv"
#: PMIDs per efetch request (NCBI recommends POST and at most a few hundred ids per call).
EFETCH_BATCH = 200
#: PMIDs per elink request.
ELINK_BATCH = 100
#: Source label of fetched documents.
EFETCH_SOURCE = "pubmed-efetch"

T = TypeVar("T")


class FetchError(CurationError):
    """A download failed (after retries) or the server answered with an error."""


@dataclass(frozen=True)
class EntrezSettings:
    """How to talk to NCBI E-utilities.

    Attributes:
        email: Contact address NCBI requires with every request.
        api_key: NCBI API key (raises the limit from 3 to 10 requests/s); None for none.
        tool: Tool name sent with every request.
        cache_dir: Folder for cached records (one file per PMID); None disables the cache.
        max_retries: Retries after the first attempt on connection errors, HTTP 429 and 5xx.
        backoff: First retry delay in seconds; doubled for each further retry.
    """

    email: str
    api_key: str | None = None
    tool: str = "kbcurate"
    cache_dir: Path | None = None
    max_retries: int = 3
    backoff: float = 1.0

    def __post_init__(self) -> None:
        if "@" not in self.email:
            raise FetchError(f"EntrezSettings.email is {self.email!r}. Expected an email address "
                             "(NCBI requires one). Fix: pass your contact email")

    @property
    def requests_per_second(self) -> int:
        """NCBI's rate limit for these settings."""
        return 10 if self.api_key else 3

    def identity(self) -> dict[str, str | None]:
        """The ``tool``/``email``/``api_key`` keywords passed to every ``Bio.Entrez`` call.

        ``api_key`` is passed even when None: Biopython then drops it instead of falling back
        to ``Bio.Entrez.api_key``.
        """
        return {"tool": self.tool, "email": self.email, "api_key": self.api_key or None}


class Throttle:
    """Keeps successive requests at least ``1 / per_second`` seconds apart.

    Args:
        per_second: Allowed request rate.
        clock: Monotonic clock in seconds (inject a fake one in tests).
        sleep: Sleep function (a fake one should advance the fake clock).
    """

    def __init__(self, per_second: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if per_second <= 0:
            raise ValueError(f"per_second must be positive, got {per_second}")
        self.interval = 1.0 / per_second
        self.clock = clock
        self.sleep = sleep
        self._last: float | None = None

    @classmethod
    def for_settings(cls, settings: EntrezSettings, **kwargs: Callable) -> Throttle:
        """A throttle at NCBI's limit for ``settings`` (3/s, or 10/s with an API key)."""
        return cls(settings.requests_per_second, **kwargs)

    def wait(self) -> None:
        """Sleep until the next request is allowed, then mark it as sent."""
        now = self.clock()
        if self._last is not None and now < self._last + self.interval:
            self.sleep(self._last + self.interval - now)
            now = self.clock()
        self._last = now


def fetch_pubmed(
    pmids: Iterable[str | int], settings: EntrezSettings, *, throttle: Throttle | None = None
) -> Iterator[Document]:
    """Fetch PubMed records with efetch (XML, batches of :data:`EFETCH_BATCH`) as documents.

    Cached PMIDs come first (no request), then the fetched ones batch by batch. PMIDs PubMed
    does not return are logged and skipped (and not cached, so a later call asks again).

    Args:
        pmids: PMIDs to fetch; duplicates are dropped.
        settings: E-utilities settings.
        throttle: Share one throttle between calls; by default each call makes its own.

    Raises:
        FetchError: A non-PMID in ``pmids``, a request that failed after retries, or an
            E-utilities error message.
        InputFormatError: The response is not PubMed XML.
    """
    wanted = _check_pmids(pmids)
    throttle = throttle or Throttle.for_settings(settings)
    cache = _Cache(settings.cache_dir, "pubmed", ".xml")
    missing = []
    for pmid in wanted:
        path = cache.get(pmid)
        if path is None:
            missing.append(pmid)
        else:
            yield from read_pubmed_xml(path, source=EFETCH_SOURCE)
    for batch in _batches(missing, EFETCH_BATCH):
        # Biopython joins the ids with commas and POSTs from 200 ids on.
        data = _eutils(Entrez.efetch, "efetch.fcgi", settings, throttle,
                       db="pubmed", id=batch, retmode="xml")
        yield from _documents_from_efetch(data, batch, cache)


def _documents_from_efetch(data: bytes, batch: list[str], cache: _Cache) -> Iterator[Document]:
    name = f"efetch response for PMIDs {batch[0]}..{batch[-1]} ({len(batch)} requested)"
    _raise_eutils_error(data, name)
    returned = set()
    for index, element in enumerate(iter_article_elements(io.BytesIO(data), name), start=1):
        doc = article_to_document(element, name, index=index, source=EFETCH_SOURCE)
        cache.put(doc.doc_id, _single_article_set(element))
        returned.add(doc.doc_id)
        yield doc
    absent = [p for p in batch if p not in returned]
    if absent:
        logger.warning("PubMed returned no record for %d PMID(s): %s", len(absent),
                       ", ".join(absent[:20]))


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
    cache = _Cache(settings.cache_dir, f"elink-{linkname}", ".json")
    missing = []
    for pmid in wanted:
        path = cache.get(pmid)
        if path is None:
            missing.append(pmid)
        else:
            yield from ((pmid, cited) for cited in json.loads(path.read_text())["cited"])
    for batch in _batches(missing, ELINK_BATCH):
        # A list of ids goes out as one id= parameter per PMID (Biopython's elink does not join
        # them), so NCBI answers with one LinkSet per PMID instead of one merged set.
        data = _eutils(Entrez.elink, "elink.fcgi", settings, throttle,
                       dbfrom="pubmed", db="pubmed", linkname=linkname, id=batch)
        links = _parse_elink(data, linkname)
        for pmid in batch:
            cited = links.get(pmid, [])
            record = {"pmid": pmid, "linkname": linkname, "cited": cited}
            cache.put(pmid, json.dumps(record).encode())
            yield from ((pmid, c) for c in cited)


def _parse_elink(data: bytes, linkname: str) -> dict[str, list[str]]:
    name = "elink response"
    _raise_eutils_error(data, name)
    try:
        root = fromstring(data, forbid_entities=True, forbid_external=True)
    except (ET.ParseError, DefusedXmlException) as exc:
        raise FetchError(f"{name} is not readable XML ({exc}). Fix: retry later") from exc
    links: dict[str, list[str]] = {}
    for linkset in root.iterfind("LinkSet"):
        source = (linkset.findtext("IdList/Id") or "").strip()
        for linkdb in linkset.iterfind("LinkSetDb"):
            if (linkdb.findtext("LinkName") or "").strip() == linkname:
                ids = ((i.text or "").strip() for i in linkdb.iterfind("Link/Id"))
                links.setdefault(source, []).extend(i for i in ids if is_pmid(i))
    return links


def _raise_eutils_error(data: bytes, name: str) -> None:
    """E-utilities reports some errors as HTTP 200 with an ``<ERROR>`` element."""
    head = data[:2000]
    if b"<ERROR>" not in head:
        return
    message = head.split(b"<ERROR>", 1)[1].split(b"</ERROR>", 1)[0].decode("utf-8", "replace")
    raise FetchError(f"{name}: E-utilities answered with an error: {message.strip()!r}. "
                     "Fix: check the PMIDs and settings")


def download_civic_nightly(
    dest: str | Path, url: str = CIVIC_NIGHTLY_URL, *, timeout: float = 60.0,
    max_retries: int = 3, backoff: float = 1.0, sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download the CIViC nightly ClinicalEvidenceSummaries TSV to ``dest`` atomically.

    The file is written to a temporary file next to ``dest`` and renamed into place only when
    complete and tab-separated, so a failed download never leaves a partial ``dest``.

    Raises:
        FetchError: The download failed after retries or the content is not a TSV.
    """
    target = Path(dest)
    target.parent.mkdir(parents=True, exist_ok=True)

    def attempt() -> None:
        with _atomic_file(target) as fh, urlopen(url, timeout=timeout) as response:
            first = response.readline()
            if b"\t" not in first or first.lstrip().startswith(b"<"):
                raise FetchError(f"{url} did not return a TSV (first line {first[:80]!r}). "
                                 "Fix: check the URL")
            fh.write(first)
            while chunk := response.read(1 << 20):
                fh.write(chunk)

    _with_retries(attempt, what=url, max_retries=max_retries, backoff=backoff, sleep=sleep)
    logger.info("downloaded %s to %s (%d bytes)", url, target, target.stat().st_size)
    return target


def _eutils(call: Callable[..., IO], endpoint: str, settings: EntrezSettings,
            throttle: Throttle, **params: object) -> bytes:
    """One throttled, retried ``Bio.Entrez`` call; the response body as bytes."""

    def attempt() -> bytes:
        throttle.wait()
        with call(**params, **settings.identity()) as handle:
            # Bio.Entrez wraps text/plain answers in a TextIOWrapper; read the raw bytes.
            raw = handle.buffer if isinstance(handle, io.TextIOWrapper) else handle
            return raw.read()

    return _with_retries(attempt, what=f"E-utilities {endpoint}",
                         max_retries=settings.max_retries, backoff=settings.backoff,
                         sleep=throttle.sleep)


def _with_retries(action: Callable[[], T], *, what: str, max_retries: int, backoff: float,
                  sleep: Callable[[float], None]) -> T:
    """Run ``action``; on a transient error wait ``backoff * 2**n`` seconds and try again."""
    for attempt in range(max_retries + 1):
        try:
            return action()
        except HTTPError as exc:
            exc.close()  # the error holds the response's socket
            if exc.code != 429 and exc.code < 500:
                raise FetchError(f"{what} failed with HTTP {exc.code} {exc.reason}. Fix: check "
                                 "the request (ids, API key)") from exc
            error: Exception = exc
        except (URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            error = exc
        if attempt == max_retries:
            raise FetchError(f"{what} failed after {max_retries + 1} attempts ({error}). Fix: "
                             "check the network connection or try again later") from error
        delay = backoff * 2**attempt
        logger.warning("%s failed (%s); retrying in %.1f s", what, error, delay)
        sleep(delay)
    raise AssertionError("unreachable")


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


class _Cache:
    """One plain file per key under ``root/kind``; disabled when ``root`` is None."""

    def __init__(self, root: Path | None, kind: str, suffix: str) -> None:
        self.folder = Path(root) / kind if root is not None else None
        self.suffix = suffix

    def get(self, key: str) -> Path | None:
        if self.folder is None:
            return None
        path = self.folder / f"{key}{self.suffix}"
        return path if path.is_file() else None

    def put(self, key: str, data: bytes) -> None:
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with _atomic_file(self.folder / f"{key}{self.suffix}") as fh:
            fh.write(data)


@contextmanager
def _atomic_file(target: Path) -> Iterator[IO[bytes]]:
    """A temporary file next to ``target``, renamed onto it on success, removed on failure."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
