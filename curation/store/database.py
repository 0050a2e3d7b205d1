"""Which engine holds a workspace's database: the store setting and the connection interface.

A workspace folder always holds its indexes, models and caches. Its database is the embedded
SQLite file ``WS/workspace.sqlite`` unless ``WS/store.toml`` names a server::

    # WS/store.toml
    url = "postgresql://kb@db.example.org:5432/curation"

The password never goes in that file (it is refused there): libpq reads it from ``PGPASSWORD``
or ``~/.pgpass``. ``kbcurate migrate --to URL`` writes the file after copying the workspace;
deleting it switches the workspace back to its SQLite file. On PostgreSQL, background jobs run
through procrastinate (workers on any machine, ``kbcurate worker``) unless the file says
``jobs = "table"`` (one worker process per job on the machine that submits it, as on SQLite).

Every module talks to the database through a :class:`StoreConnection` (``ws.conn``); the
SQLite-dialect SQL they send is translated for PostgreSQL in one place
(:mod:`curation.store.dialect`).
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from curation.store.errors import WorkspaceError

logger = logging.getLogger(__name__)

STORE_FILE = "store.toml"
DB_NAME = "workspace.sqlite"
#: URL schemes of the server stores (the embedded store has no URL).
SCHEMES = ("postgresql://", "postgres://")
ENGINES = ("sqlite", "postgresql")
#: Job queues (curation/jobs): the ``jobs`` table with one worker process per job on the
#: submitting machine, or procrastinate on the PostgreSQL server (workers on any machine).
JOB_QUEUES = ("table", "procrastinate")


class StoreCursor(Protocol):
    """What a statement returns (``sqlite3.Cursor`` or its PostgreSQL counterpart)."""

    rowcount: int
    lastrowid: int | None

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Any: ...


class StoreConnection(Protocol):
    """The interface every workspace store implements (SQLite first, PostgreSQL second).

    Statements are written once, in SQLite's dialect with ``?`` placeholders; rows read by
    name and by position. The operations whose SQL differs between engines are methods.
    """

    engine: str
    read_only_reason: str
    wait_s: float
    total_changes: int

    @property
    def location(self) -> str: ...
    @property
    def in_transaction(self) -> bool: ...
    def execute(self, sql: str, parameters: Any = (), /) -> Any: ...
    def executemany(self, sql: str, parameters: Any, /) -> Any: ...
    def close(self) -> None: ...
    def begin_write(self) -> None: ...
    def schema_version(self) -> int: ...
    def set_schema_version(self, version: int) -> None: ...
    def after_migrate(self) -> None: ...
    def stamp_inserts(self, tables: Mapping[str, tuple[str, ...]],
                      import_id: int | None) -> None: ...
    def table_names(self) -> list[str]: ...


@dataclass(frozen=True)
class StoreSettings:
    """Where a workspace's database lives.

    Attributes:
        url: The server's URL; "" for the embedded SQLite file.
        source: The file the setting came from, or the option that gave it (named in errors).
        jobs: The job queue named by ``jobs = ...`` ("" when the file names none).
    """

    url: str = ""
    source: Path | str | None = None
    jobs: str = ""

    @property
    def engine(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return "postgresql" if self.url else "sqlite"

    @property
    def setting(self) -> str:
        """How messages name the setting."""
        if isinstance(self.source, Path):
            return f"url in {self.source}"
        return self.source or "the store URL"

    @property
    def job_queue(self) -> str:
        """The job queue: the ``jobs`` setting, else procrastinate on PostgreSQL, else table."""
        return self.jobs or ("procrastinate" if self.url else "table")


def read_store_settings(root: Path) -> StoreSettings:
    """The store setting of the workspace at ``root`` (SQLite when ``store.toml`` is absent).

    Raises:
        WorkspaceError: The file cannot be read, its URL is not a PostgreSQL URL, it holds a
            password, or its ``jobs`` names no job queue.
    """
    path = root / STORE_FILE
    if not path.is_file():
        return StoreSettings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"Cannot read {path} ({exc}); expected one line "
                             'url = "postgresql://USER@HOST:PORT/DATABASE"') from exc
    url = data.get("url", "")
    if not isinstance(url, str) or not url.strip():
        raise WorkspaceError(f'{path} has no url = "postgresql://..." line; add it, or delete '
                             "the file to use the workspace's SQLite file")
    jobs = data.get("jobs", "")
    if jobs not in ("", *JOB_QUEUES):
        raise WorkspaceError(
            f"jobs in {path} is {jobs!r}. Available options: {', '.join(JOB_QUEUES)} "
            "(procrastinate: workers on any machine, the default on PostgreSQL; table: one worker "
            "process per job on the machine that submits it); or leave the line out")
    settings = StoreSettings(url.strip(), path, jobs)
    check_url(settings.url, settings.setting)
    return settings


def check_url(url: str, setting: str) -> None:
    """Raises :class:`WorkspaceError` unless ``url`` is a PostgreSQL URL without a password."""
    if not url.startswith(SCHEMES):
        raise WorkspaceError(
            f"{setting} is {url[:40]!r}: not a store URL. Available options: postgresql://"
            "USER@HOST:PORT/DATABASE (PostgreSQL), or no store.toml for the embedded SQLite file")
    from curation.store.postgres import url_has_password

    if url_has_password(url):
        raise WorkspaceError(
            f"{setting} contains a password; remove it from the URL and give it in the "
            "PGPASSWORD environment variable or in ~/.pgpass (files in the workspace must not "
            "hold secrets)")


def write_store_settings(root: Path, url: str) -> Path:
    """Write ``WS/store.toml`` naming ``url`` (checked first); returns its path."""
    path = root / STORE_FILE
    check_url(url, f"the URL for {path}")
    escaped = url.replace("\\", "\\\\").replace('"', '\\"')
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text("# Where this workspace's database lives (see docs/operations.md, \"A shared "
                   "workspace on PostgreSQL\").\n"
                   "# Delete this file to use WS/workspace.sqlite again.\n"
                   f'url = "{escaped}"\n', encoding="utf-8")
    tmp.replace(path)
    return path


def is_workspace(root: Path) -> bool:
    """Whether ``root`` holds a workspace (its SQLite file or a store setting)."""
    return (root / DB_NAME).is_file() or (root / STORE_FILE).is_file()


def open_connection(root: Path, *, read_only: bool = False, create: bool = False,
                    settings: StoreSettings | None = None) -> Any:
    """Connect to the database of the workspace at ``root``, as its store setting says.

    Args:
        root: The workspace folder.
        read_only: Open without write access.
        create: Make a new (empty) database a workspace database.
        settings: Use these instead of reading ``WS/store.toml``.

    Raises:
        WorkspaceError: The database cannot be opened (the message names the setting).
    """
    settings = settings or read_store_settings(root)
    if settings.engine == "sqlite":
        from curation.store.connection import connect

        return connect(root / DB_NAME, read_only=read_only)
    from curation.store.postgres import connect_postgresql

    return connect_postgresql(settings.url, setting=settings.setting, read_only=read_only,
                              create=create)


def workspace_content(root: Path) -> list[str]:
    """What ``root`` holds besides its database files and empty folders (indexes, models,
    rankers, grades, caches, exports, spooled labels, the users file, ...): evidence of a
    workspace that was used, whatever wrote it."""
    own = {f"{DB_NAME}{suffix}" for suffix in ("", "-wal", "-shm", "-journal")}
    held = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if entry.name in own:
            continue
        if entry.is_dir() and not entry.is_symlink() and not any(entry.iterdir()):
            continue
        held.append(entry.name)
    return held


def refuse_emptied(root: Path, *, before_open: bool = False) -> None:
    """Raise when ``root`` holds anything a used workspace leaves (:func:`workspace_content`;
    see ``Workspace._check_not_emptied``); ``before_open``: only when the database file is there
    with 0 bytes (opening it would write its header)."""
    db = root / DB_NAME
    if before_open and not (db.is_file() and db.stat().st_size == 0):
        return
    held = workspace_content(root)
    if held:
        raise WorkspaceError(
            f"{DB_NAME} in {root} is empty but the folder holds {', '.join(held)}: the "
            "workspace's database was emptied or replaced, so its documents, relations, labels, "
            "users and model registry are missing. Restore workspace.sqlite from a backup; to "
            "start afresh on purpose, run kbcurate init in a new folder")
