"""Workspace settings (``meta`` keys) that the search wing's indexes read: the default encoder
backend (``encoder_backend``), the vector store (``vector_store``) and the workspace's creation
time, which names its vector collections. Values are stored as text; their callers parse them.
"""

from __future__ import annotations

from curation.store.workspace import Workspace


def setting_value(ws: Workspace, key: str) -> str | None:
    """The ``meta`` value stored under ``key``, or None when it is unset."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def put_setting(ws: Workspace, key: str, value: str) -> None:
    """Store ``value`` under ``key`` (inserted or replaced); call inside ``ws.transaction()``."""
    ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))


def created_at(ws: Workspace) -> str | None:
    """When the workspace was created (``meta`` key ``created_at``), or None when unrecorded."""
    row = ws.conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
    return row[0] if row else None
