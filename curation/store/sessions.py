"""Revoking a user's remembered browser sign-ins (the ``web_sessions`` rows).

Here in the store, not in :mod:`curation.access.web_sessions` (which re-exports both functions),
so that changing a user in :class:`curation.access.users.UserStore` revokes their sessions
without the users module importing the sign-in modules that import it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from curation.store.backend import is_workspace
from curation.store.workspace import Workspace

logger = logging.getLogger(__name__)


def revoke_user_sessions(ws: Workspace, user: str, *, reason: str = "") -> int:
    """Sign a user out everywhere (e.g. after a password change); returns the rows revoked.

    Args:
        ws: The workspace.
        user: The user name (a users-file entry).
        reason: Why, for the audit trail (e.g. "password or role changed").
    """
    with ws.transaction() as conn:
        cur = conn.execute("UPDATE web_sessions SET revoked_at = ? WHERE user = ? AND "
                           "revoked_at IS NULL", (datetime.now(UTC).isoformat(), user))
        if cur.rowcount:
            ws.audit(user, "sign_out_everywhere", "web_session", user,
                     after={"revoked": cur.rowcount, "reason": reason})
    if cur.rowcount:
        logger.info("signed %s out of %d browser session(s): %s", user, cur.rowcount, reason)
    return cur.rowcount


def revoke_sessions_at(root: str | Path, user: str, *, reason: str = "") -> int:
    """:func:`revoke_user_sessions` in the workspace at ``root``; 0 when ``root`` holds no
    workspace (a users file kept elsewhere has no remembered sign-ins).

    Raises:
        CurationError: The workspace cannot be opened or written (the message says why).
    """
    if not is_workspace(Path(root)):
        return 0
    with Workspace.open(root) as ws:
        return revoke_user_sessions(ws, user, reason=reason)
