"""The audit log's rows as the workspace hands them out.

Every change a user makes is written by :meth:`~curation.store.workspace.Workspace.audit` inside
its transaction; :meth:`~curation.store.workspace.Workspace.audit_log` reads the rows back as
:class:`AuditEntry` values, newest first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AuditEntry:
    """One row of the audit log.

    Attributes:
        id: The row's id (increasing).
        ts: When (UTC, ISO 8601).
        actor: Who made the change ("cli", a user name, a job).
        action: What was done ("add", "relabel", "activate", ...).
        object_type: The kind of object ("label", "model", "setting", ...).
        object_id: Which object.
        before: Its JSON image before the change, as stored (None for a new object).
        after: Its JSON image after the change, as stored (None when removed).
        import_id: The import that made the change, if one did.
    """

    id: int
    ts: str
    actor: str
    action: str
    object_type: str
    object_id: str
    before: str | None
    after: str | None
    import_id: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> AuditEntry:
        """An entry from a database row read by column name."""
        return cls(id=int(row["id"]), ts=row["ts"], actor=row["actor"], action=row["action"],
                   object_type=row["object_type"], object_id=row["object_id"],
                   before=row["before"], after=row["after"], import_id=row["import_id"])

    def before_value(self) -> Any:
        """``before`` parsed from JSON (None when there was none)."""
        return None if self.before is None else json.loads(self.before)

    def after_value(self) -> Any:
        """``after`` parsed from JSON (None when there was none)."""
        return None if self.after is None else json.loads(self.after)
