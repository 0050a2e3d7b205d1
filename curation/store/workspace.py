"""The workspace: one folder per curation project.

Layout::

    WS/
      workspace.sqlite   documents, relations, entities/synonyms, labels, models, jobs, audit log
      indexes/           FAISS / BM25 files per model version (plain files, never pickled)
      models/            checkpoints (safetensors)
      schemas/           user relation schemas (TOML), added with ``kbcurate schema add``
      cache/             embedding and download caches
      exports/           CSV / JSONL exports

The database runs in WAL mode so the app can read while a background job writes. Everything a user
changes goes through :meth:`Workspace.transaction` (all or nothing) and is written to the audit log.
A different backend (PostgreSQL) is a new class with the same public methods.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from curation.store.migrations import MIGRATIONS, SCHEMA_VERSION
from kb_sources.errors import CurationError
from kb_sources.schema import Schema, load_schema, load_schemas

logger = logging.getLogger(__name__)

DB_NAME = "workspace.sqlite"
AREAS = ("indexes", "models", "schemas", "cache", "exports")


class WorkspaceError(CurationError):
    """The workspace folder or database cannot be used."""


def utcnow() -> str:
    """Current UTC time as ISO-8601 text (what every timestamp column stores)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class WorkspaceStats:
    """Counts shown by ``kbcurate stats``."""

    documents: int
    documents_by_source: dict[str, int]
    annotations: int
    relations: int
    relations_by_source: dict[str, int]
    relations_by_schema: dict[str, int]
    partial_relations_by_schema: dict[str, int]
    relations_with_pmids: int
    entities: int
    synonyms: int
    citations: int
    mesh_terms: int
    labels: int
    labels_by_grade: dict[str, int]
    model_versions: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Workspace:
    """A curation workspace backed by SQLite (WAL).

    Use :meth:`init` to create one and :meth:`open` to open an existing one.
    """

    def __init__(self, root: Path, conn: sqlite3.Connection) -> None:
        self.root = root
        self.conn = conn

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def init(cls, root: str | Path) -> Workspace:
        """Create a workspace folder (or open it when it already is one)."""
        root = Path(root).expanduser().resolve()
        if root.exists() and not root.is_dir():
            raise WorkspaceError(f"{root} exists and is not a folder; choose another path")
        if root.is_dir() and any(root.iterdir()) and not (root / DB_NAME).exists():
            raise WorkspaceError(
                f"{root} is a non-empty folder without {DB_NAME}; choose an empty or new folder"
            )
        for area in AREAS:
            (root / area).mkdir(parents=True, exist_ok=True)
        ws = cls(root, _connect(root / DB_NAME))
        ws.migrate()
        with ws.transaction():
            ws.conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('created_at', ?)", (utcnow(),)
            )
        return ws

    @classmethod
    def open(cls, root: str | Path) -> Workspace:
        """Open an existing workspace, migrating its database forward if needed."""
        root = Path(root).expanduser().resolve()
        if not (root / DB_NAME).is_file():
            raise WorkspaceError(
                f"No workspace at {root} (no {DB_NAME}). Create one with: kbcurate init {root}"
            )
        ws = cls(root, _connect(root / DB_NAME))
        ws.migrate()
        for area in AREAS:
            (root / area).mkdir(exist_ok=True)
        return ws

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema version --------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self, migrations: list[str] | None = None) -> int:
        """Apply pending forward migrations; returns the number applied.

        Raises:
            WorkspaceError: The database was written by a newer kbcurate.
        """
        steps = MIGRATIONS if migrations is None else migrations
        current = self.schema_version
        if current > len(steps):
            raise WorkspaceError(
                f"{self.root / DB_NAME} has schema version {current}, newer than this kbcurate "
                f"supports ({len(steps)}); upgrade kbcurate"
            )
        for version in range(current, len(steps)):
            with self.transaction():
                for statement in _split_sql(steps[version]):
                    self.conn.execute(statement)
                self.conn.execute(f"PRAGMA user_version = {version + 1}")
            logger.info("workspace %s migrated to schema version %d", self.root, version + 1)
        return len(steps) - current

    # -- transactions and audit ------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One all-or-nothing transaction (``BEGIN IMMEDIATE``): rolled back on any exception."""
        if self.conn.in_transaction:
            yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    def audit(
        self,
        actor: str,
        action: str,
        object_type: str,
        object_id: str,
        before: Any = None,
        after: Any = None,
    ) -> None:
        """Append one audit-log row (call inside a transaction)."""
        self.conn.execute(
            "INSERT INTO audit_log(ts, actor, action, object_type, object_id, before, after) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (utcnow(), actor, action, object_type, object_id, _json_or_none(before),
             _json_or_none(after)),
        )

    def audit_log(self, object_type: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Most recent audit rows first, optionally for one object type."""
        sql = "SELECT * FROM audit_log"
        params: tuple[Any, ...] = ()
        if object_type:
            sql += " WHERE object_type = ?"
            params = (object_type,)
        sql += " ORDER BY id DESC LIMIT ?"
        rows = self.conn.execute(sql, (*params, limit)).fetchall()
        return [dict(r) for r in rows]

    # -- schemas ---------------------------------------------------------------------------
    def schemas(self) -> dict[str, Schema]:
        """Built-in schemas plus the workspace's own (``schemas/*.toml``)."""
        return load_schemas([self.root / "schemas"])

    def add_schema(self, path: str | Path, actor: str = "cli") -> Schema:
        """Validate a schema TOML and copy it into the workspace."""
        schema = load_schema(path)
        dest = self.root / "schemas" / f"{schema.name}.toml"
        shutil.copyfile(path, dest)
        with self.transaction():
            self.audit(actor, "add", "schema", schema.name, after={"path": str(dest)})
        return schema

    # -- counts ----------------------------------------------------------------------------
    def stats(self) -> WorkspaceStats:
        """Counts of everything in the workspace."""
        one = self._scalar
        return WorkspaceStats(
            documents=one("SELECT COUNT(*) FROM documents"),
            documents_by_source=self._grouped("SELECT source, COUNT(*) FROM documents GROUP BY 1"),
            annotations=one("SELECT COUNT(*) FROM annotations"),
            relations=one("SELECT COUNT(*) FROM relations"),
            relations_by_source=self._grouped(
                "SELECT source, COUNT(*) FROM relations GROUP BY 1"),
            relations_by_schema=self._grouped(
                "SELECT schema, COUNT(*) FROM relations GROUP BY 1"),
            partial_relations_by_schema=self._grouped(
                "SELECT schema, COUNT(DISTINCT query_key) FROM relations GROUP BY 1"),
            relations_with_pmids=one(
                "SELECT COUNT(DISTINCT relation_id) FROM relation_pmids"),
            entities=one("SELECT COUNT(*) FROM entities"),
            synonyms=one("SELECT COUNT(*) FROM synonyms"),
            citations=one("SELECT COUNT(*) FROM citations"),
            mesh_terms=one("SELECT COUNT(DISTINCT term) FROM mesh_tree"),
            labels=one("SELECT COUNT(*) FROM labels WHERE superseded_by IS NULL"),
            labels_by_grade=self._grouped(
                "SELECT grade, COUNT(*) FROM labels WHERE superseded_by IS NULL GROUP BY 1"),
            model_versions=[f"{r[0]}@{r[1]}" for r in self.conn.execute(
                "SELECT name, version FROM models ORDER BY id")],
            schema_version=self.schema_version,
        )

    def _scalar(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        return int(self.conn.execute(sql, params).fetchone()[0])

    def _grouped(self, sql: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.conn.execute(sql)}


def _connect(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.row_factory = sqlite3.Row
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise WorkspaceError(f"{path} is not a kbcurate workspace database ({exc})") from exc
    if str(mode).lower() != "wal":
        logger.warning("%s: WAL mode unavailable (journal_mode=%s)", path, mode)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def _json_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
