"""Opening the workspace database: read-write in WAL mode, or read-only when it must be.

A database whose file or folder is not writable (or a caller that asks) is opened read-only with a
``file:...?mode=ro`` URI, without the WAL and migration steps that need writes. Every statement
runs through :class:`WorkspaceConnection`, so an environmental SQLite error (lock wait ran out,
read-only, full disk) arrives as a :class:`~curation.store.errors.WorkspaceError` subclass.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from curation.store.errors import WorkspaceError, translate_sqlite_error

logger = logging.getLogger(__name__)

#: Seconds a write waits for another process's write lock before it fails as busy.
LOCK_WAIT_S = 30.0


class WorkspaceConnection(sqlite3.Connection):
    """A connection whose environmental SQLite errors are translated (see module docstring).

    Attributes:
        db_path: The database file (named in messages).
        read_only_reason: Why it was opened read-only ("" when writable).
        wait_s: The current lock wait in seconds (see :func:`set_lock_wait`).
    """

    db_path: Path | None = None
    read_only_reason: str = ""
    wait_s: float = LOCK_WAIT_S

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


def lock_wait_of(conn: sqlite3.Connection) -> float:
    """Seconds ``conn`` waits for the write lock."""
    return float(getattr(conn, "wait_s", LOCK_WAIT_S))


def set_lock_wait(conn: sqlite3.Connection, seconds: float) -> None:
    """Make ``conn`` wait at most ``seconds`` for another process's write lock."""
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


def connect(path: Path, *, read_only: bool = False) -> WorkspaceConnection:
    """Open the workspace database at ``path``.

    Args:
        path: The database file (created when missing and writable).
        read_only: Open read-only even when it could be written.

    Raises:
        WorkspaceError: Not a workspace database, or it cannot be opened (the message says why).
    """
    reason = "opened read-only" if read_only else not_writable_reason(path)
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
