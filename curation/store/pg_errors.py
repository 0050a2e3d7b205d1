"""What the PostgreSQL store says about itself: the missing-extra error, URLs safe to print
(never a password) and the translation of environmental psycopg errors into the workspace's
:class:`~curation.store.errors.WorkspaceError` types (split from :mod:`curation.store.postgres`).
"""

from __future__ import annotations

import re

from curation.store.errors import (
    WorkspaceBusyError,
    WorkspaceError,
    WorkspaceFullError,
    WorkspaceReadOnlyError,
)

try:  # psycopg is an optional extra
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    psycopg = None
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None


def require_psycopg() -> None:
    """Raises :class:`WorkspaceError` naming the extra when psycopg is not installed."""
    if _IMPORT_ERROR is not None:
        raise WorkspaceError(
            "This workspace's store is PostgreSQL, which needs psycopg: pip install "
            f"'kbcurate[postgresql]' ({_IMPORT_ERROR})") from _IMPORT_ERROR


def safe_url(url: str) -> str:
    """``url`` for messages: user, host, port and database, never a password."""
    try:
        parts = conninfo_to_dict(url) if psycopg else {}
    except Exception:  # noqa: BLE001 - a malformed URL is reported elsewhere
        return re.sub(r"//[^@/]*@", "//***@", url)
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname', '')}"


def url_has_password(url: str) -> bool:
    """Whether ``url`` carries a password (refused in files: use PGPASSWORD or ~/.pgpass)."""
    require_psycopg()
    try:
        return bool(conninfo_to_dict(url).get("password"))
    except psycopg.ProgrammingError as exc:
        raise WorkspaceError(f"{safe_url(url)} is not a valid PostgreSQL URL ({exc}); expected "
                             "postgresql://USER@HOST:PORT/DATABASE") from exc


# -- errors ---------------------------------------------------------------------------------
_BUSY = ("55P03", "40001", "40P01")  # lock wait ran out, serialization failure, deadlock
_READ_ONLY = ("25006", "42501")      # read-only transaction, insufficient privilege


def translate_pg_error(exc: BaseException, where: str, setting: str, *, wait_s: float = 30.0,
                       read_only_reason: str = "") -> WorkspaceError | None:
    """The :class:`WorkspaceError` for a psycopg error caused by the environment, or None.

    Args:
        exc: What psycopg raised.
        where: The database (:func:`safe_url`).
        setting: Where its URL is configured (named so the user knows what to fix).
        wait_s: The lock wait, for the busy message.
        read_only_reason: Why the workspace was opened read-only, when it was.
    """
    if psycopg is None or not isinstance(exc, psycopg.Error):
        return None
    code = getattr(exc, "sqlstate", None) or ""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if code in _BUSY:
        return WorkspaceBusyError(
            f"The workspace database {where} is busy ({first}): another curator's write or a "
            f"job held the write lock and we waited for {wait_s:g} s; retry")
    if code in _READ_ONLY:
        why = f" ({read_only_reason})" if read_only_reason else ""
        return WorkspaceReadOnlyError(
            f"The workspace database {where} is read-only{why} ({first}). This step needs to "
            f"write: give the PostgreSQL user write access, or change {setting}")
    if code == "53100":
        return WorkspaceFullError(
            f"Disk full on the PostgreSQL server of {where} ({first}); free space there and "
            "retry; the unfinished change was not saved")
    if code.startswith(("08", "57P", "53")) or (
            isinstance(exc, psycopg.OperationalError) and not code):
        return WorkspaceError(
            f"Lost or refused connection to the workspace database {where} ({first}). Check "
            f"that the PostgreSQL server runs and that {setting} names it; the unfinished "
            "change was not saved")
    return None
