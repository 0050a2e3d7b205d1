"""The HTTP side of NCBI E-utilities: one base URL, identity, rate limit, retries, error answers.

Every E-utilities request of the project goes through :func:`eutils_request`:

- to ``<base URL><endpoint>``, the base URL being :attr:`EntrezSettings.base_url`, which defaults
  to ``$KBCURATE_EUTILS_URL`` read when the settings are made (never at import), else NCBI's
  :data:`DEFAULT_EUTILS_URL`; tests and mirrors point it elsewhere;
- with ``tool``, ``email`` and (when set) ``api_key`` on every request;
- as GET, or as POST when it carries 200 ids or more or its parameters are long (what NCBI asks
  for, and what ``Bio.Entrez`` does);
- after a shared :class:`Throttle` (NCBI allows 3 requests/s without an API key, 10 with one;
  requests go 10% further apart than that);
- with a per-request time-out (:attr:`EntrezSettings.timeout`);
- retried with exponential backoff on connection errors, time-outs, a reset or cut-off body,
  HTTP 429 and 5xx (a ``Retry-After`` header lengthens the wait); other HTTP errors fail at once;
- and an answer that is an E-utilities error message (HTTP 200 with ``<ERROR>``) raises
  :class:`EutilsError` with that message on one line.

``Bio.Entrez`` is not used for the requests: it hard-codes NCBI's host, opens without a
time-out and keeps its own module-wide rate limit and identity. Answers are parsed by the callers
(:mod:`kb_sources.fetch`) with defusedxml, never with ``Bio.Entrez.read``, whose validating
parser may download DTDs.
"""

from __future__ import annotations

import http.client
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TypeVar
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit
from urllib.request import Request, urlopen

from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: The environment variable naming the E-utilities base URL (a mirror, a test server).
EUTILS_URL_ENV = "KBCURATE_EUTILS_URL"
#: NCBI's E-utilities (``esearch.fcgi``, ``efetch.fcgi``, ``elink.fcgi`` below it).
DEFAULT_EUTILS_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
#: From this many ids on, a request is sent as POST.
POST_FROM_IDS = 200
#: Encoded parameters longer than this go as POST (a long search term).
POST_FROM_CHARS = 1000
#: Requests are spaced this many times the rate limit's interval apart.
SPACING_MARGIN = 1.1
#: Longest Retry-After (seconds) honoured; a longer one is capped.
MAX_RETRY_AFTER_S = 60.0

T = TypeVar("T")
Params = Mapping[str, str | int | Sequence[str]]


class FetchError(CurationError):
    """A download failed (after retries) or the server answered with an error."""


class EutilsError(FetchError):
    """E-utilities answered, with an error message instead of a result (``<ERROR>``)."""


def eutils_base_url() -> str:
    """``$KBCURATE_EUTILS_URL`` (read now), else :data:`DEFAULT_EUTILS_URL`."""
    return os.environ.get(EUTILS_URL_ENV, "").strip() or DEFAULT_EUTILS_URL


def check_base_url(url: str) -> str:
    """``url`` with a trailing slash.

    Raises:
        FetchError: Not an http(s) URL with a host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FetchError(f"The E-utilities base URL {url!r} is not an http(s) URL. Fix: set "
                         f"{EUTILS_URL_ENV} to a URL such as {DEFAULT_EUTILS_URL}")
    return url if url.endswith("/") else url + "/"


@dataclass(frozen=True)
class EntrezSettings:
    """How to talk to NCBI E-utilities.

    Attributes:
        email: Contact address NCBI requires with every request.
        api_key: NCBI API key (raises the limit from 3 to 10 requests/s); None for none.
        tool: Tool name sent with every request.
        cache_dir: Folder for cached records (one file per PMID); None disables the cache.
        max_retries: Retries after the first attempt on connection errors, time-outs, HTTP
            429 and 5xx.
        backoff: First retry delay in seconds; doubled for each further retry.
        timeout: Seconds one request may take to connect or to send the next bytes.
        base_url: Where the E-utilities live (default: ``$KBCURATE_EUTILS_URL``, read when the
            settings are made, else NCBI's).
    """

    email: str
    api_key: str | None = None
    tool: str = "kbcurate"
    cache_dir: Path | None = None
    max_retries: int = 3
    backoff: float = 1.0
    timeout: float = 30.0
    base_url: str = field(default_factory=eutils_base_url)

    def __post_init__(self) -> None:
        if "@" not in self.email:
            raise FetchError(f"EntrezSettings.email is {self.email!r}. Expected an email address "
                             "(NCBI requires one). Fix: pass your contact email")
        object.__setattr__(self, "base_url", check_base_url(self.base_url))
        if self.timeout <= 0:
            raise FetchError(f"EntrezSettings.timeout is {self.timeout}; expected seconds > 0")

    @property
    def requests_per_second(self) -> int:
        """NCBI's rate limit for these settings."""
        return 10 if self.api_key else 3

    def identity(self) -> dict[str, str]:
        """The ``tool``/``email``/``api_key`` parameters sent with every request (no
        ``api_key`` when there is none)."""
        out = {"tool": self.tool, "email": self.email}
        if self.api_key:
            out["api_key"] = self.api_key
        return out

    def url(self, endpoint: str) -> str:
        """The full URL of an endpoint ("efetch.fcgi")."""
        return self.base_url + endpoint


class Throttle:
    """Keeps successive requests at least ``1 / per_second`` seconds apart (thread-safe: one
    throttle may be shared by every request of a process or a search).

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
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: EntrezSettings, **kwargs: Callable) -> Throttle:
        """A throttle just under NCBI's limit for ``settings`` (3/s, or 10/s with an API key):
        requests :data:`SPACING_MARGIN` times the limit's interval apart (0.367 s, 0.11 s), so
        that network jitter never lands a fourth request in NCBI's second (Biopython keeps
        0.37 s for the same reason)."""
        return cls(settings.requests_per_second / SPACING_MARGIN, **kwargs)

    def wait(self) -> None:
        """Sleep until the next request is allowed, then mark it as sent."""
        with self._lock:
            now = self.clock()
            if self._last is not None and now < self._last + self.interval:
                self.sleep(self._last + self.interval - now)
                now = self.clock()
            self._last = now


def build_request(settings: EntrezSettings, endpoint: str, params: Params) -> Request:
    """The HTTP request of one E-utilities call: GET, or POST for 200+ ids or long parameters.

    A list value goes out as one parameter per item (``id=1&id=2``: elink's one-to-one form);
    callers join ids with commas where they want one list.
    """
    pairs = {**{k: v for k, v in params.items() if v is not None}, **settings.identity()}
    encoded = urlencode(pairs, doseq=True)
    ids = params.get("id")
    n_ids = (len(ids) if isinstance(ids, list | tuple)
             else str(ids).count(",") + 1 if ids else 0)
    url = settings.url(endpoint)
    if n_ids >= POST_FROM_IDS or len(encoded) > POST_FROM_CHARS:
        return Request(url, data=encoded.encode("utf-8"), method="POST",
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    return Request(f"{url}?{encoded}", method="GET")


def eutils_request(endpoint: str, settings: EntrezSettings, throttle: Throttle,
                   params: Params) -> bytes:
    """One throttled, retried E-utilities call; the response body.

    Raises:
        FetchError: The request failed after retries, or failed with a client error.
        EutilsError: The answer is an E-utilities error message.
    """
    request = build_request(settings, endpoint, params)

    def attempt() -> bytes:
        throttle.wait()
        with urlopen(request, timeout=settings.timeout) as response:
            return response.read()

    data = with_retries(attempt, what=f"E-utilities {endpoint}",
                        max_retries=settings.max_retries, backoff=settings.backoff,
                        sleep=throttle.sleep)
    raise_eutils_error(data, f"E-utilities {endpoint}")
    return data


def raise_eutils_error(data: bytes, name: str) -> None:
    """E-utilities reports some errors as HTTP 200 with an ``<ERROR>`` element; raise it as
    :class:`EutilsError`, its message on one line."""
    head = data[:4000]
    if b"<ERROR>" not in head:
        return
    message = head.split(b"<ERROR>", 1)[1].split(b"</ERROR>", 1)[0].decode("utf-8", "replace")
    line = " ".join(message.split())[:300]
    raise EutilsError(f"{name}: E-utilities answered with an error: {line!r}. Fix: check the "
                      "query, the PMIDs and the settings")


def with_retries(action: Callable[[], T], *, what: str, max_retries: int, backoff: float,
                 sleep: Callable[[float], None]) -> T:
    """Run ``action``; on a transient error wait ``backoff * 2**n`` seconds (or the server's
    ``Retry-After``, when longer) and try again.

    Raises:
        FetchError: A client error (HTTP 4xx but 429), or the last attempt failed too.
    """
    for attempt in range(max_retries + 1):
        wait = 0.0
        try:
            return action()
        except HTTPError as exc:
            exc.close()  # the error holds the response's socket
            if exc.code != 429 and exc.code < 500:
                raise FetchError(f"{what} failed with HTTP {exc.code} {exc.reason}. Fix: check "
                                 "the request (ids, API key)") from exc
            wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            error: Exception = exc
        except (URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            error = exc
        if attempt == max_retries:
            raise FetchError(f"{what} failed after {max_retries + 1} attempts ({error}). Fix: "
                             "check the network connection or try again later") from error
        delay = max(backoff * 2**attempt, wait)
        logger.warning("%s failed (%s); retrying in %.1f s", what, error, delay)
        sleep(delay)
    raise AssertionError("unreachable")


def _retry_after(value: str | None) -> float:
    """Seconds of a ``Retry-After`` header (seconds or an HTTP date); 0 when absent or bad."""
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return 0.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
