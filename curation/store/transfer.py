"""``kbcurate migrate --to postgresql://...``: copy a SQLite workspace onto a PostgreSQL server.

The copy is one PostgreSQL transaction (nothing half-written) taken while the SQLite write lock
is held (nobody writes during it). Every table is copied with its ids and row order (SQLite's
``rowid`` goes into the stand-in column); id sequences continue above every id SQLite ever
handed out. Then each table is read back: row counts and SHA-256 checksums of the rows, in key
order, must match on both sides, or the copy is rolled back. Only then does ``WS/store.toml``
switch the workspace to the server; ``WS/workspace.sqlite`` stays as it was.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curation.store.database import STORE_FILE, check_url, write_store_settings
from curation.store.dialect import ROWID
from curation.store.errors import WorkspaceError
from curation.store.labels import Labels
from curation.store.workspace import Workspace

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableCopy:
    """One table's counts and checksums on both sides."""

    table: str
    source_rows: int
    target_rows: int
    source_sha256: str
    target_sha256: str

    @property
    def ok(self) -> bool:
        return (self.source_rows, self.source_sha256) == (self.target_rows, self.target_sha256)


@dataclass(frozen=True)
class TransferReport:
    """What :func:`migrate_to_postgresql` copied (see :meth:`summary`)."""

    source: str
    target: str
    tables: tuple[TableCopy, ...]
    switched: Path | None

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)

    def summary(self) -> str:
        lines = [f"copied {self.source} -> {self.target}"]
        lines += [f"  {t.table:<20} {t.source_rows:>9} rows  sha256 {t.source_sha256[:12]}  "
                  f"{'ok' if t.ok else 'MISMATCH'}" for t in self.tables]
        if self.switched:
            lines.append(f"the workspace now uses the server ({self.switched}); delete that file "
                         "to go back to workspace.sqlite, which is unchanged")
        return "\n".join(lines)


def migrate_to_postgresql(ws: Workspace, url: str, *, replace: bool = False,
                          switch: bool = True) -> TransferReport:
    """Copy the SQLite workspace ``ws`` into the empty PostgreSQL database at ``url``.

    Args:
        ws: An open, writable SQLite workspace.
        url: ``postgresql://USER@HOST:PORT/DATABASE`` (password from PGPASSWORD / ~/.pgpass).
        replace: Overwrite a target that already holds a kbcurate workspace.
        switch: Write ``WS/store.toml`` so that the workspace uses the server afterwards.

    Raises:
        WorkspaceError: The workspace is not SQLite, an import or job is running, the target
            cannot be reached or holds data (without ``replace``), or a check failed (then
            nothing was kept on the target).
    """
    from curation.store.postgres import connect_postgresql

    if ws.engine != "sqlite":
        raise WorkspaceError(f"The workspace {ws.root} already uses {ws.conn.location} "
                             f"(see {ws.root / STORE_FILE}); migrate copies a SQLite workspace")
    check_url(url, "--to")
    ws.check_writable()
    _refuse_running_work(ws)
    Labels(ws).flush_pending()
    target = connect_postgresql(url, setting="--to", create=True)
    try:
        _prepare_target(ws, target, replace=replace)
        with ws.transaction():  # holds SQLite's write lock: the source cannot change meanwhile
            tables = _copy_all(ws.conn, target)
        report = TransferReport(ws.conn.location, target.location, tables, None)
    finally:
        target.close()
    if not report.ok:  # _copy_all rolls back first; this is the belt to its braces
        raise WorkspaceError(f"The copy did not match the source:\n{report.summary()}")
    if switch:
        report = TransferReport(report.source, report.target, report.tables,
                                write_store_settings(ws.root, url))
    logger.info("%s", report.summary())
    return report


def _refuse_running_work(ws: Workspace) -> None:
    running = ws.conn.execute(
        "SELECT (SELECT COUNT(*) FROM imports WHERE status = 'running'), "
        "(SELECT COUNT(*) FROM jobs WHERE status IN ('queued', 'running'))").fetchone()
    if running[0] or running[1]:
        raise WorkspaceError(
            f"The workspace {ws.root} has {running[0]} import(s) and {running[1]} job(s) queued "
            "or running; let them finish (or cancel them) and stop the app before migrating")


def _prepare_target(ws: Workspace, target: Any, *, replace: bool) -> None:
    """Bring the target to the source's schema version, empty."""
    if target.schema_version() > 0:
        if not replace:
            raise WorkspaceError(
                f"The database {target.location} already holds a kbcurate workspace; choose an "
                "empty database, or pass --replace to overwrite it")
        logger.warning("%s: dropping the workspace tables it held (--replace)", target.location)
        target.begin_write()
        for table in target.table_names():
            target.execute(f'DROP TABLE IF EXISTS "{table}" CASCADE')
        target.set_schema_version(0)
        target.execute("COMMIT")
    Workspace(ws.root, target).migrate()
    if target.schema_version() != ws.schema_version:
        raise WorkspaceError(f"{target.location} has schema version {target.schema_version()}, "
                             f"the workspace {ws.schema_version}; upgrade kbcurate")


def _copy_all(source: Any, target: Any) -> tuple[TableCopy, ...]:
    tables = source.table_names()
    missing = sorted(set(tables) - set(target.table_names()))
    if missing:
        raise WorkspaceError(f"{target.location} lacks the tables {', '.join(missing)}")
    sequences = dict(source.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    results = []
    target.begin_write()
    try:
        target.execute("SET CONSTRAINTS ALL DEFERRED")
        for table in tables:
            columns = _columns(source, table)
            with_rowid = ROWID in target.table_columns(table)
            read_cols = [ROWID, *columns] if with_rowid else columns
            target.copy_rows(table, read_cols, _read(source, table, read_cols, columns))
            for column in target.identity_columns_of(table):
                floor = int(sequences.get(table, 0) or 0) if column != ROWID else 0
                target.reset_identity(table, column, floor)
        for table in tables:
            results.append(_compare(source, target, table))
        if not all(r.ok for r in results):
            raise WorkspaceError("The copy did not match the source:\n" + "\n".join(
                f"  {r.table}: {r.source_rows} rows {r.source_sha256[:12]} -> {r.target_rows} "
                f"rows {r.target_sha256[:12]}" for r in results if not r.ok))
        target.execute("COMMIT")
    except BaseException:
        target.execute("ROLLBACK")
        raise
    return tuple(results)


def _columns(source: Any, table: str) -> list[str]:
    return [r[1] for r in source.execute(f'PRAGMA table_info("{table}")').fetchall()]


def _read(source: Any, table: str, read_cols: list[str], columns: list[str]) -> Iterator[Any]:
    quoted = ", ".join(f'"{c}"' for c in read_cols)
    order = _order(source, table, columns)
    yield from source.execute(f'SELECT {quoted} FROM "{table}" ORDER BY {order}')


def _order(source: Any, table: str, columns: list[str]) -> str:
    """Key order that both engines share: the integer key, else rowid, else the primary key."""
    info = source.execute(f'PRAGMA table_info("{table}")').fetchall()
    keys = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
    without_rowid = source.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                   (table,)).fetchone()[0].upper().rstrip().endswith("ROWID")
    if without_rowid:
        return ", ".join(f'"{k}"' for k in keys)
    return ROWID if len(keys) != 1 or info[[r[1] for r in info].index(keys[0])][2].upper() \
        != "INTEGER" else f'"{keys[0]}"'


def _compare(source: Any, target: Any, table: str) -> TableCopy:
    columns = _columns(source, table)
    quoted = ", ".join(f'"{c}"' for c in columns)
    order = _order(source, table, columns)
    sql = f'SELECT {quoted} FROM "{table}" ORDER BY {order}'
    n_source, sha_source = checksum(source.execute(sql))
    n_target, sha_target = checksum(target.execute(sql))
    return TableCopy(table, n_source, n_target, sha_source, sha_target)


def checksum(rows: Iterable[Any]) -> tuple[int, str]:
    """(row count, SHA-256 of the rows as JSON lines): equal on both engines for equal data."""
    digest = hashlib.sha256()
    n = 0
    for row in rows:
        digest.update(json.dumps(list(row), ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
        n += 1
    return n, digest.hexdigest()


def clone_database(ws: Workspace, dest: Path, *, empty: tuple[str, ...] = ()) -> None:
    """Write a copy of the workspace's database to the SQLite file ``dest``, with the tables
    named in ``empty`` left without rows (a scratch copy, e.g. for simulations).

    A SQLite workspace is copied with SQLite's online backup; a PostgreSQL one table by table.
    """
    from curation.store.connection import connect

    if ws.engine == "sqlite":
        import sqlite3

        target = sqlite3.connect(dest)
        try:
            ws.conn.backup(target)  # type: ignore[attr-defined]
            target.execute("PRAGMA foreign_keys = OFF")
            for table in empty:
                target.execute(f'DELETE FROM "{table}"')
            target.commit()
        finally:
            target.close()
        return
    conn = connect(dest)
    try:
        Workspace(dest.parent, conn).migrate()
        conn.execute("PRAGMA foreign_keys = OFF")
        with Workspace(dest.parent, conn).transaction():
            for table in ws.conn.table_names():
                if table not in empty:
                    _copy_back(ws.conn, conn, table)
    finally:
        conn.close()


def _copy_back(source: Any, target: Any, table: str) -> None:
    """Rows of ``table`` from a server store into a SQLite connection (ids and order kept)."""
    columns = _columns(target, table)
    read = [ROWID, *columns] if ROWID in source.table_columns(table) else columns
    quoted = ", ".join(f'"{c}"' for c in read)
    order = _order(target, table, columns)
    rows = source.execute(f'SELECT {quoted} FROM "{table}" ORDER BY {order}').fetchall()
    marks = ", ".join("?" * len(read))
    target.executemany(f'INSERT INTO "{table}" ({quoted}) VALUES ({marks})',
                       [tuple(r) for r in rows])
