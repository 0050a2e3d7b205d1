"""Errors of the workspace store, and the one place where SQLite errors become them.

(PostgreSQL's errors are translated in :mod:`curation.store.postgres`; one it does not translate
arrives as :class:`StoreDatabaseError`. Code outside the store catches :data:`DATABASE_ERRORS`
and never names an engine's exception types.)

SQLite reports a full disk, a read-only file or a write lock held by another process as a bare
``sqlite3.OperationalError``. :func:`translate_sqlite_error` turns those into
:class:`WorkspaceError` subclasses (all :class:`~kb_sources.errors.CurationError`) whose messages
name the workspace and the fix, so the CLI and the app show one line instead of a traceback.
Errors that point at a bug (a constraint violated, a malformed statement) are not translated.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Protocol

from kb_sources.errors import CurationError


class PermissionDenied(CurationError):
    """The signed-in user's role does not allow the action (re-exported by
    :mod:`curation.access.users`)."""


class Actor(Protocol):
    """Who changes the store's state: a :class:`curation.access.users.User` (the store does not
    import the access wing; it needs the name and whether the role is admin)."""

    @property
    def name(self) -> str: ...

    @property
    def is_admin(self) -> bool: ...


def require_admin_actor(actor: Actor | None, action: str) -> str:
    """The actor's name, or :class:`PermissionDenied` unless it is an admin."""
    if actor is None or isinstance(actor, str) or not getattr(actor, "is_admin", False):
        who = (f"{actor} (a plain name, not a signed-in user)" if isinstance(actor, str)
               else getattr(actor, "name", None) or "an anonymous user")
        raise PermissionDenied(f"{action} needs the admin role; {who} may not do it")
    return actor.name


class WorkspaceError(CurationError):
    """The workspace folder or database cannot be used."""


class WorkspaceBusyError(WorkspaceError):
    """Another process (an import, a job) held the write lock longer than we waited."""


class WorkspaceReadOnlyError(WorkspaceError):
    """The workspace cannot be written (file or folder permissions, or opened read-only)."""


class WorkspaceFullError(WorkspaceError):
    """The disk (or the database's page limit) is full."""


class StoreDatabaseError(Exception):
    """An error of a server store (PostgreSQL) that points at a bug, not the environment: the
    counterpart of an untranslated ``sqlite3.Error`` (the original is its ``__cause__``)."""


#: What a store raises for errors no layer translated (a bug or a damaged workspace).
DATABASE_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, StoreDatabaseError)


# (error-name prefix, message fragment used when the name is missing, kind)
_KINDS: tuple[tuple[str, str, str], ...] = (
    ("SQLITE_BUSY", "database is locked", "busy"),
    ("SQLITE_LOCKED", "database table is locked", "busy"),
    ("SQLITE_READONLY", "readonly database", "readonly"),
    ("SQLITE_PERM", "access permission denied", "readonly"),
    ("SQLITE_FULL", "database or disk is full", "full"),
    ("SQLITE_IOERR", "disk i/o error", "io"),
    ("SQLITE_CANTOPEN", "unable to open database file", "cantopen"),
    ("SQLITE_NOTADB", "file is not a database", "notadb"),
    ("SQLITE_CORRUPT", "database disk image is malformed", "corrupt"),
)


def sqlite_error_kind(exc: BaseException) -> str | None:
    """``busy``, ``readonly``, ``full``, ``io``, ``cantopen``, ``notadb``, ``corrupt`` or None.

    Uses the SQLite error name where Python gives one, else the message text.
    """
    if not isinstance(exc, sqlite3.Error):
        return None
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    text = str(exc).lower()
    for prefix, fragment, kind in _KINDS:
        if name.startswith(prefix) or fragment in text:
            return kind
    return None


def translate_sqlite_error(
    exc: BaseException,
    db: str | Path | None,
    *,
    wait_s: float | None = None,
    read_only_reason: str = "",
) -> WorkspaceError | None:
    """The :class:`WorkspaceError` a user should see for ``exc``, or None (a bug, not the
    environment: let it propagate unchanged).

    Args:
        exc: The error SQLite raised.
        db: The workspace database file (None when unknown).
        wait_s: How long the connection waited for the write lock, for the busy message.
        read_only_reason: Why the workspace was opened read-only, when it was.
    """
    kind = sqlite_error_kind(exc)
    if kind is None:
        return None
    where = f"workspace {Path(db).parent}" if db else "workspace"
    detail = f"({exc})"
    if kind == "busy":
        waited = f" for {wait_s:g} s" if wait_s is not None else ""
        return WorkspaceBusyError(
            f"The {where} is busy {detail}: another import or job held the write lock and we "
            f"waited{waited}. Another import is running; retry when it has finished")
    if kind == "readonly":
        return read_only_error(db, read_only_reason, detail)
    if kind == "full":
        place = Path(db).parent if db else "the workspace folder"
        return WorkspaceFullError(
            f"Disk full: the {where} cannot grow {detail}. Free space in {place} (or on its "
            "disk) and retry; the unfinished change was not saved")
    return WorkspaceError(f"{_OTHER[kind].format(where=where, db=db)} {detail}")


_OTHER = {
    "io": "Disk I/O error in the {where}: check that the disk has free space and is still "
          "mounted, then retry; the unfinished change was not saved",
    "cantopen": "Cannot open the database of the {where}: check that the folder exists and that "
                "you may read it (and write it, for commands that change something)",
    "notadb": "{db} is not a kbcurate workspace database; choose the folder that kbcurate init "
              "created",
    "corrupt": "The database of the {where} is damaged: restore workspace.sqlite from a backup, "
               "or export what still reads (kbcurate labels export) into a new workspace",
}


def read_only_error(db: str | Path | None, reason: str = "",
                    detail: str = "") -> WorkspaceReadOnlyError:
    """The error for a write to a read-only workspace (``reason``: why it is read-only)."""
    where = f"workspace {Path(db).parent}" if db else "workspace"
    why = f" ({reason})" if reason else ""
    extra = f" {detail}" if detail else ""
    return WorkspaceReadOnlyError(
        f"The {where} is read-only{why}{extra}. This step needs to write: make the folder and "
        "its workspace.sqlite writable (chmod u+w) or run it as their owner. Read-only commands "
        "(stats, relations, query, labels export to another folder) work as is")


#: errno values of a write refused by the file system: a read-only mount, or permissions.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
#: errno values of a full disk or quota.
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def describe_os_error(exc: OSError, db: str | Path | None = None) -> str:
    """One line for a file error that reached the top level (CLI, app): a write to a read-only
    workspace gives the read-only message, a full disk the disk-full one."""
    where = f"{exc.filename}: " if exc.filename else ""
    reason = f"{where}{exc.strerror or exc}"
    if exc.errno in READ_ONLY_ERRNOS:
        return str(read_only_error(db, reason))
    if exc.errno in FULL_ERRNOS:
        place = Path(db).parent if db else "the workspace folder"
        return (f"Disk full ({reason}). Free space in {place} (or on its disk) and retry; the "
                "unfinished step was not saved")
    return (f"Cannot use a file ({reason}). Check that it exists and that you may read it (and "
            "write it, for commands that change something), then retry")


def describe_database_error(exc: BaseException, db: str | Path | None = None) -> str:
    """One line for any of :data:`DATABASE_ERRORS` that reached the top level (CLI, app)."""
    if isinstance(exc, sqlite3.Error):
        return describe_sqlite_error(exc, db)
    return (f"unexpected database error in the workspace store: {exc}. This is a bug in "
            "kbcurate or a damaged workspace; rerun with --verbose for the details and report it")


def describe_sqlite_error(exc: sqlite3.Error, db: str | Path | None = None) -> str:
    """One line for any SQLite error that reached the top level (CLI, app) untranslated."""
    translated = translate_sqlite_error(exc, db)
    if translated is not None:
        return str(translated)
    name = getattr(exc, "sqlite_errorname", "") or type(exc).__name__
    where = f" in workspace {Path(db).parent}" if db else ""
    return (f"unexpected database error{where}: {exc} ({name}). This is a bug in kbcurate or a "
            "damaged workspace; rerun with --verbose for the details and report it")
