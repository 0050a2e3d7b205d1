"""The ``web_sessions`` rows of remembered browser sign-ins: store, look up and revoke them.

:mod:`curation.access.web_sessions` signs the cookies and decides what a row means; the SQL is
here: :class:`WebSessions`, built on a workspace (``WebSessions(ws)``), looks a sign-in up and
revokes a user's, and two functions write inside a caller's transaction. Revoking all of a user's
sessions (:meth:`WebSessions.revoke_user`, and :func:`revoke_sessions_at` for the workspace at a
path, re-exported by :mod:`curation.access.web_sessions`) lives in the store too, so that changing
a user in :class:`curation.access.users.UserStore` revokes their sessions without the users module
importing the sign-in modules that import it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from curation.store.database import StoreConnection, is_workspace
from curation.store.workspace import Workspace

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebSessionRow:
    """One stored sign-in (times as ISO strings; ``revoked_at`` None while it is valid)."""

    user: str
    mode: str
    expires_at: str
    revoked_at: str | None


def insert_web_session(conn: StoreConnection, id_hash: str, user: str, mode: str,
                       created_at: str, expires_at: str, *, prune_before: str) -> None:
    """Store a sign-in and drop the rows that expired before ``prune_before`` (inside the
    caller's transaction, which audits it)."""
    conn.execute("INSERT INTO web_sessions(id_hash, user, mode, created_at, expires_at) "
                 "VALUES (?, ?, ?, ?, ?)", (id_hash, user, mode, created_at, expires_at))
    # expired rows are of no use to anyone: keep the table small
    conn.execute("DELETE FROM web_sessions WHERE expires_at < ?", (prune_before,))


def revoke_web_session_row(conn: StoreConnection, id_hash: str, revoked_at: str) -> str | None:
    """Mark one sign-in revoked (inside the caller's transaction).

    Returns:
        The user it belonged to, or None when no unrevoked row has this id hash (nothing
        changed).
    """
    row = conn.execute("SELECT user FROM web_sessions WHERE id_hash = ? AND revoked_at IS NULL",
                       (id_hash,)).fetchone()
    if row is None:
        return None
    conn.execute("UPDATE web_sessions SET revoked_at = ? WHERE id_hash = ?",
                 (revoked_at, id_hash))
    return row["user"]


def revoke_sessions_at(root: str | Path, user: str, *, reason: str = "") -> int:
    """:meth:`WebSessions.revoke_user` in the workspace at ``root``; 0 when ``root`` holds no
    workspace (a users file kept elsewhere has no remembered sign-ins).

    Raises:
        CurationError: The workspace cannot be opened or written (the message says why).
    """
    if not is_workspace(Path(root)):
        return 0
    with Workspace.open(root) as ws:
        return WebSessions(ws).revoke_user(user, reason=reason)


class WebSessions:
    """The web_sessions table: the app's sign-in sessions."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def find(self, id_hash: str) -> WebSessionRow | None:
        """The stored sign-in with this id hash, revoked or not; None when there is none."""
        row = self.ws.conn.execute("SELECT user, mode, expires_at, revoked_at FROM web_sessions "
                                   "WHERE id_hash = ?", (id_hash,)).fetchone()
        if row is None:
            return None
        return WebSessionRow(row["user"], row["mode"], row["expires_at"], row["revoked_at"])

    def revoke_user(self, user: str, *, reason: str = "") -> int:
        """Sign a user out everywhere (e.g. after a password change); returns the rows revoked.

        Args:
            user: The user name (a users-file entry).
            reason: Why, for the audit trail (e.g. "password or role changed").
        """
        with self.ws.transaction() as conn:
            cur = conn.execute("UPDATE web_sessions SET revoked_at = ? WHERE user = ? AND "
                               "revoked_at IS NULL", (datetime.now(UTC).isoformat(), user))
            if cur.rowcount:
                self.ws.audit(user, "sign_out_everywhere", "web_session", user,
                              after={"revoked": cur.rowcount, "reason": reason})
        if cur.rowcount:
            logger.info("signed %s out of %d browser session(s): %s", user, cur.rowcount, reason)
        return cur.rowcount
