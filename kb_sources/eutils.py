"""E-utilities settings, errors, redaction and the rate limit shared across processes.

This module holds what every E-utilities call needs; :mod:`kb_sources.eutils_http` makes the
calls (:func:`~kb_sources.eutils_http.eutils_request`: deadline, size limit, same-origin
redirects, retries, ``<ERROR>`` answers) and :mod:`kb_sources.fetch` reads the answers.

- :class:`EntrezSettings`: the identity (``tool``, ``email`` and, when set, ``api_key``) sent
  with every request; the base URL, which defaults to ``$KBCURATE_EUTILS_URL`` read when the
  settings are made (never at import), else NCBI's :data:`DEFAULT_EUTILS_URL` (tests and
  mirrors point it elsewhere; a base URL with spaces, control or non-ASCII characters, a query
  or a fragment is refused, :func:`check_base_url`); the socket time-out, the deadline of a
  whole call (default 120 s) and the size limit of an answer (default 64 MiB).
- :class:`FetchError` (a download failed, or the server answered with an error) and
  :class:`EutilsError` (an E-utilities ``<ERROR>`` answer).
- :class:`Throttle`: NCBI allows 3 requests/s without an API key, 10 with one; requests go 10%
  further apart than that. NCBI counts per machine, not per process: with a ``cache_dir`` the
  throttle also takes turns with every other process through the lock file
  ``cache_dir/.throttle`` (:data:`THROTTLE_FILE`, an exclusive ``flock``).
- :func:`redact`: the API key and the contact e-mail never appear in an error or a log line of
  the client: it replaces them (as typed and URL-encoded, in any case) with ``***``; a secret
  shorter than :data:`REDACT_ANYWHERE_FROM` characters only where it is a whole parameter value
  (``api_key=K``), lest every "k" of a message turn into ``***``. :func:`redacting` and
  :func:`redacting_iter` pass every :class:`FetchError` or
  :class:`~kb_sources.errors.InputFormatError` raised while reading an answer through it, with
  nothing chained (a parser quotes what the server sent, which may echo the key).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar, cast
from urllib.parse import quote, quote_plus, urlsplit

from kb_sources.errors import CurationError, InputFormatError

try:
    import fcntl
except ImportError:  # Windows: the rate limit is kept per process
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: The environment variable naming the E-utilities base URL (a mirror, a test server).
EUTILS_URL_ENV = "KBCURATE_EUTILS_URL"
#: NCBI's E-utilities (``esearch.fcgi``, ``efetch.fcgi``, ``elink.fcgi`` below it).
DEFAULT_EUTILS_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
#: Requests are spaced this many times the rate limit's interval apart.
SPACING_MARGIN = 1.1
#: Default seconds one E-utilities call may take in all (throttle, attempts, retry waits).
DEFAULT_DEADLINE_S = 120.0
#: Default largest answer (bytes): an efetch of 200 records is 1 to 20 MB.
DEFAULT_MAX_BYTES = 64 << 20
#: The file below ``cache_dir`` through which processes share the rate limit.
THROTTLE_FILE = ".throttle"
#: Secrets this long or longer are redacted wherever they appear (an NCBI key has 36
#: characters); shorter ones only as a whole parameter value (``api_key=K``).
REDACT_ANYWHERE_FROM = 6
#: A short secret counts as a whole parameter value after ``=`` and before the end or a
#: character that cannot go on a URL-encoded value (``&``, ``#``, a space, a quote, ``)``).
_VALUE_END = r"(?![\w%.~+@-])"

T = TypeVar("T")
P = ParamSpec("P")


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
    as typed and URL-encoded (``%40``), in any case. A secret of at least
    :data:`REDACT_ANYWHERE_FROM` characters is replaced wherever it appears, a shorter one only
    as a whole parameter value (``api_key=K&``, ``email=a@b.c``)."""
    anywhere, as_value = set(), set()
    for secret in filter(None, (settings.api_key, settings.email)):
        forms = anywhere if len(secret) >= REDACT_ANYWHERE_FROM else as_value
        forms.update((secret, quote_plus(secret), quote(secret, safe="")))
    patterns = [_alternatives(anywhere)] if anywhere else []
    if as_value:
        patterns.append(f"(?<==){_alternatives(as_value)}{_VALUE_END}")
    if not patterns:
        return text
    return re.sub("|".join(patterns), "***", text, flags=re.IGNORECASE)


def _alternatives(forms: set[str]) -> str:
    """A regex group matching any of ``forms``, the longest first."""
    return "(?:" + "|".join(map(re.escape, sorted(forms, key=len, reverse=True))) + ")"


def redacted_error(error: FetchError | InputFormatError,
                   settings: EntrezSettings) -> FetchError | InputFormatError:
    """A new error of the same class as ``error``, every text of it through :func:`redact`,
    nothing chained (raise it outside the ``except`` block, or its context is attached)."""
    def clean(text: str | None) -> str | None:
        return None if text is None else redact(text, settings)

    if isinstance(error, InputFormatError):
        return type(error)(redact(error.path, settings), redact(error.problem, settings),
                           line=error.line, record=clean(error.record),
                           expected=clean(error.expected), fix=clean(error.fix))
    return type(error)(redact(str(error), settings))


def redacting(settings: EntrezSettings, action: Callable[P, T], *args: P.args,
              **kwargs: P.kwargs) -> T:
    """``action(*args, **kwargs)``, which reads an E-utilities answer; a :class:`FetchError` or
    :class:`~kb_sources.errors.InputFormatError` it raises (a parser quotes the server's text,
    which may echo the API key) is raised again through :func:`redacted_error`.

    Raises:
        FetchError: As ``action`` did, redacted, with no cause or context attached.
        InputFormatError: As ``action`` did, redacted, with no cause or context attached.
    """
    try:
        return action(*args, **kwargs)
    except (FetchError, InputFormatError) as exc:
        error = redacted_error(exc, settings)
    raise error  # outside the except block: the original is not attached as the context


def redacting_iter(items: Iterable[T], settings: EntrezSettings) -> Iterator[T]:
    """The items of ``items`` (read lazily), each step through :func:`redacting`."""
    iterator = iter(items)
    end = object()
    while (item := redacting(settings, next, iterator, end)) is not end:
        yield cast(T, item)


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


