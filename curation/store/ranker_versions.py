"""The learned ranker's versions in the workspace database (issue 35).

:class:`RankerVersions`, built on a workspace (``RankerVersions(ws)``), holds the SQL of the
``ranker_versions`` table: one row per version ``<schema>-ranker@N``, as the ``models`` table has
one per dense version. The database allocates the numbers (``UNIQUE(schema, number)``: two
processes saving at once never get the same one), and keeps the SHA-256 of the model file and
the manifest, so a file edited beside the model (a new checksum written into ``manifest.json``)
is refused. A version being written is a ``saving`` row that names its temporary folder and its
process; a ``saved`` row is a complete version. ``checked_sha256`` records the checksum whose file
passed the model check (:mod:`curation.ranking.model_check`), so it runs once per file.

The grammar of version ids lives here, built from the one grammar of schema names
(:data:`kb_sources.schema.SCHEMA_NAME`): every valid schema name, ``-`` included, gets ranker
versions; an id is read by its last ``-ranker@``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from curation.store.import_log import pid_alive, this_host
from curation.store.workspace import Workspace, utcnow
from kb_sources.schema import SCHEMA_NAME

#: ``<schema>-ranker@N``: any valid schema name, then the number (1, 2, ...).
RANKER_ID = re.compile(rf"(?P<schema>{SCHEMA_NAME})-ranker@(?P<n>[1-9][0-9]{{0,8}})")
SAVING, SAVED = "saving", "saved"
#: A save on another machine counts as running for this long (seconds).
REMOTE_SAVE_S = 3600.0


def ranker_id(schema: str, number: int) -> str:
    """The id of version ``number`` of ``schema``."""
    return f"{schema}-ranker@{number}"


def parse_ranker_id(ident: str) -> tuple[str, int] | None:
    """(schema, number) of a version id, or None when it is none."""
    m = RANKER_ID.fullmatch(ident or "") if isinstance(ident, str) else None
    return (m["schema"], int(m["n"])) if m else None


@dataclass(frozen=True)
class RankerVersionRow:
    """One row of ``ranker_versions`` (``manifest`` is the stored JSON text, checked by the
    reader: :mod:`curation.ranking.versions`)."""

    ident: str
    schema: str
    number: int
    status: str
    file: str
    sha256: str
    checked: bool
    manifest: str
    created_by: str
    created_at: str
    tmp: str = ""
    pid: int | None = None
    host: str = ""

    @property
    def writer_alive(self) -> bool:
        """Whether the process saving this row may still run (on another machine: for
        :data:`REMOTE_SAVE_S` seconds; a save takes seconds)."""
        if self.host and self.host != this_host():
            try:
                then = datetime.fromisoformat(self.created_at)
            except ValueError:
                return True
            then = then if then.tzinfo else then.replace(tzinfo=UTC)
            return (datetime.now(UTC) - then).total_seconds() < REMOTE_SAVE_S
        return bool(self.pid) and pid_alive(int(self.pid))


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


class RankerVersions:
    """The ``ranker_versions`` table: numbers, checksums and manifests of ranker versions."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def allocate(self, schema: str, *, created_by: str, tmp: str, floor: int = 0) -> str:
        """Reserve the next number of ``schema`` (above ``floor``, the largest found on disk) as
        a ``saving`` row naming the temporary folder ``tmp`` and this process; returns the id."""
        with self.ws.transaction():
            top = self.ws.conn.execute("SELECT COALESCE(MAX(number), 0) FROM ranker_versions "
                                       "WHERE schema = ?", (schema,)).fetchone()[0]
            number = max(int(top), floor) + 1
            ident = ranker_id(schema, number)
            self.ws.conn.execute(
                "INSERT INTO ranker_versions(ident, schema, number, status, created_by, "
                "created_at, tmp, pid, host) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ident, schema, number, SAVING, created_by, utcnow(), tmp, os.getpid(),
                 this_host()))
        return ident

    def finish(self, ident: str, *, file: str, sha256: str, manifest: dict[str, Any]) -> None:
        """Mark a ``saving`` row complete (its file and checksum are our own output: checked);
        audited. Call inside the transaction that renames the folder into place."""
        with self.ws.transaction():
            self.ws.conn.execute(
                "UPDATE ranker_versions SET status = ?, file = ?, sha256 = ?, checked_sha256 = ?, "
                "manifest = ?, tmp = '', pid = NULL, host = '' WHERE ident = ? AND status = ?",
                (SAVED, file, sha256, sha256, _dumps(manifest), ident, SAVING))
            self.ws.audit(str(manifest.get("created_by", "")), "save", "ranker", ident,
                          after={"sha256": sha256, "file": file})

    def discard(self, ident: str) -> None:
        """Drop a ``saving`` row (its save failed or its process is gone)."""
        with self.ws.transaction():
            self.ws.conn.execute("DELETE FROM ranker_versions WHERE ident = ? AND status = ?",
                                 (ident, SAVING))

    def register(self, row: RankerVersionRow, *, actor: str) -> bool:
        """Record a version found on disk without a row (written before versions were kept in
        the database); False when a row of that id or number exists meanwhile. Audited."""
        with self.ws.transaction():
            if self.ws.conn.execute("SELECT 1 FROM ranker_versions WHERE ident = ? OR "
                                    "(schema = ? AND number = ?)",
                                    (row.ident, row.schema, row.number)).fetchone():
                return False
            self.ws.conn.execute(
                "INSERT INTO ranker_versions(ident, schema, number, status, file, sha256, "
                "manifest, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row.ident, row.schema, row.number, SAVED, row.file, row.sha256, row.manifest,
                 row.created_by, row.created_at))
            self.ws.audit(actor, "register", "ranker", row.ident,
                          after={"sha256": row.sha256, "found": "on disk"})
        return True

    def get(self, ident: str) -> RankerVersionRow | None:
        """The row of ``ident`` (any status), or None."""
        row = self.ws.conn.execute("SELECT * FROM ranker_versions WHERE ident = ?",
                                   (ident,)).fetchone()
        return _row(row) if row else None

    def saved(self, schema: str | None = None) -> list[RankerVersionRow]:
        """The complete versions (of one schema), by schema and number."""
        sql, params = "SELECT * FROM ranker_versions WHERE status = ?", [SAVED]
        if schema is not None:
            sql, params = sql + " AND schema = ?", [*params, schema]
        return [_row(r) for r in self.ws.conn.execute(sql + " ORDER BY schema, number", params)]

    def saving(self) -> list[RankerVersionRow]:
        """Versions being written now, or by a process that died."""
        return [_row(r) for r in self.ws.conn.execute(
            "SELECT * FROM ranker_versions WHERE status = ? ORDER BY id", (SAVING,))]

    def idents(self) -> set[str]:
        """Every id with a row (any status)."""
        return {r[0] for r in self.ws.conn.execute("SELECT ident FROM ranker_versions")}

    def exists(self, ident: str, schema: str | None = None) -> bool:
        """Whether ``ident`` is a complete version (of ``schema``)."""
        row = self.get(ident)
        return bool(row and row.status == SAVED and (schema is None or row.schema == schema))

    def set_manifest(self, ident: str, manifest: dict[str, Any], *, actor: str) -> None:
        """Replace a complete version's manifest (metrics, the gate's verdict); audited."""
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE ranker_versions SET manifest = ? WHERE ident = ? AND "
                                 "status = ?", (_dumps(manifest), ident, SAVED))
            self.ws.audit(actor, "update", "ranker", ident,
                          after={"metrics": manifest.get("metrics"), "gate": manifest.get("gate")})

    def mark_checked(self, ident: str, sha256: str) -> None:
        """Record that the file with checksum ``sha256`` passed the model check."""
        with self.ws.transaction():
            self.ws.conn.execute("UPDATE ranker_versions SET checked_sha256 = ? WHERE ident = ? "
                                 "AND sha256 = ?", (sha256, ident, sha256))


def _row(row: Any) -> RankerVersionRow:
    sha = str(row["sha256"] or "")
    return RankerVersionRow(
        ident=row["ident"], schema=row["schema"], number=int(row["number"]),
        status=row["status"], file=row["file"], sha256=sha,
        checked=bool(sha) and row["checked_sha256"] == sha, manifest=row["manifest"],
        created_by=row["created_by"], created_at=row["created_at"], tmp=row["tmp"] or "",
        pid=row["pid"], host=row["host"] or "")
