"""Slow password guessing down: a growing lock after repeated failed sign-ins.

Failed password sign-ins are counted per user name and per client (the browser's address), each
under its own :class:`LockoutPolicy`. After ``max_failures`` failures in a row a key is locked
for ``base_delay_s``; every further failure doubles the lock, up to ``max_delay_s``. While a key
is locked no password is checked at all, so guessing goes no faster than the lock allows. A
successful sign-in clears its user name's count but not its client's (one valid account must not
let a client try other names without end). A run of failures older than ``forget_after_s`` is
forgotten.

Names that do not exist are counted like real ones, so the lock says nothing about who exists.
The state lives in a :class:`SignInThrottle` object (the app keeps one per workspace for the life
of the server process; a restart forgets it) with an injectable clock, so tests need not sleep.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LockoutPolicy:
    """When a run of failed sign-ins locks a key, and for how long (seconds)."""

    max_failures: int = 5
    base_delay_s: float = 30.0
    max_delay_s: float = 900.0
    forget_after_s: float = 3600.0

    def delay(self, failures: int) -> float:
        """Seconds a key stays locked after ``failures`` failures in a row (0: not locked)."""
        if failures < self.max_failures:
            return 0.0
        doublings = min(failures - self.max_failures, 32)
        return min(self.base_delay_s * 2.0**doublings, self.max_delay_s)


#: Per user name: 5 free tries, then 30 s, 60 s, 120 s ... up to 15 minutes.
USER_POLICY = LockoutPolicy()
#: Per client address: more room, since a lab may share one address behind a proxy.
CLIENT_POLICY = LockoutPolicy(max_failures=20)


class SignInLocked(CurationError):
    """Too many failed sign-ins: the user name or the client must wait ``wait_s`` seconds."""

    def __init__(self, message: str, wait_s: float) -> None:
        super().__init__(message)
        self.wait_s = wait_s


@dataclass
class _Streak:
    failures: int
    last: float


_WHAT = {"user": "for this user name", "client": "from this address"}


class SignInThrottle:
    """Failed sign-ins per user name and per client, and the locks they earn (thread-safe).

    Args:
        user_policy: Lockout policy per user name (case-insensitive).
        client_policy: Lockout policy per client (an IP address, or any id the caller has).
        clock: Seconds, monotonic (``time.monotonic``; tests pass a fake).
        max_keys: Keys remembered at most; beyond it, forgotten and then oldest streaks go.
    """

    def __init__(self, user_policy: LockoutPolicy = USER_POLICY,
                 client_policy: LockoutPolicy = CLIENT_POLICY, *,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000) -> None:
        self._policies = {"user": user_policy, "client": client_policy}
        self._clock = clock
        self._max_keys = max_keys
        self._streaks: dict[tuple[str, str], _Streak] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _keys(user: str, client: str) -> list[tuple[str, str]]:
        return [("user", user.strip().lower()), ("client", client)]

    def check(self, user: str, client: str) -> None:
        """Raise :class:`SignInLocked` while the user name or the client is locked."""
        now = self._clock()
        with self._lock:
            for key in self._keys(user, client):
                streak = self._live(key, now)
                if streak is None:
                    continue
                wait = streak.last + self._policies[key[0]].delay(streak.failures) - now
                if wait > 0:
                    raise SignInLocked(
                        f"Too many failed sign-ins {_WHAT[key[0]]}: try again in "
                        f"{math.ceil(wait)} s (each further failure doubles the wait).", wait)

    def record_failure(self, user: str, client: str) -> None:
        """Count one failed sign-in for the user name and for the client."""
        now = self._clock()
        with self._lock:
            for key in self._keys(user, client):
                streak = self._live(key, now) or _Streak(0, now)
                self._streaks[key] = _Streak(streak.failures + 1, now)
                if streak.failures + 1 == self._policies[key[0]].max_failures:
                    logger.warning("sign-in locked %s %r after %d failures", key[0], key[1],
                                   streak.failures + 1)
            self._prune(now)

    def record_success(self, user: str, client: str) -> None:
        """Clear the user name's failures (the client's stay until they are forgotten)."""
        with self._lock:
            self._streaks.pop(self._keys(user, client)[0], None)

    def _live(self, key: tuple[str, str], now: float) -> _Streak | None:
        streak = self._streaks.get(key)
        if streak is not None and now - streak.last > self._policies[key[0]].forget_after_s:
            del self._streaks[key]
            return None
        return streak

    def _prune(self, now: float) -> None:
        if len(self._streaks) <= self._max_keys:
            return
        for key in list(self._streaks):
            self._live(key, now)
        excess = len(self._streaks) - self._max_keys
        for key, _ in sorted(self._streaks.items(), key=lambda kv: kv[1].last)[:max(excess, 0)]:
            del self._streaks[key]
