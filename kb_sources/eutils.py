"""The HTTP side of NCBI E-utilities: one base URL, identity, rate limit, retries, error answers.

Every E-utilities request of the project goes through :func:`eutils_request`:

- to ``<base URL><endpoint>``, the base URL being :attr:`EntrezSettings.base_url`, which defaults
  to ``$KBCURATE_EUTILS_URL`` read when the settings are made (never at import), else NCBI's
  :data:`DEFAULT_EUTILS_URL`; tests and mirrors point it elsewhere. A base URL with spaces,
  control or non-ASCII characters, a query or a fragment is refused (:func:`check_base_url`);
- with ``tool``, ``email`` and (when set) ``api_key`` on every request;
- as GET, or as POST when it carries 200 ids or more or its parameters are long (what NCBI asks
  for, and what ``Bio.Entrez`` does);
- after a shared :class:`Throttle` (NCBI allows 3 requests/s without an API key, 10 with one;
  requests go 10% further apart than that). NCBI counts per machine, not per process: with a
  ``cache_dir`` the throttle also takes turns with every other process through the lock file
  ``cache_dir/.throttle`` (:data:`THROTTLE_FILE`);
- with a socket time-out (:attr:`EntrezSettings.timeout`) and a deadline for the whole call
  (:attr:`EntrezSettings.deadline`, default 120 s): the throttle waits, every attempt (connect,
  headers, body) and the waits between attempts. A socket time-out restarts with every byte,
  so a watchdog shuts the connection down when the deadline passes: a server sending one byte
  every few seconds is left at the deadline. An overrun ends the call (the deadline is spent,
  so there is no retry), and a retry whose wait would end after the deadline is not made;
- with a size limit (:attr:`EntrezSettings.max_bytes`, default 64 MiB; callers may ask for a
  smaller one): an answer announcing more is refused before reading, one sending more is
  refused at the chunk that passes the limit (the body is read in 64 KiB chunks and never held
  beyond the limit);
- following redirects only within the base URL's origin (scheme, host, port): a redirect
  elsewhere is refused;
- retried with exponential backoff on connection errors, time-outs, a reset or cut-off body,
  HTTP 429 and 5xx (a ``Retry-After`` header lengthens the wait); other errors (HTTP 4xx, an
  invalid URL, a refused redirect, an oversized answer) fail at once;
- and an answer that is an E-utilities error message (HTTP 200 with ``<ERROR>``) raises
  :class:`EutilsError` with that message on one line.

The API key and the contact e-mail never appear in an error or a log line of this module:
:func:`redact` replaces them (as typed and URL-encoded) with ``***``, and errors are raised
without the urllib exception attached (its text holds the URL, key included).

``Bio.Entrez`` is not used for the requests: it hard-codes NCBI's host, opens without a
time-out and keeps its own module-wide rate limit and identity. Answers are parsed by the callers
(:mod:`kb_sources.fetch`) with defusedxml, never with ``Bio.Entrez.read``, whose validating
parser may download DTDs.
"""

from __future__ import annotations

import http.client
import io
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.error import HTTPError, URLError
from urllib.parse import quote, quote_plus, urlencode, urlsplit
from urllib.request import (
    HTTPHandler,
    HTTPRedirectHandler,
    HTTPSHandler,
    OpenerDirector,
    Request,
    build_opener,
)

from kb_sources.errors import CurationError

try:
    import fcntl
except ImportError:  # Windows: the rate limit is kept per process
    fcntl = None  # type: ignore[assignment]

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
#: Default seconds one E-utilities call may take in all (throttle, attempts, retry waits).
DEFAULT_DEADLINE_S = 120.0
#: Default largest answer (bytes): an efetch of 200 records is 1 to 20 MB.
DEFAULT_MAX_BYTES = 64 << 20
#: Bytes read from the socket at a time.
READ_CHUNK = 64 << 10
#: The file below ``cache_dir`` through which processes share the rate limit.
THROTTLE_FILE = ".throttle"
#: Errors worth another attempt: the network, a time-out, a reset or cut-off answer.
TRANSIENT = (URLError, TimeoutError, ConnectionError, http.client.IncompleteRead,
             http.client.BadStatusLine)

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
        FetchError: Not an http(s) URL with a host; spaces, control or non-ASCII characters; a
            query or a fragment (the endpoint name is appended to the base URL); a port that
            is not a number.
    """
    problem = _base_url_problem(url)
    if problem:
        raise FetchError(f"The E-utilities base URL {url!r} {problem}. Fix: set "
                         f"{EUTILS_URL_ENV} to a URL such as {DEFAULT_EUTILS_URL}")
    return url if url.endswith("/") else url + "/"


def _base_url_problem(url: str) -> str:
    """What is wrong with a base URL ("" when nothing)."""
    bad = next((i for i, char in enumerate(url) if not "!" <= char <= "~"), None)
    if bad is not None:
        return (f"contains {url[bad]!r} at position {bad}; expected printable ASCII without "
                "spaces (percent-encode other characters)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL"
    if "?" in url or "#" in url:
        return "has a query or a fragment; expected the folder that holds esearch.fcgi"
    try:
        parts.port  # noqa: B018 - urlsplit checks the port when asked
    except ValueError:
        return "has a port that is not a number"
    return ""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port filled in for http and https; the port is None
    for a URL whose port is not a number."""
    parts = urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def ascii_number(text: str | None, max_digits: int = 12) -> int | None:
    """``text`` (stripped) as an int when it is 1 to ``max_digits`` ASCII digits, else None
    (``'²'.isdigit()`` is True, but ``int('²')`` fails; 5,000 digits pass Python's limit)."""
    value = (text or "").strip()
    if re.fullmatch(f"[0-9]{{1,{max_digits}}}", value):
        return int(value)
    return None


@dataclass(frozen=True)
class EntrezSettings:
    """How to talk to NCBI E-utilities.

    Attributes:
        email: Contact address NCBI requires with every request.
        api_key: NCBI API key (raises the limit from 3 to 10 requests/s); None for none.
        tool: Tool name sent with every request.
        cache_dir: Folder for cached records (one file per PMID) and the shared rate limit
            (:data:`THROTTLE_FILE`); None disables both.
        max_retries: Retries after the first attempt on connection errors, time-outs, HTTP
            429 and 5xx.
        backoff: First retry delay in seconds; doubled for each further retry.
        timeout: Seconds one request may take to connect or to send the next bytes.
        base_url: Where the E-utilities live (default: ``$KBCURATE_EUTILS_URL``, read when the
            settings are made, else NCBI's).
        deadline: Seconds one call may take in all: throttle, attempts (reading the answer
            included) and the waits between them.
        max_bytes: Largest answer accepted, in bytes.
    """

    email: str
    api_key: str | None = field(default=None, repr=False)
    tool: str = "kbcurate"
    cache_dir: Path | None = None
    max_retries: int = 3
    backoff: float = 1.0
    timeout: float = 30.0
    base_url: str = field(default_factory=eutils_base_url)
    deadline: float = DEFAULT_DEADLINE_S
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if "@" not in self.email:
            raise FetchError(f"EntrezSettings.email is {self.email!r}. Expected an email address "
                             "(NCBI requires one). Fix: pass your contact email")
        object.__setattr__(self, "base_url", check_base_url(self.base_url))
        for name in ("timeout", "deadline", "max_bytes"):
            if getattr(self, name) <= 0:
                raise FetchError(f"EntrezSettings.{name} is {getattr(self, name)}; expected a "
                                 "number > 0")

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


def redact(text: str, settings: EntrezSettings) -> str:
    """``text`` with the API key and the contact e-mail of ``settings`` replaced by ``***``:
    as typed and URL-encoded (``%40``), in any case."""
    secrets = [s for s in (settings.api_key, settings.email) if s]
    forms = {form for s in secrets for form in (s, quote_plus(s), quote(s, safe=""))}
    if not forms:
        return text
    pattern = "|".join(map(re.escape, sorted(forms, key=len, reverse=True)))
    return re.sub(pattern, "***", text, flags=re.IGNORECASE)


class Throttle:
    """Keeps successive requests at least ``1 / per_second`` seconds apart (thread-safe: one
    throttle may be shared by every request of a process or a search).

    With ``shared_file`` the spacing holds across processes too: each request takes an
    exclusive ``flock`` on the file, sleeps until the interval since the time written there has
    passed, writes its own time (wall clock, :func:`time.time`) and lets go. Without ``fcntl``
    (Windows) the throttle keeps to this process; so it does, after a warning, from the first
    time the file cannot be opened.

    Args:
        per_second: Allowed request rate.
        clock: Clock in seconds (inject a fake one in tests); default :func:`time.monotonic`,
            or :func:`time.time` with ``shared_file`` (processes compare it).
        sleep: Sleep function (a fake one should advance the fake clock).
        shared_file: The lock file shared with other processes; None for this process only.
    """

    def __init__(self, per_second: float, *, clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 shared_file: Path | None = None) -> None:
        if per_second <= 0:
            raise ValueError(f"per_second must be positive, got {per_second}")
        self.interval = 1.0 / per_second
        self.shared_file = shared_file if fcntl is not None else None
        self.clock = clock or (time.time if self.shared_file else time.monotonic)
        self.sleep = sleep
        self._last: float | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: EntrezSettings, **kwargs: Callable) -> Throttle:
        """A throttle just under NCBI's limit for ``settings`` (3/s, or 10/s with an API key):
        requests :data:`SPACING_MARGIN` times the limit's interval apart (0.367 s, 0.11 s), so
        that network jitter never lands a fourth request in NCBI's second (Biopython keeps
        0.37 s for the same reason). With a ``cache_dir`` the spacing is shared with every
        process using that folder (``cache_dir/.throttle``)."""
        shared = settings.cache_dir / THROTTLE_FILE if settings.cache_dir else None
        return cls(settings.requests_per_second / SPACING_MARGIN, shared_file=shared, **kwargs)

    def wait(self) -> None:
        """Sleep until the next request is allowed, then mark it as sent."""
        with self._lock:
            if self.shared_file is not None:
                try:
                    self._wait_shared(self.shared_file)
                    return
                except OSError as exc:
                    logger.warning("cannot share the E-utilities rate limit through %s (%s); "
                                   "keeping it for this process only", self.shared_file, exc)
                    self.shared_file = None
            self._last = self._take_turn(self._last)

    def _take_turn(self, last: float | None) -> float:
        """Sleep until ``interval`` after ``last``; the time now. A ``last`` in the future (a
        wall clock set back) costs one interval at most."""
        now = self.clock()
        if last is not None and now < last + self.interval:
            self.sleep(min(last + self.interval - now, self.interval))
            now = self.clock()
        return now

    def _wait_shared(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed
            text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            last = float(text) if re.fullmatch(r"[0-9]{1,12}(\.[0-9]{1,9})?", text) else None
            now = self._take_turn(last)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{now:.6f}\n".encode(), 0)
        finally:
            os.close(fd)


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
                   params: Params, *, max_bytes: int | None = None) -> bytes:
    """One throttled, retried E-utilities call within the settings' deadline; the body.

    Args:
        endpoint: "esearch.fcgi", "efetch.fcgi", ...
        settings: E-utilities settings.
        throttle: The rate limit to keep.
        params: The call's parameters (the identity is added).
        max_bytes: A smaller size limit for this call than ``settings.max_bytes``.

    Raises:
        FetchError: The request failed after retries, failed with an error that is not
            transient, passed the deadline or the size limit, or was redirected elsewhere.
        EutilsError: The answer is an E-utilities error message.
    """
    request = build_request(settings, endpoint, params)
    what = f"E-utilities {endpoint}"
    call = _Call(what, settings, min(max_bytes or settings.max_bytes, settings.max_bytes),
                 time.monotonic() + settings.deadline)

    def attempt() -> bytes:
        return call.fetch(request, throttle)

    data = with_retries(attempt, what=what, max_retries=settings.max_retries,
                        backoff=settings.backoff, sleep=throttle.sleep,
                        give_up_at=call.give_up_at, deadline=settings.deadline,
                        clean=call.clean)
    raise_eutils_error(data, what, call.clean)
    return data


class _Call:
    """One E-utilities call: its settings, size limit and deadline (``give_up_at``, on the
    :func:`time.monotonic` clock), shared by its attempts."""

    def __init__(self, what: str, settings: EntrezSettings, limit: int,
                 give_up_at: float) -> None:
        self.what, self.settings, self.limit, self.give_up_at = what, settings, limit, give_up_at

    def clean(self, text: str) -> str:
        """``text`` without the key and the e-mail."""
        return redact(text, self.settings)

    def fetch(self, request: Request, throttle: Throttle) -> bytes:
        """One attempt: wait for the throttle, open, read at most ``limit`` bytes, all before
        the deadline. The watchdog and the opener are made before the throttle's turn, so
        that the request leaves as soon as it is allowed to."""
        left = self.give_up_at - time.monotonic()
        if left <= 0:
            raise FetchError(self._late(0))
        watchdog = _Watchdog(left)
        opener = _opener(self, watchdog)
        try:
            with watchdog:
                throttle.wait()
                timeout = max(min(self.settings.timeout, self.give_up_at - time.monotonic()),
                              0.001)
                with opener.open(request, timeout=timeout) as response:
                    return self._read(response, watchdog)
        except (OSError, http.client.HTTPException):
            if not watchdog.fired:
                raise
        raise FetchError(self._late(watchdog.received))  # outside the except: no URL attached

    def _read(self, response: http.client.HTTPResponse, watchdog: _Watchdog) -> bytes:
        """The body, read in chunks up to the size limit and the deadline."""
        declared = ascii_number(response.headers.get("Content-Length"), 18)
        if declared is not None and declared > self.limit:
            raise FetchError(self._too_large(f"it announced {declared:,}"))
        body = io.BytesIO()
        while time.monotonic() < self.give_up_at and (chunk := response.read1(READ_CHUNK)):
            if body.tell() + len(chunk) > self.limit:
                raise FetchError(self._too_large("more arrived"))
            body.write(chunk)
            watchdog.received = body.tell()
        complete = declared is not None and body.tell() >= declared
        if not complete and (watchdog.fired or time.monotonic() >= self.give_up_at):
            raise FetchError(self._late(body.tell()))
        if declared is not None and not complete:  # the server closed early: transient
            raise http.client.IncompleteRead(body.getvalue(), declared - body.tell())
        return body.getvalue()

    def _late(self, received: int) -> str:
        return (f"{self.what}: no complete answer within the {self.settings.deadline:g} s "
                f"deadline (EntrezSettings.deadline; {received:,} bytes arrived). Fix: try "
                "again later, or raise the deadline for a slow but working server")

    def _too_large(self, arrived: str) -> str:
        return (f"{self.what}: the answer is larger than {self.limit / 2**20:g} MiB "
                f"({self.limit:,} bytes, EntrezSettings.max_bytes; {arrived}). Fix: fetch "
                "fewer records per request or raise max_bytes")


class _Watchdog:
    """Shuts a request's sockets down when its deadline passes, so that a read blocked on a
    trickling server returns at once (a socket time-out restarts with every byte)."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self.received = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (now, when it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown, also for TLS: a blocked read sees the end at once
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


class _WatchedOpen:
    """Handler mixin: each connection hands its socket to the call's watchdog."""

    watchdog: _Watchdog

    def do_open(self, http_class: type[http.client.HTTPConnection], req: Request,
                **kwargs: Any) -> http.client.HTTPResponse:
        watchdog = self.watchdog

        class Watched(http_class):  # type: ignore[valid-type, misc]
            def connect(self) -> None:
                super().connect()
                watchdog.watch(self.sock)

        return super().do_open(Watched, req, **kwargs)  # type: ignore[misc]


class _WatchedHTTP(_WatchedOpen, HTTPHandler):
    pass


class _WatchedHTTPS(_WatchedOpen, HTTPSHandler):
    pass


class _SameOrigin(HTTPRedirectHandler):
    """Follows a redirect only to the base URL's scheme, host and port."""

    def __init__(self, call: _Call) -> None:
        self.call = call

    def redirect_request(self, req: Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> Request | None:
        base = self.call.settings.base_url
        if origin(newurl) != origin(base):
            fp.close()
            scheme, host, port = origin(newurl)
            where = self.call.clean(f"{scheme}://{host}:{port or '?'}")
            raise FetchError(f"{self.call.what} answered with a redirect to {where}, another "
                             f"origin than {'{}://{}:{}'.format(*origin(base))}; refused. Fix: "
                             f"set {EUTILS_URL_ENV} to the address that serves E-utilities")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(call: _Call, watchdog: _Watchdog) -> OpenerDirector:
    http_handler, https_handler = _WatchedHTTP(), _WatchedHTTPS()
    http_handler.watchdog = https_handler.watchdog = watchdog
    return build_opener(http_handler, https_handler, _SameOrigin(call))


def raise_eutils_error(data: bytes, name: str,
                       clean: Callable[[str], str] = lambda text: text) -> None:
    """E-utilities reports some errors as HTTP 200 with an ``<ERROR>`` element; raise it as
    :class:`EutilsError`, its message on one line (passed through ``clean``)."""
    head = data[:4000]
    if b"<ERROR>" not in head:
        return
    message = head.split(b"<ERROR>", 1)[1].split(b"</ERROR>", 1)[0].decode("utf-8", "replace")
    line = clean(" ".join(message.split())[:300])
    raise EutilsError(f"{name}: E-utilities answered with an error: {line!r}. Fix: check the "
                      "query, the PMIDs and the settings")


def with_retries(action: Callable[[], T], *, what: str, max_retries: int, backoff: float,
                 sleep: Callable[[float], None], give_up_at: float | None = None,
                 deadline: float = 0.0, clean: Callable[[str], str] = lambda text: text) -> T:
    """Run ``action``; on a transient error (:data:`TRANSIENT`, HTTP 429 and 5xx) wait
    ``backoff * 2**n`` seconds (or the server's ``Retry-After``, when longer) and try again.

    Args:
        give_up_at: :func:`time.monotonic` time after which no attempt starts (the call's
            ``deadline`` seconds, named in the error); None for no limit.
        clean: Applied to every error text shown or logged (:func:`redact`).

    Raises:
        FetchError: An error that is not transient (at once), the last attempt failed too, or
            the next attempt would start after ``give_up_at``. No urllib exception is
            attached: its text may hold the URL.
    """
    for attempt in range(1, max_retries + 2):
        value, error, wait = _attempt(action, what, clean)
        if error is None:
            return value  # type: ignore[return-value]
        failed = f"{what} failed after {attempt} attempts ({clean(str(error))})"
        if attempt > max_retries:
            raise FetchError(f"{failed}. Fix: check the network connection or try again later")
        delay = max(backoff * 2 ** (attempt - 1), wait)
        if give_up_at is not None and time.monotonic() + delay >= give_up_at:
            raise FetchError(f"{failed}; the next would start after the request's {deadline:g} "
                             "s deadline (EntrezSettings.deadline). Fix: check the network "
                             "connection or try again later")
        logger.warning("%s failed (%s); retrying in %.1f s", what, clean(str(error)), delay)
        sleep(delay)
    raise AssertionError("unreachable")


def _attempt(action: Callable[[], T], what: str, clean: Callable[[str], str]
             ) -> tuple[T | None, Exception | None, float]:
    """(value, None, 0) on success, (None, error, Retry-After seconds) on a transient error.

    Raises:
        FetchError: An error that is not transient, raised outside the ``except`` block so
            that the original (whose text may hold the URL) is not attached as its context.
    """
    try:
        return action(), None, 0.0
    except HTTPError as exc:
        exc.close()  # the error holds the response's socket
        if exc.code == 429 or exc.code >= 500:
            return None, exc, _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        fatal = (f"{what} failed with HTTP {exc.code} {clean(str(exc.reason))}. Fix: check the "
                 "request (ids, API key)")
    except TRANSIENT as exc:
        return None, exc, 0.0
    except (OSError, http.client.HTTPException, ValueError) as exc:  # InvalidURL, TLS, ...
        fatal = (f"{what} failed ({type(exc).__name__}: {clean(str(exc))}); not retried, as "
                 "trying again would fail the same way. Fix: check the URL "
                 f"({EUTILS_URL_ENV} for E-utilities) and the network")
    raise FetchError(fatal)


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
