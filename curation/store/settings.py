"""Workspace settings (``meta`` keys) that the search wing's indexes read: the default encoder
backend (``encoder_backend``), the vector store (``vector_store``) and the workspace's creation
time, which names its vector collections. :class:`Settings`, built on a workspace
(``Settings(ws)``), reads and writes them; values are stored as text, their callers parse them.
"""

from __future__ import annotations

from curation.store.workspace import Workspace


class Settings:
    """The workspace settings kept in ``meta``."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def value(self, key: str) -> str | None:
        """The ``meta`` value stored under ``key``, or None when it is unset."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def put(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` (inserted or replaced), inside ``ws.transaction()``."""
        self.ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                             "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def created_at(self) -> str | None:
        """When the workspace was created (``meta`` key ``created_at``), or None when unrecorded."""
        row = self.ws.conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
        return row[0] if row else None
