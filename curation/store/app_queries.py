"""Small reads behind the app pages: change stamps, pick lists and existence checks.

The pages (``app_pages/``) and :mod:`curation.evaluation.reporting` call these instead of
querying the database themselves.
"""

from __future__ import annotations

from curation.store.workspace import Workspace


def relations_stamp(ws: Workspace) -> str:
    """A stamp that changes when a relation or a curator synonym changes (the entities of a
    relation carry the workspace synonyms): counts, newest ``updated_at`` and newest rowid."""
    n, last = ws.conn.execute("SELECT COUNT(*), MAX(updated_at) FROM relations").fetchone()
    s, s_last = ws.conn.execute("SELECT COUNT(*), MAX(rowid) FROM synonyms").fetchone()
    return f"{n}:{last}:{s}:{s_last}"


def entity_exists(ws: Workspace, key: str) -> bool:
    """Whether the workspace holds an entity with this key."""
    return ws.conn.execute("SELECT 1 FROM entities WHERE key = ?", (key,)).fetchone() is not None


def label_users(ws: Workspace) -> list[str]:
    """The names of the users who gave a label (superseded ones included), sorted."""
    return [r[0] for r in ws.conn.execute("SELECT DISTINCT user FROM labels ORDER BY user")]


def model_versions(ws: Workspace) -> list[str]:
    """The model versions recorded with labels (superseded ones included), sorted."""
    return [r[0] for r in ws.conn.execute(
        "SELECT DISTINCT model_version FROM labels ORDER BY model_version")]
