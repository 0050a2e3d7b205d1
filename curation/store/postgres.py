"""The workspace store on PostgreSQL (psycopg 3), with the surface of the SQLite connection.

:class:`PgConnection` runs the modules' SQLite-dialect statements through
:func:`~curation.store.dialect.to_postgresql` and answers like ``sqlite3``: cursors with
``fetchone``/``fetchall``/iteration, ``rowcount`` and ``lastrowid``; rows readable by name and by
position; integers for booleans and whole-number sums (those results are shaped in
:mod:`curation.store.pg_rows`). Its connection is in autocommit mode, so a read outside
:meth:`Workspace.transaction` sees every committed write, as in SQLite.

Writers are serialised as in SQLite: :meth:`PgConnection.begin_write` opens a transaction and
takes one transaction-scoped advisory lock, waiting at most the lock wait. Readers never wait
(MVCC), which is what WAL gives SQLite. Environmental errors (server down, wrong URL, lock wait
ran out, permissions, disk full) arrive as :class:`~curation.store.errors.WorkspaceError`
subclasses that name the setting (``url`` in ``WS/store.toml``).

psycopg is imported only here and in the store's other PostgreSQL modules (``pg_rows``,
``pg_errors``, ``pg_jobs``); install it with ``pip install 'kbcurate[postgresql]'``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from curation.store.dialect import ROWID, support_sql, to_postgresql
from curation.store.errors import StoreDatabaseError, WorkspaceError
from curation.store.pg_errors import (  # noqa: F401 - re-exported for callers
    require_psycopg,
    safe_url,
    translate_pg_error,
    url_has_password,
)
from curation.store.pg_rows import (  # noqa: F401 - Row re-exported for callers
    PgCursor,
    Row,
    register_sqlite_types,
    row_factory,
)
from curation.store.tracked import TRACKED

logger = logging.getLogger(__name__)

#: Key of the advisory lock that serialises writers (one per database).
WRITE_LOCK_KEY = 0x6B6263  # "kbc"
#: Version of the helper objects :meth:`PgConnection.after_migrate` installs.
SUPPORT_VERSION = "1"
STORE_TABLE = "kbcurate_store"
_INSERT = re.compile(r'^\s*INSERT\s+INTO\s+"?(\w+)"?', re.IGNORECASE)
_WRITES = ("insert", "update", "delete")

try:  # psycopg is an optional extra
    import psycopg
    from psycopg.pq import TransactionStatus
except ImportError:  # pragma: no cover - require_psycopg (pg_errors) names the extra
    psycopg = None


class PgConnection:
    """A workspace connection to PostgreSQL (see the module docstring).

    Attributes:
        url: The database URL (never printed: see :attr:`location`).
        setting: Where the URL was configured, named in error messages.
        read_only_reason: Why it was opened read-only ("" when writable).
        wait_s: Seconds a write waits for another writer before it fails as busy.
        total_changes: Rows inserted, updated or deleted through this connection.
    """

    engine = "postgresql"
    db_path = None

    def __init__(self, pg: Any, url: str, setting: str, read_only_reason: str = "") -> None:
        self._pg = pg
        self.url = url
        self.setting = setting
        self.read_only_reason = read_only_reason
        self.wait_s = 30.0
        self.total_changes = 0
        self._identity: dict[str, str] | None = None

    @property
    def location(self) -> str:
        """The database, as messages name it (no password)."""
        return safe_url(self.url)

    @property
    def in_transaction(self) -> bool:
        return self._pg.info.transaction_status != TransactionStatus.IDLE

    # -- statements ----------------------------------------------------------------------
    def execute(self, sql: str, parameters: Any = (), /) -> PgCursor:
        """Run one SQLite-dialect statement (translated); ``?`` placeholders."""
        translated = to_postgresql(sql)
        if translated is None:
            return PgCursor(self._pg.cursor(), exhausted=True)
        returning = self._returning(translated)
        if returning:
            translated += f" RETURNING {returning}"
        cur = self._pg.cursor(row_factory=row_factory(ROWID not in sql.lower()))
        try:
            cur.execute(translated, tuple(parameters))
        except psycopg.Error as exc:
            raise self.translate(exc) from exc
        self._count(translated, cur)
        if returning:
            row = cur.fetchone()
            return PgCursor(cur, lastrowid=None if row is None else int(row[0]), exhausted=True)
        return PgCursor(cur)

    def executemany(self, sql: str, parameters: Any, /) -> PgCursor:
        """Run one statement for each parameter tuple (one round trip per batch)."""
        translated = to_postgresql(sql)
        cur = self._pg.cursor()
        if translated is None:
            return PgCursor(cur, exhausted=True)
        try:
            cur.executemany(translated, [tuple(p) for p in parameters])
        except psycopg.Error as exc:
            raise self.translate(exc) from exc
        self._count(translated, cur)
        return PgCursor(cur, exhausted=True)

    def _count(self, translated: str, cur: Any) -> None:
        if translated.lstrip()[:6].lower() in _WRITES and cur.rowcount > 0:
            self.total_changes += cur.rowcount

    def _returning(self, translated: str) -> str:
        """The id column to return for ``lastrowid`` ("" when the statement needs none)."""
        match = _INSERT.match(translated)
        if not match or " returning " in translated.lower() or \
                " select " in translated.lower():
            return ""
        return self.identity_columns().get(match.group(1).lower(), "")

    def identity_columns(self) -> dict[str, str]:
        """table -> its ``INTEGER PRIMARY KEY`` column (the ids ``lastrowid`` reports)."""
        if self._identity is None:
            rows = self._raw(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND is_identity = 'YES' "
                "AND column_name <> %s", (ROWID,))
            self._identity = {str(t): str(c) for t, c in rows}
        return self._identity

    def _raw(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A PostgreSQL statement as written (no translation); its rows."""
        try:
            cur = self._pg.execute(sql, tuple(params) or None)
        except psycopg.Error as exc:
            raise self.translate(exc) from exc
        return cur.fetchall() if cur.description else []

    def close(self) -> None:
        self._pg.close()

    # -- the operations whose SQL differs between engines --------------------------------
    def begin_write(self) -> None:
        """``BEGIN`` and the writers' lock, waiting at most :attr:`wait_s` (one round trip)."""
        wait_ms = max(1, int(self.wait_s * 1000))  # 0 would mean "wait forever"
        try:
            self._raw(f"BEGIN; SET LOCAL lock_timeout = {wait_ms}; "
                      f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})")
        except BaseException:
            if self.in_transaction:
                self._raw("ROLLBACK")
            raise

    def set_lock_wait(self, seconds: float) -> None:
        """Wait at most ``seconds`` for another writer (applied by :meth:`begin_write`)."""
        self.wait_s = seconds

    def schema_version(self) -> int:
        rows = self._raw(f"SELECT value FROM {STORE_TABLE} WHERE key = 'schema_version'")
        return int(rows[0][0]) if rows else 0

    def set_schema_version(self, version: int) -> None:
        self._raw(f"UPDATE {STORE_TABLE} SET value = %s WHERE key = 'schema_version'",
                  (str(int(version)),))

    def after_migrate(self) -> None:
        """Install (once per :data:`SUPPORT_VERSION`) what SQLite has built in: ``json_extract``
        and the triggers that stamp an import's rows (:meth:`stamp_inserts`)."""
        self._identity = None
        rows = self._raw(f"SELECT value FROM {STORE_TABLE} WHERE key = 'support_version'")
        if rows and rows[0][0] == SUPPORT_VERSION:
            return
        self.begin_write()
        try:
            for statement in support_sql(TRACKED):
                self._raw(statement)
            self._raw(f"INSERT INTO {STORE_TABLE}(key, value) VALUES ('support_version', %s) "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                      (SUPPORT_VERSION,))
            self._raw("COMMIT")
        except BaseException:
            self._raw("ROLLBACK")
            raise

    def stamp_inserts(self, tables: Mapping[str, tuple[str, ...]], import_id: int | None) -> None:
        """Stamp rows inserted in this transaction with ``import_id`` (None stops): the
        triggers read a transaction-local setting."""
        del tables  # every tracked table has the trigger
        self._raw("SELECT set_config('kbcurate.import_id', %s, true)",
                  ("" if import_id is None else str(int(import_id)),))

    def table_names(self) -> list[str]:
        """The workspace's tables (the store's own bookkeeping excluded), sorted."""
        return [str(r[0]) for r in self._raw(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename <> %s ORDER BY tablename", (STORE_TABLE,))]

    # -- bulk copy (kbcurate migrate --to) ----------------------------------------------
    def table_columns(self, table: str) -> list[str]:
        """The columns of ``table`` in table order (the stand-in rowid included)."""
        return [str(r[0]) for r in self._raw(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = %s ORDER BY ordinal_position", (table,))]

    def identity_columns_of(self, table: str) -> list[str]:
        """The identity columns of ``table`` (its id and/or the stand-in rowid)."""
        return [str(r[0]) for r in self._raw(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND table_name = %s AND is_identity = 'YES'", (table,))]

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Append ``rows`` (values in ``columns`` order) with ``COPY`` (inside a transaction)."""
        names = ", ".join(f'"{c}"' for c in columns)
        try:
            with self._pg.cursor() as cur, cur.copy(
                    f'COPY "{table}" ({names}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(tuple(row))
        except psycopg.Error as exc:
            raise self.translate(exc) from exc

    def reset_identity(self, table: str, column: str, floor: int = 0) -> None:
        """Make the next id of ``table.column`` exceed every stored id and ``floor``."""
        top = int(self._raw(f'SELECT COALESCE(MAX("{column}"), 0) FROM "{table}"')[0][0])
        value = max(top, int(floor))
        called = "true" if value > 0 else "false"
        self._raw(f"SELECT setval(pg_get_serial_sequence(%s, %s), %s::bigint, {called})",
                  (table, column, max(value, 1)))

    # -- errors --------------------------------------------------------------------------
    def translate(self, exc: Exception) -> Exception:
        """The user-facing error for ``exc``: a :class:`WorkspaceError` when the environment
        caused it, else a :class:`StoreDatabaseError` (a bug or a damaged workspace)."""
        translated = translate_pg_error(exc, self.location, self.setting, wait_s=self.wait_s,
                                        read_only_reason=self.read_only_reason)
        if translated is not None:
            return translated
        code = getattr(exc, "sqlstate", None) or type(exc).__name__
        return StoreDatabaseError(f"{' '.join(str(exc).split())} (PostgreSQL {code}, "
                                  f"database {self.location})")


def connect_postgresql(url: str, *, setting: str, read_only: bool = False,
                       create: bool = False) -> PgConnection:
    """Open the workspace database at ``url``.

    Args:
        url: ``postgresql://USER@HOST:PORT/DATABASE`` (password from PGPASSWORD or ~/.pgpass).
        setting: Where ``url`` came from, named in every error.
        read_only: Open without write access (``default_transaction_read_only``).
        create: Make an empty database a workspace (``kbcurate init`` / ``migrate --to``).

    Raises:
        WorkspaceError: psycopg is missing, the server cannot be reached, the URL or
            credentials are wrong, or the database is not a kbcurate workspace.
    """
    require_psycopg()
    where = safe_url(url)
    try:
        pg = psycopg.connect(url, autocommit=True, connect_timeout=10,
                             application_name="kbcurate")
    except psycopg.Error as exc:
        detail = " ".join(str(exc).split())
        raise WorkspaceError(
            f"Cannot connect to the workspace database {where} set in {setting}: {detail}. "
            "Check that the PostgreSQL server runs and that the URL is right "
            "(postgresql://USER@HOST:PORT/DATABASE; the password comes from PGPASSWORD or "
            "~/.pgpass, never from the URL)") from exc
    register_sqlite_types(pg)
    conn = PgConnection(pg, url, setting, "opened read-only" if read_only else "")
    try:
        _check_workspace(conn, create=create and not read_only)
        if read_only:
            conn._raw("SET default_transaction_read_only = on")
    except BaseException:
        conn.close()
        raise
    return conn


def _check_workspace(conn: PgConnection, *, create: bool) -> None:
    has_store = bool(conn._raw("SELECT 1 FROM pg_tables WHERE schemaname = current_schema() "
                               "AND tablename = %s", (STORE_TABLE,)))
    if has_store:
        return
    if not create:
        raise WorkspaceError(
            f"The database {conn.location} set in {conn.setting} is not a kbcurate workspace "
            f"(no {STORE_TABLE} table). Point the setting at the workspace's database, or make "
            "this one a workspace with kbcurate migrate --to URL (from a SQLite workspace) or "
            "kbcurate init --store URL")
    if conn.table_names():
        raise WorkspaceError(
            f"The database {conn.location} already holds tables and is not a kbcurate "
            "workspace; use an empty database (createdb NAME) for the workspace")
    conn._raw(f"CREATE TABLE {STORE_TABLE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn._raw(f"INSERT INTO {STORE_TABLE}(key, value) VALUES ('schema_version', '0')")
