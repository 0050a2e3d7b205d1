"""The workspace: one folder per curation project.

Layout::

    WS/
      workspace.sqlite   documents, relations, entities/synonyms, labels, models, jobs, audit log
      store.toml         only when the database is on PostgreSQL (curation/store/database.py)
      indexes/           FAISS / BM25 files per model version (plain files, never pickled)
      models/            checkpoints (safetensors)
      schemas/           user relation schemas (TOML), added with ``kbcurate schema add``
      cache/             embedding and download caches
      exports/           CSV / JSONL exports

The database runs in WAL mode so the app can read while a background job writes. Everything a user
changes goes through :meth:`Workspace.transaction` (all or nothing) and is written to the audit log.
The store setting (``WS/store.toml``) can put the database on PostgreSQL instead; the workspace
then talks to it through the same :class:`~curation.store.database.StoreConnection` interface.

SQLite errors caused by the environment (lock wait ran out, read-only files, full disk) arrive as
:class:`~curation.store.errors.WorkspaceError` subclasses naming the workspace and the fix. A
workspace whose database or folder is not writable opens read-only (``mode=ro``): reading works,
and a write says "workspace is read-only".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from curation.store.audit import AuditEntry
from curation.store.clock import utcnow
from curation.store.connection import LOCK_WAIT_S, lock_wait_of, set_lock_wait
from curation.store.database import (
    DB_NAME,
    STORE_FILE,
    StoreConnection,
    StoreSettings,
    check_url,
    is_workspace,
    open_connection,
    refuse_emptied,
    write_store_settings,
)
from curation.store.errors import (
    DATABASE_ERRORS,
    WorkspaceBusyError,
    WorkspaceError,
    WorkspaceFullError,
    WorkspaceReadOnlyError,
    read_only_error,
)
from curation.store.import_log import recover_on_open
from curation.store.label_versions import link_label_versions
from curation.store.migrations import MIGRATIONS, SCHEMA_VERSION
from curation.store.schema_files import replaced_schema, schema_file, workspace_schemas
from curation.store.workspace_stats import WorkspaceStats, count_everything
from kb_sources.schema import Schema, load_schema

__all__ = ["AREAS", "DB_NAME", "LOCK_WAIT_S", "Workspace", "WorkspaceBusyError", "WorkspaceError",
           "WorkspaceFullError", "WorkspaceReadOnlyError", "WorkspaceStats", "utcnow"]

logger = logging.getLogger(__name__)

#: The schema version whose labels reference their model version (rows linked on migrating).
LABEL_VERSION_IDS = 9
AREAS = ("indexes", "models", "schemas", "cache", "exports")


class Workspace:
    """A curation workspace backed by SQLite (WAL), or by PostgreSQL when its store setting says.

    Use :meth:`init` to create one and :meth:`open` to open an existing one.
    """

    def __init__(self, root: Path, conn: StoreConnection) -> None:
        self.root = root
        self.conn = conn

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def init(cls, root: str | Path, *, store_url: str | None = None,
             group_access: bool = False) -> Workspace:
        """Create a workspace folder (or open it when it already is one).

        A new folder is made owner-only (0700) and its database 0600: they hold labels, notes,
        the audit log and session hashes.

        Args:
            root: The workspace folder.
            store_url: Keep the database on this PostgreSQL server (an empty database; the
                password from PGPASSWORD or ~/.pgpass) instead of ``WS/workspace.sqlite``.
            group_access: Share the folder with its group instead (0770 with the set-group-id
                bit, so new files keep the group; the database 0660).
        """
        root = Path(root).expanduser().resolve()
        if root.exists() and not root.is_dir():
            raise WorkspaceError(f"{root} exists and is not a folder; choose another path")
        if root.is_dir() and any(root.iterdir()) and not is_workspace(root):
            raise WorkspaceError(
                f"{root} is a non-empty folder without {DB_NAME}; choose an empty or new folder"
            )
        try:
            fresh = not root.is_dir() or not any(root.iterdir())
            root.mkdir(parents=True, exist_ok=True)
            if fresh or group_access:
                root.chmod(0o2770 if group_access else 0o700)
            for area in AREAS:
                (root / area).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(f"Cannot create the workspace folders in {root} "
                                 f"({exc.strerror}); choose a folder you may write to") from exc
        settings = None
        if store_url:
            check_url(store_url, "--store")
            settings = StoreSettings(store_url, "--store")
        refuse_emptied(root, before_open=True)
        ws = cls(root, open_connection(root, create=True, settings=settings))
        try:
            ws._check_not_emptied()
            ws.migrate()
            if store_url:
                write_store_settings(root, store_url)
        except BaseException:
            ws.close()
            raise
        with ws.transaction():
            ws.conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('created_at', ?)", (utcnow(),)
            )
        return ws

    @classmethod
    def open(cls, root: str | Path, *, read_only: bool = False) -> Workspace:
        """Open an existing workspace, migrating its database forward if needed.

        Args:
            root: The workspace folder.
            read_only: Open without write access. A workspace whose database or folder is not
                writable is opened read-only anyway (reads work; writes raise
                :class:`WorkspaceReadOnlyError`).

        Raises:
            WorkspaceError: No workspace there, not a workspace database, written by a newer
                kbcurate, or read-only and in need of a migration.
        """
        root = Path(root).expanduser().resolve()
        if not is_workspace(root):
            raise WorkspaceError(
                f"No workspace at {root} (no {DB_NAME} nor {STORE_FILE}). Create one with: "
                f"kbcurate init {root}"
            )
        refuse_emptied(root, before_open=True)
        ws = cls(root, open_connection(root, read_only=read_only))
        try:
            ws._check_not_emptied()
            if ws.read_only:
                ws._check_readable_version()
                return ws
            ws.migrate()
            for area in AREAS:
                (root / area).mkdir(exist_ok=True)
        except BaseException:
            ws.close()
            raise
        recover_on_open(ws)  # imports a killed process left unfinished
        return ws

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def read_only(self) -> bool:
        """True when this workspace was opened without write access."""
        return bool(self.read_only_reason)

    @property
    def read_only_reason(self) -> str:
        """Why the workspace is read-only ("" when it is writable)."""
        return getattr(self.conn, "read_only_reason", "")

    @property
    def engine(self) -> str:
        """The engine holding the database: ``sqlite`` or ``postgresql``."""
        return str(getattr(self.conn, "engine", "sqlite"))

    def check_writable(self) -> None:
        """Raises :class:`WorkspaceReadOnlyError` when the workspace was opened read-only."""
        if not self.read_only:
            return
        if self.engine == "sqlite":
            raise read_only_error(self.root / DB_NAME, self.read_only_reason)
        raise WorkspaceReadOnlyError(
            f"The workspace {self.root} (database {self.conn.location}) is read-only "
            f"({self.read_only_reason}); this step needs to write: open it without read-only")

    def _check_not_emptied(self) -> None:
        """Refuse an empty database (schema version 0) in a folder that holds anything a used
        workspace leaves (indexes, models, rankers, grades, spooled labels, ...): its database
        was emptied or replaced, and migrating it would silently
        make a new, empty workspace over the old one's files.

        Raises:
            WorkspaceError: Naming what the folder holds and how to restore it.
        """
        if self.engine == "sqlite" and self.schema_version == 0:
            refuse_emptied(self.root)

    def _check_readable_version(self) -> None:
        current = self.schema_version
        if current > SCHEMA_VERSION:
            self.migrate()  # raises the "newer than this kbcurate" error
        if current < SCHEMA_VERSION:
            raise WorkspaceReadOnlyError(
                f"The workspace {self.root} is read-only ({self.read_only_reason}) and has schema "
                f"version {current}; this kbcurate needs version {SCHEMA_VERSION} and must "
                "upgrade it, which needs write access. Make it writable and open it once "
                "(e.g. kbcurate stats), then it can be read-only again")

    # -- schema version --------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return self.conn.schema_version()

    def migrate(self, migrations: list[str] | None = None) -> int:
        """Apply pending forward migrations; returns the number applied.

        Raises:
            WorkspaceError: The database was written by a newer kbcurate.
        """
        steps = MIGRATIONS if migrations is None else migrations
        current = self.schema_version
        if current > len(steps):
            raise WorkspaceError(
                f"{self.conn.location} has schema version {current}, newer than this kbcurate "
                f"supports ({len(steps)}); upgrade kbcurate"
            )
        for version in range(current, len(steps)):
            with self.transaction():
                for statement in _split_sql(steps[version]):
                    self.conn.execute(statement)
                if version + 1 == LABEL_VERSION_IDS and migrations is None:
                    link_label_versions(self.conn)
                self.conn.set_schema_version(version + 1)
            logger.info("workspace %s migrated to schema version %d", self.root, version + 1)
        self.conn.after_migrate()
        return len(steps) - current

    # -- transactions and audit ------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[StoreConnection]:
        """One all-or-nothing transaction (SQLite ``BEGIN IMMEDIATE``; on PostgreSQL the writers'
        lock): rolled back on any exception.

        Raises:
            WorkspaceReadOnlyError: The workspace was opened read-only.
            WorkspaceBusyError: Another process held the write lock longer than the lock wait.
            WorkspaceFullError: The disk is full (the transaction is rolled back).
        """
        if self.conn.in_transaction:
            yield self.conn
            return
        self.check_writable()
        self.conn.begin_write()
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        """Roll back if a transaction is still open. SQLite rolls back by itself on some errors
        (a full disk); a failed rollback is logged so the error that caused it stays the one
        the user sees."""
        if not self.conn.in_transaction:
            return
        try:
            self.conn.execute("ROLLBACK")
        except (*DATABASE_ERRORS, WorkspaceError) as exc:
            logger.warning("%s: rollback failed (%s)", self.root, exc)

    @contextmanager
    def lock_wait(self, seconds: float) -> Iterator[None]:
        """Wait at most ``seconds`` for another process's write lock inside this block."""
        previous = lock_wait_of(self.conn)
        set_lock_wait(self.conn, seconds)
        try:
            yield
        finally:
            set_lock_wait(self.conn, previous)

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

    def audit_log(self, object_type: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """Most recent audit rows first, optionally for one object type."""
        sql = "SELECT * FROM audit_log"
        params: tuple[Any, ...] = ()
        if object_type:
            sql += " WHERE object_type = ?"
            params = (object_type,)
        sql += " ORDER BY id DESC LIMIT ?"
        rows = self.conn.execute(sql, (*params, limit)).fetchall()
        return [AuditEntry.from_row(r) for r in rows]

    # -- schemas ---------------------------------------------------------------------------
    def schemas(self) -> dict[str, Schema]:
        """Built-in schemas plus the workspace's own (``schemas/*.toml``)."""
        return workspace_schemas(self.root)

    def add_schema(self, path: str | Path, actor: str = "cli", *, replace: bool = False) -> Schema:
        """Validate a schema TOML and copy it into the workspace.

        Args:
            path: The schema TOML file.
            actor: Who adds it (for the audit log).
            replace: Allow replacing a built-in schema or a different workspace schema of the
                same name; the replacement is audited with both versions.

        Raises:
            SchemaError: The file is not a valid schema, or its name is taken and ``replace`` is
                False.
        """
        schema = load_schema(path)
        dest = schema_file(self.root, schema)
        new_text = Path(path).read_text(encoding="utf-8")
        replaced = replaced_schema(schema, dest, new_text, self.schemas(), path, replace)
        with self.transaction():
            if replaced is None:
                self.audit(actor, "add", "schema", schema.name, after={"path": str(dest)})
            else:
                self.audit(actor, "replace", "schema", schema.name, before=replaced,
                           after={"path": str(dest), "toml": new_text})
            dest.write_text(new_text, encoding="utf-8")
        return schema

    # -- counts ----------------------------------------------------------------------------
    def stats(self) -> WorkspaceStats:
        """Counts of everything in the workspace."""
        return count_everything(self.conn, self.schema_version)


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (no semicolons inside our literals)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def _json_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
