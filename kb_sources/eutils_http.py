"""E-utilities calls over HTTP: :func:`eutils_request` and the transport under it.

Every E-utilities request of the project goes through :func:`eutils_request`
(:mod:`kb_sources.eutils` holds the settings, the errors, the redaction and the throttle it uses):

- to ``<base URL><endpoint>`` (:attr:`~kb_sources.eutils.EntrezSettings.base_url`), with
  ``tool``, ``email`` and (when set) ``api_key`` on every request;
- as GET, or as POST when it carries 200 ids or more or its parameters are long (what NCBI asks
  for, and what ``Bio.Entrez`` does);
- after the caller's :class:`~kb_sources.eutils.Throttle` (shared by processes through the
  cache folder);
- with a socket time-out (:attr:`EntrezSettings.timeout`) and a deadline for the whole call
  (:attr:`EntrezSettings.deadline`, default 120 s): the throttle waits, every attempt (connect,
  headers, body) and the waits between attempts. A socket time-out restarts with every byte,
  so a watchdog (``_Watchdog``, fed by the connection handlers) shuts the connection down
  when the deadline passes: a server sending one byte every few seconds is left at the
  deadline. An overrun ends the call (the deadline is spent, so there is no retry), and a retry
  whose wait would end after the deadline is not made;
- with a size limit (:attr:`EntrezSettings.max_bytes`, default 64 MiB; callers may ask for a
  smaller one): an answer announcing more is refused before reading, one sending more is
  refused at the chunk that passes the limit (the body is read in 64 KiB chunks and never held
  beyond the limit);
- following redirects only within the base URL's origin (scheme, host, port): a redirect
  elsewhere is refused;
- retried with exponential backoff (:func:`with_retries`) on connection errors, time-outs, a
  reset or cut-off body, HTTP 429 and 5xx (a ``Retry-After`` header lengthens the wait); other
  errors (HTTP 4xx, an invalid URL, a refused redirect, an oversized answer) fail at once;
- and an answer that is an E-utilities error message (HTTP 200 with ``<ERROR>``) raises
  :class:`~kb_sources.eutils.EutilsError` with that message on one line.

Every error text and log line passes through :func:`~kb_sources.eutils.redact` (the API key and
the e-mail become ``***``), and errors are raised without the urllib exception attached (its
text holds the URL, key included).

``Bio.Entrez`` is not used for the requests: it hard-codes NCBI's host, opens without a
time-out and keeps its own module-wide rate limit and identity. Answers are parsed by the callers
(:mod:`kb_sources.fetch`) with defusedxml, never with ``Bio.Entrez.read``, whose validating
parser may download DTDs.
"""

from __future__ import annotations

import http.client
import io
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import IO, Any, TypeVar
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urlsplit
from urllib.request import (
    HTTPHandler,
    HTTPRedirectHandler,
    HTTPSHandler,
    OpenerDirector,
    Request,
    build_opener,
)

from kb_sources.eutils import (
    EUTILS_URL_ENV,
    EntrezSettings,
    EutilsError,
    FetchError,
    Throttle,
    ascii_number,
    redact,
)

logger = logging.getLogger(__name__)

#: From this many ids on, a request is sent as POST.
POST_FROM_IDS = 200
#: Encoded parameters longer than this go as POST (a long search term).
POST_FROM_CHARS = 1000
#: Longest Retry-After (seconds) honoured; a longer one is capped.
MAX_RETRY_AFTER_S = 60.0
#: Bytes read from the socket at a time.
READ_CHUNK = 64 << 10
#: Errors worth another attempt: the network, a time-out, a reset or cut-off answer.
TRANSIENT = (URLError, TimeoutError, ConnectionError, http.client.IncompleteRead,
             http.client.BadStatusLine)

T = TypeVar("T")
Params = Mapping[str, str | int | Sequence[str]]


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port filled in for http and https; the port is None
    for a URL whose port is not a number."""
    parts = urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


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
