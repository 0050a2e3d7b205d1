"""The embedded store: the workspace database as one SQLite file (the default).

Opening it read-write puts it in WAL mode; it opens read-only when it must be.

A database whose file or folder is not writable (or a caller that asks) is opened read-only with a
``file:...?mode=ro`` URI, without the WAL and migration steps that need writes. Every statement
runs through :class:`WorkspaceConnection`, so an environmental SQLite error (lock wait ran out,
read-only, full disk) arrives as a :class:`~curation.store.errors.WorkspaceError` subclass.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from time import monotonic, sleep
from typing import Any

from curation.store.errors import WorkspaceError, sqlite_error_kind, translate_sqlite_error

logger = logging.getLogger(__name__)

#: Seconds a write waits for another process's write lock before it fails as busy.
LOCK_WAIT_S = 30.0
#: Seconds between two tries for the write lock while another process holds it.
POLL_S = 0.001


class WorkspaceConnection(sqlite3.Connection):
    """A connection whose environmental SQLite errors are translated (see module docstring).

    It is the first implementation of :class:`~curation.store.database.StoreConnection`: besides
    ``execute``/``executemany`` it has the few operations whose SQL differs between engines.

    Attributes:
        db_path: The database file (named in messages).
        read_only_reason: Why it was opened read-only ("" when writable).
        wait_s: The current lock wait in seconds (see :func:`set_lock_wait`).
    """

    engine = "sqlite"
    db_path: Path | None = None
    read_only_reason: str = ""
    wait_s: float = LOCK_WAIT_S

    @property
    def location(self) -> str:
        """The database file, as messages name it."""
        return str(self.db_path or "")

    def begin_write(self) -> None:
        """Start a write transaction (``BEGIN IMMEDIATE``), waiting at most :attr:`wait_s` for
        other writers.

        SQLite's own busy handler sleeps longer and longer between tries (up to 100 ms), so a
        waiter missed the short gaps between an import's batches again and again: in a stress
        run one label waited 2.5-5.5 s while others got through (issue 35 item 14). Here the
        wait polls every :data:`POLL_S` instead; with the import's pause after each batch
        (:data:`curation.store.import_log.YIELD_S`) every waiting label gets the lock within a
        batch or two.
        """
        deadline = monotonic() + self.wait_s
        super().execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    super().execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    left = deadline - monotonic()
                    if sqlite_error_kind(exc) != "busy" or left <= 0:
                        error = self.translate(exc)
                        if error is exc:
                            raise
                        raise error from exc
                    pause_for_lock(min(POLL_S, left))
        finally:
            super().execute(f"PRAGMA busy_timeout = {max(0, int(self.wait_s * 1000))}")

    def schema_version(self) -> int:
        """The applied migrations (``PRAGMA user_version``)."""
        return int(self.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, version: int) -> None:
        """Record ``version`` (inside the migration's transaction)."""
        self.execute(f"PRAGMA user_version = {int(version)}")

    def after_migrate(self) -> None:
        """Nothing to install: SQLite needs no helper functions or triggers."""

    def stamp_inserts(self, tables: Mapping[str, tuple[str, ...]], import_id: int | None) -> None:
        """Stamp rows inserted into ``tables`` (until the transaction ends) with ``import_id``;
        None stops stamping. Uses temporary triggers keyed by each table's row columns."""
        for table in tables:
            self.execute(f"DROP TRIGGER IF EXISTS temp.kbcurate_stamp_{table}")
        if import_id is None:
            return
        for table, key in tables.items():
            where = " AND ".join(f"{c} = NEW.{c}" for c in key)
            self.execute(
                f"CREATE TEMP TRIGGER kbcurate_stamp_{table} AFTER INSERT ON main.{table} BEGIN "
                f"UPDATE {table} SET import_id = {int(import_id)} WHERE {where}; END")

    def table_names(self) -> list[str]:
        """The workspace's tables (SQLite's own excluded), sorted."""
        return [r[0] for r in self.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]

    def translate(self, exc: sqlite3.Error) -> BaseException:
        """The user-facing error for ``exc`` (``exc`` itself when it is not environmental)."""
        translated = translate_sqlite_error(exc, self.db_path, wait_s=self.wait_s,
                                            read_only_reason=self.read_only_reason)
        return exc if translated is None else translated

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            error = self.translate(exc)
            if error is exc:
                raise
            raise error from exc

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            error = self.translate(exc)
            if error is exc:
                raise
            raise error from exc


def pause_for_lock(seconds: float) -> None:
    """Sleep between two tries for the write lock (its own name: tests that patch
    ``time.sleep`` for their own retries do not see these polls)."""
    sleep(seconds)


def lock_wait_of(conn: Any) -> float:
    """Seconds ``conn`` waits for the write lock."""
    return float(getattr(conn, "wait_s", LOCK_WAIT_S))


def set_lock_wait(conn: Any, seconds: float) -> None:
    """Make ``conn`` wait at most ``seconds`` for another process's write lock."""
    if not isinstance(conn, sqlite3.Connection):
        conn.set_lock_wait(seconds)
        return
    conn.execute(f"PRAGMA busy_timeout = {max(0, int(seconds * 1000))}")
    if isinstance(conn, WorkspaceConnection):
        conn.wait_s = seconds


def not_writable_reason(path: Path) -> str:
    """Why the database at ``path`` cannot be written ("" when it can)."""
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} is not writable"
    if not os.access(path.parent, os.W_OK):
        return f"the folder {path.parent} is not writable"
    return ""


#: The database's files: they hold labels, notes, the audit log and session hashes.
DB_SUFFIXES = ("", "-wal", "-shm", "-journal")
#: Mode of the database files (owner only), and with group access (the workspace folder is
#: group-writable: ``kbcurate init --group-access``).
PRIVATE_MODE, GROUP_MODE = 0o600, 0o660


def database_mode(path: Path) -> int:
    """The mode the database at ``path`` gets: owner-only, or owner and group when its folder
    grants the group write access (an admin asked for group access)."""
    try:
        shared = path.parent.stat().st_mode & 0o020
    except OSError:
        shared = 0
    return GROUP_MODE if shared else PRIVATE_MODE


def restrict_database_files(path: Path) -> None:
    """Create the database file with :func:`database_mode` when it is missing (SQLite gives its
    ``-wal`` and ``-shm`` files the database file's mode), and take away from existing database
    files every permission bit beyond that mode (a world-readable database made by an older
    kbcurate, or copied in). Files of another owner are left alone (logged)."""
    mode = database_mode(path)
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        except FileExistsError:  # another process created it meanwhile
            pass
        else:
            try:
                os.fchmod(fd, mode)  # the umask may have taken the group's bits
            finally:
                os.close(fd)
    for suffix in DB_SUFFIXES:
        target = Path(f"{path}{suffix}")
        try:
            st = target.lstat()
        except FileNotFoundError:
            continue
        current = st.st_mode & 0o777
        if current & ~mode == 0 or not target.is_file() or target.is_symlink():
            continue
        if st.st_uid != os.geteuid():
            logger.warning("%s is readable beyond its owner (mode %o) and belongs to another "
                           "user; ask them to run chmod %o on it", target, current, mode)
            continue
        os.chmod(target, current & mode)
        logger.info("%s: mode %o -> %o (the database holds labels, notes and the audit log)",
                    target, current, current & mode)


def connect(path: Path, *, read_only: bool = False) -> WorkspaceConnection:
    """Open the workspace database at ``path``.

    Args:
        path: The database file (created when missing and writable).
        read_only: Open read-only even when it could be written.

    Raises:
        WorkspaceError: Not a workspace database, or it cannot be opened (the message says why).
    """
    reason = "opened read-only" if read_only else not_writable_reason(path)
    if not reason:
        try:
            restrict_database_files(path)
        except OSError as exc:  # a read-only mount found late, a full disk: the open says why
            logger.debug("could not set the database's mode: %s", exc)
    try:
        conn = _open_read_only(path, reason) if reason else _probe(str(path), path, "")
        if not reason:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                logger.warning("%s: WAL mode unavailable (journal_mode=%s)", path, mode)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as exc:
        raise translate_sqlite_error(exc, path) or WorkspaceError(
            f"{path} is not a kbcurate workspace database ({exc})") from exc
    return conn


def _open_read_only(path: Path, reason: str) -> WorkspaceConnection:
    """``mode=ro``; a WAL database in a read-only folder has no -shm file and cannot get one, so
    then it is opened ``immutable`` (nobody can write it there either)."""
    uri = path.as_uri() + "?mode=ro"
    try:
        return _probe(uri, path, reason)
    except WorkspaceError as exc:
        logger.info("%s: mode=ro failed (%s); opening it immutable", path, exc)
        return _probe(uri + "&immutable=1", path, reason)


def _probe(target: str, path: Path, reason: str) -> WorkspaceConnection:
    """Connect and read once: SQLite opens lazily, so errors show up here, not later."""
    conn = sqlite3.connect(target, uri=target.startswith("file:"), timeout=LOCK_WAIT_S,
                           isolation_level=None, check_same_thread=False,
                           factory=WorkspaceConnection)
    conn.db_path, conn.read_only_reason, conn.wait_s = path, reason, LOCK_WAIT_S
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn
