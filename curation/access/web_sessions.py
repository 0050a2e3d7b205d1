"""Browser sign-ins that survive a reload: a signed, expiring, server-revocable session cookie.

A Streamlit session lives as long as its websocket: F5 starts a new one, which would sign a
password user out. After a sign-in the app therefore gives the browser a cookie:

* its value is a random session id signed with the workspace's secret (``itsdangerous``
  timestamp signature, so a forged or tampered cookie is refused before any lookup, and one older
  than the time limit is refused even if its row survived);
* the ``web_sessions`` table holds only the sha256 of the id, the user, how they signed in and the
  expiry, so a copy of the database signs nobody in, and "Sign out" revokes the row (a stolen
  cookie then stops working at once);
* the cookie is ``HttpOnly`` (page scripts cannot read it) and ``SameSite=Strict``, set by a small
  server route (``curation/access/web_routes.py``) because a Streamlit script cannot send
  response headers. The script hands the route a one-time, 60-second *hand-off nonce* instead of
  the cookie value, so the value itself never appears in the page.

The role is never stored: :func:`curation.access.signin.resolve_user` looks it up on every run,
so a restored session of a user removed from the users file signs nobody in. A new password, a
new role or a removal through :class:`curation.access.users.UserStore` (``kbcurate users add`` /
``remove``) revokes every session of that user (:func:`revoke_sessions_at`), and the app checks
an open tab's remembered sign-in on every run, so such a change signs open tabs out too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from itsdangerous import BadSignature, SignatureExpired, TimestampSigner

from curation.access.signin import AuthMode, Session
from curation.store.web_sessions import (  # noqa: F401 (revoke_sessions_at re-exported)
    WebSessions,
    insert_web_session,
    revoke_sessions_at,
    revoke_web_session_row,
)
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

logger = logging.getLogger(__name__)

#: The cookie's name.
COOKIE_NAME = "kbcurate_session"
#: File in the workspace holding the signing secret (created on first use, mode 0600).
SECRET_FILE = "session_secret"
#: Environment variable that overrides the secret file (e.g. several servers on one workspace).
SECRET_ENV = "KBCURATE_SESSION_SECRET"
#: How long a sign-in lasts without signing in again: a working day.
DEFAULT_TTL_S = 12 * 3600
#: Environment variable to change it (hours).
TTL_ENV = "KBCURATE_SESSION_HOURS"
#: How long a hand-off nonce may wait for the browser to fetch its cookie.
HANDOFF_TTL_S = 60.0
_SALT = "kbcurate.web-session"
#: Only these modes are remembered: a local-mode session needs no cookie, and an OIDC session
#: is kept by Streamlit's own login cookie.
REMEMBERED = (AuthMode.USERS,)


def session_ttl() -> int:
    """Seconds a remembered sign-in lasts (``$KBCURATE_SESSION_HOURS``, default 12 h)."""
    raw = os.environ.get(TTL_ENV, "").strip()
    if not raw:
        return DEFAULT_TTL_S
    try:
        hours = float(raw)
    except ValueError:
        raise CurationError(f"{TTL_ENV}={raw!r} is not a number of hours; set it to e.g. 8 "
                            "or unset it for the default of 12") from None
    if not 0 < hours <= 24 * 30:
        raise CurationError(f"{TTL_ENV}={raw!r}: expected more than 0 and at most 720 hours")
    return int(hours * 3600)


def workspace_secret(root: str | Path) -> bytes:
    """The signing secret: ``$KBCURATE_SESSION_SECRET``, else ``WS/session_secret``.

    The file is created on first use with 32 random bytes, readable by its owner only; creation
    is atomic (``O_EXCL``), so two servers starting at once agree on one secret.

    Raises:
        CurationError: The file exists but is empty or unreadable.
    """
    env = os.environ.get(SECRET_ENV, "")
    if env:
        if len(env) < 32:
            raise CurationError(f"{SECRET_ENV} is too short ({len(env)} characters): use at least "
                                "32 random characters, e.g. from `python -c 'import secrets; "
                                "print(secrets.token_hex(32))'`")
        return env.encode()
    path = Path(root) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32))
        logger.info("created the session secret %s", path)
    try:
        value = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CurationError(f"Cannot read the session secret {path}: {exc}. Delete the file to "
                            "make a new one (everyone signs in again).") from exc
    if len(value) < 32:
        raise CurationError(f"The session secret {path} is empty or too short; delete it to make "
                            "a new one (everyone signs in again).")
    return value.encode()


def _signer(root: str | Path) -> TimestampSigner:
    return TimestampSigner(workspace_secret(root), salt=_SALT)


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def create_web_session(ws: Workspace, session: Session, *, ttl_s: int | None = None) -> str:
    """Remember a sign-in; returns the cookie value (signed session id).

    Raises:
        CurationError: The session's mode is not remembered (local or OIDC).
    """
    if session.mode not in REMEMBERED:
        raise CurationError(f"{session.mode.value} sign-ins are not remembered by a cookie")
    ttl = session_ttl() if ttl_s is None else ttl_s
    session_id = secrets.token_urlsafe(32)
    now = _now()
    with ws.transaction() as conn:
        insert_web_session(conn, _hash(session_id), session.name, session.mode.value,
                           now.isoformat(), (now + timedelta(seconds=ttl)).isoformat(),
                           prune_before=(now - timedelta(days=1)).isoformat())
        ws.audit(session.name, "sign_in", "web_session", _hash(session_id)[:12],
                 after={"mode": session.mode.value, "expires_in_s": ttl})
    return _signer(ws.root).sign(session_id).decode()


def _session_id(ws: Workspace, cookie: str | None, ttl_s: int) -> str | None:
    if not cookie:
        return None
    try:
        return _signer(ws.root).unsign(cookie, max_age=ttl_s).decode()
    except SignatureExpired:
        logger.info("expired session cookie refused")
    except (BadSignature, UnicodeDecodeError):
        logger.warning("session cookie with a bad signature refused")
    return None


def restore_web_session(ws: Workspace, cookie: str | None, *,
                        ttl_s: int | None = None) -> Session | None:
    """The sign-in a cookie stands for, or None (missing, forged, expired or signed out).

    The caller still resolves the user (:func:`curation.access.signin.resolve_user`): the role
    and the user's existence are checked on every run, not here.
    """
    ttl = session_ttl() if ttl_s is None else ttl_s
    session_id = _session_id(ws, cookie, ttl)
    if session_id is None:
        return None
    row = WebSessions(ws).find(_hash(session_id))
    if row is None or row.revoked_at is not None:
        return None
    if datetime.fromisoformat(row.expires_at) <= _now():
        return None
    try:
        return Session(row.user, AuthMode(row.mode))
    except ValueError:
        return None


def revoke_web_session(ws: Workspace, cookie: str | None) -> bool:
    """Sign a cookie out for good (its row is marked revoked); True when one was revoked."""
    session_id = _session_id(ws, cookie, 10 * 365 * 86400)  # an expired one may be revoked too
    if session_id is None:
        return False
    with ws.transaction() as conn:
        user = revoke_web_session_row(conn, _hash(session_id), _now().isoformat())
        if user is None:
            return False
        ws.audit(user, "sign_out", "web_session", _hash(session_id)[:12])
    return True


class Handoffs:
    """One-time nonces that let the server route set a cookie the page never sees.

    Process-wide (the Streamlit script threads and the ASGI routes share one process); a nonce
    is valid once, for :data:`HANDOFF_TTL_S` seconds.
    """

    def __init__(self, ttl_s: float = HANDOFF_TTL_S) -> None:
        self._ttl = ttl_s
        self._lock = threading.Lock()
        self._items: dict[str, tuple[float, str, int]] = {}

    def issue(self, cookie: str, max_age_s: int) -> str:
        nonce = secrets.token_urlsafe(24)
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (t, _, _) in self._items.items() if now - t > self._ttl]:
                del self._items[key]
            self._items[nonce] = (now, cookie, max_age_s)
        return nonce

    def redeem(self, nonce: str) -> tuple[str, int] | None:
        """The cookie value and its max age for a valid nonce (then forgotten), else None."""
        with self._lock:
            item = self._items.pop(nonce, None)
        if item is None or time.monotonic() - item[0] > self._ttl:
            return None
        return item[1], item[2]


#: The process's hand-offs.
HANDOFFS = Handoffs()
