"""PostgreSQL results shaped like ``sqlite3``'s (split from :mod:`curation.store.postgres`).

:class:`Row` is readable by position and by (case-insensitive) column name, as ``sqlite3.Row``;
:func:`row_factory` makes psycopg return it, hiding the stand-in rowid column as SQLite's
``SELECT *`` does; :class:`PgCursor` answers ``fetchone``/``fetchall``/iteration, ``rowcount``
and ``lastrowid`` like a ``sqlite3.Cursor``; :func:`register_sqlite_types` makes a connection
load booleans as 0/1 and whole-number sums as ``int``, and store Python ``bool`` parameters as
0/1, as SQLite does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from curation.store.dialect import ROWID

try:  # psycopg is an optional extra
    import psycopg
    from psycopg.adapt import Dumper, Loader
except ImportError:  # pragma: no cover - require_psycopg (pg_errors) names the extra
    psycopg = None
else:
    class _BoolAsInt(Loader):
        """``bool`` results as 0/1, as SQLite answers ``EXISTS`` and comparisons."""

        def load(self, data: Any) -> int:
            return 1 if bytes(data) == b"t" else 0

    class _NumericAsNumber(Loader):
        """``numeric`` (sums of integers) as int when whole, else float, as in SQLite."""

        def load(self, data: Any) -> int | float:
            value = Decimal(bytes(data).decode())
            return int(value) if value == value.to_integral_value() else float(value)

    class _IntFromBool(Dumper):
        """Python ``bool`` parameters stored as 0/1 in integer columns, as SQLite does."""

        oid = 20  # int8

        def dump(self, obj: bool) -> bytes:
            return b"1" if obj else b"0"


def register_sqlite_types(pg: Any) -> None:
    """Make the psycopg connection ``pg`` load and dump values as SQLite would (see the module
    docstring). Call only after :func:`~curation.store.pg_errors.require_psycopg`."""
    pg.adapters.register_loader("bool", _BoolAsInt)
    pg.adapters.register_loader("numeric", _NumericAsNumber)
    pg.adapters.register_dumper(bool, _IntFromBool)


class Row(tuple):
    """One result row, readable by position and by (case-insensitive) column name."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._index[key.lower()])
            except KeyError:
                raise IndexError(f"No item with that key: {key!r}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def row_factory(hide_rowid: bool) -> Any:
    """A psycopg row factory making :class:`Row` (without the stand-in rowid column unless
    the statement names it: SQLite's ``SELECT *`` never shows rowid)."""

    def factory(cursor: Any) -> Any:
        names = [c.name for c in cursor.description or ()]
        keep = [i for i, n in enumerate(names) if not (hide_rowid and n == ROWID)]
        index = {names[i].lower(): pos for pos, i in enumerate(keep)}
        if len(keep) == len(names):
            return lambda values: Row(values, index)
        return lambda values: Row([values[i] for i in keep], index)

    return factory


class PgCursor:
    """The result of one statement, shaped like a ``sqlite3.Cursor``."""

    def __init__(self, cursor: Any, lastrowid: int | None = None,
                 exhausted: bool = False) -> None:
        self._cursor = cursor
        self.lastrowid = lastrowid
        self._exhausted = exhausted

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    @property
    def description(self) -> Any:
        return self._cursor.description

    def fetchone(self) -> Row | None:
        if self._exhausted or self._cursor.description is None:
            return None
        return self._cursor.fetchone()

    def fetchall(self) -> list[Row]:
        if self._exhausted or self._cursor.description is None:
            return []
        return self._cursor.fetchall()

    def fetchmany(self, size: int = 1) -> list[Row]:
        if self._exhausted or self._cursor.description is None:
            return []
        return self._cursor.fetchmany(size)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cursor.close()
