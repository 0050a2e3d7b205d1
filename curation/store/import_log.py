"""The import ledger: short write batches that still add up to one all-or-nothing import.

A long import must not hold the write lock for its whole length (a curator's label would wait
behind it and fail), yet a reader error half-way must leave the workspace as it was. So:

* :func:`begin_import` records the import as ``running`` with this process's id; only one import
  runs at a time (a second one is refused with "another import is running; retry").
* Each :meth:`ImportRun.batch` is one short transaction. While it runs, every row it inserts into
  a tracked table is stamped with the import id (the store connection's ``stamp_inserts``:
  temporary triggers on SQLite, triggers reading a transaction-local setting on PostgreSQL);
  before a row is changed the importer calls :meth:`ImportRun.remember`, which keeps its before
  image in ``import_undo``.
* :meth:`ImportRun.finish` marks the import ``done``. On any error :meth:`ImportRun.abort`
  restores the before images and deletes the stamped rows (in short batches too).
* An import whose process was killed stays ``running`` with a dead process id:
  :func:`recover_unfinished_imports` (run when a workspace is opened) rolls it back. The import
  also records its machine (``host``) and the time of its last batch (``beat``): a process on
  another machine (a shared PostgreSQL database) cannot see the process id, so it takes the
  import for dead only when no batch has come for :data:`REMOTE_STALE_S` seconds.

While an import runs, readers see the batches committed so far.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from curation.store.clock import utcnow
from curation.store.database import StoreConnection
from curation.store.errors import WorkspaceBusyError, WorkspaceError
from curation.store.tracked import TRACKED


class Workspace(Protocol):
    """What the import ledger needs of a workspace (:class:`curation.store.workspace.Workspace`,
    which opens the ledger, so it is not imported here)."""

    root: Path
    conn: StoreConnection

    def transaction(self) -> AbstractContextManager[StoreConnection]: ...

logger = logging.getLogger(__name__)

UndoKind = Literal["document", "annotations", "relation"]

_DELETE_BATCH = 2000
#: An import running on another machine is taken for dead after this long without a batch.
REMOTE_STALE_S = 15 * 60.0
_DOC_COLUMNS = ("title", "abstract", "journal", "year", "mesh", "refs", "source",
                "content_hash", "updated_at")
_REL_COLUMNS = ("schema", "query_key", "data", "content_hash", "updated_at")


@dataclass
class BatchSizer:
    """Rows per batch, adapted so that one batch's transaction takes about ``target_s``.

    Args:
        size: Rows in the next batch.
        target_s: Wanted write time per transaction (the lock is held this long).
        fixed: Keep ``size`` as given (tests, tuning).
    """

    size: int = 200
    target_s: float = 0.25
    fixed: bool = False
    low: int = 10
    high: int = 5000

    def update(self, rows: int, elapsed_s: float) -> None:
        """Adapt to the last batch: ``rows`` written in ``elapsed_s`` seconds."""
        if self.fixed or rows <= 0:
            return
        rate_size = rows * self.target_s / max(elapsed_s, 1e-3)
        self.size = int(min(self.high, max(self.low, min(rate_size, 2 * self.size))))


#: Seconds an import pauses after each batch, so that writers waiting for the lock (a curator's
#: label polls every millisecond) get it between two batches instead of starving behind them.
YIELD_S = 0.01


@dataclass
class ImportRun:
    """One running import (see the module docstring)."""

    ws: Workspace
    id: int
    #: Begun inside the caller's transaction: that one commits or rolls back everything.
    nested: bool = False

    @contextmanager
    def batch(self, sizer: BatchSizer | None = None, rows: int = 0) -> Iterator[None]:
        """One short transaction whose inserts are stamped with this import's id."""
        start = time.perf_counter()
        with self.ws.transaction():
            self.ws.conn.stamp_inserts(TRACKED, self.id)
            yield
            self.ws.conn.stamp_inserts(TRACKED, None)
            self.ws.conn.execute("UPDATE imports SET beat = ? WHERE id = ?", (utcnow(), self.id))
        if sizer is not None:
            sizer.update(rows, time.perf_counter() - start)
        if not self.nested:
            time.sleep(YIELD_S)  # let waiting writers (labels) take the lock between batches

    def remember(self, kind: UndoKind, key: str | int) -> None:
        """Keep the before image of a row the import is about to change (inside a batch)."""
        before = _BEFORE[kind](self.ws, key)
        if before is None:
            return
        self.ws.conn.execute(
            "INSERT INTO import_undo(import_id, kind, key, before) VALUES (?, ?, ?, ?)",
            (self.id, kind, str(key), json.dumps(before, ensure_ascii=False)))

    def finish(self, *, added: int, updated: int, unchanged: int, sha256: str) -> None:
        """Mark the import done with its counts; its undo images are no longer needed."""
        with self.ws.transaction():
            self.ws.conn.execute(
                "UPDATE imports SET status = 'done', ts = ?, added = ?, updated = ?, "
                "unchanged = ?, sha256 = ? WHERE id = ?",
                (utcnow(), added, updated, unchanged, sha256, self.id))
            self.ws.conn.execute("DELETE FROM import_undo WHERE import_id = ?", (self.id,))

    def abort(self) -> None:
        """Roll back every committed batch; when that fails too, leave the import for
        :func:`recover_unfinished_imports` (marked ``failed`` when possible)."""
        if self.nested:
            return
        try:
            rollback_import(self.ws, self.id)
        except Exception as exc:  # the original error matters more; keep it propagating
            logger.error("%s: rolling back import %d failed (%s); it is rolled back when the "
                         "workspace is next opened", self.ws.root, self.id, exc)
            try:
                with self.ws.transaction():
                    self.ws.conn.execute("UPDATE imports SET status = 'failed' WHERE id = ?",
                                         (self.id,))
            except Exception:  # best effort: recovery also finds it by its dead process
                logger.debug("could not mark import %d failed", self.id, exc_info=True)


def begin_import(ws: Workspace, *, actor: str, kind: str, reader: str, path: str) -> ImportRun:
    """Record a new running import (after rolling back orphans of killed processes).

    Raises:
        WorkspaceBusyError: Another import is running in a live process.
    """
    nested = ws.conn.in_transaction
    if not nested:
        recover_unfinished_imports(ws)
    with ws.transaction():
        for row in ws.conn.execute("SELECT id, pid, ts, path, host, beat FROM imports "
                                   "WHERE status = 'running'").fetchall():
            if import_alive(row):
                where = f" on {row['host']}" if row["host"] else ""
                raise WorkspaceBusyError(
                    f"Another import is running in workspace {ws.root} (import #{row['id']} of "
                    f"{row['path']}, process {row['pid']}{where}, started {row['ts']}); retry "
                    "when it has finished")
        now = utcnow()
        cur = ws.conn.execute(
            "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, "
            "unchanged, status, pid, host, beat) "
            "VALUES (?, ?, ?, ?, ?, '', 0, 0, 0, 'running', ?, ?, ?)",
            (now, actor, kind, reader, path, os.getpid(), this_host(), now))
    return ImportRun(ws, int(cur.lastrowid), nested=nested)


@contextmanager
def importing(ws: Workspace, *, actor: str, kind: str, reader: str,
              path: str) -> Iterator[ImportRun]:
    """:func:`begin_import`, then :meth:`ImportRun.abort` when the block raises."""
    run = begin_import(ws, actor=actor, kind=kind, reader=reader, path=path)
    try:
        yield run
    except BaseException:
        run.abort()
        raise


def rollback_import(ws: Workspace, import_id: int) -> None:
    """Undo an unfinished import: restore before images, delete stamped rows, forget it.

    Every step commits in short batches and can be repeated, so a rollback that is itself
    interrupted finishes on the next try.
    """
    while _restore_batch(ws, import_id):
        pass
    for table, key in TRACKED.items():
        extra = " AND key NOT IN (SELECT entity_key FROM synonyms)" if table == "entities" else ""
        _delete_batched(ws, table, key, f"import_id = ?{extra}", (import_id,))
    with ws.transaction():
        # entities a curator's synonym now refers to stay; they no longer belong to the import
        ws.conn.execute("UPDATE entities SET import_id = NULL WHERE import_id = ?", (import_id,))
        ws.conn.execute("DELETE FROM imports WHERE id = ?", (import_id,))
    logger.warning("%s: import %d rolled back", ws.root, import_id)


def recover_unfinished_imports(ws: Workspace) -> int:
    """Roll back imports left ``running`` by a dead process or marked ``failed``; returns how
    many were rolled back."""
    rows = ws.conn.execute("SELECT id, pid, status, path, ts, host, beat FROM imports "
                           "WHERE status IN ('running', 'failed')").fetchall()
    done = 0
    for row in rows:
        if row["status"] == "running" and import_alive(row):
            continue
        logger.warning("%s: rolling back unfinished import %d of %s (process %s%s is gone)",
                       ws.root, row["id"], row["path"], row["pid"],
                       f" on {row['host']}" if row["host"] else "")
        rollback_import(ws, int(row["id"]))
        done += 1
    return done


def recover_on_open(ws: Workspace) -> None:
    """:func:`recover_unfinished_imports`, logging instead of failing when it cannot run now
    (another process holds the write lock: the next open tries again)."""
    try:
        recover_unfinished_imports(ws)
    except WorkspaceError as exc:
        logger.warning("%s: could not roll back unfinished imports now (%s); the next open "
                       "tries again", ws.root, exc)


def this_host() -> str:
    """This machine's name, as imports record it."""
    return socket.gethostname()


def import_alive(row: Any, now: datetime | None = None) -> bool:
    """Whether the running import ``row`` (pid, host, beat, ts) may still be running.

    On this machine (or a row from before hosts were recorded) its process id decides. On
    another machine the process cannot be seen: the import counts as running until no batch
    has come for :data:`REMOTE_STALE_S` seconds.
    """
    if not row["host"] or row["host"] == this_host():
        return bool(row["pid"]) and pid_alive(int(row["pid"]))
    last = row["beat"] or row["ts"]
    try:
        then = datetime.fromisoformat(str(last))
    except ValueError:
        return True  # unreadable: never roll back what may still be running
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return ((now or datetime.now(UTC)) - then).total_seconds() < REMOTE_STALE_S


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def _delete_batched(ws: Workspace, table: str, key: tuple[str, ...], where: str,
                    params: tuple[Any, ...]) -> None:
    cols = ", ".join(key)
    target = key[0] if len(key) == 1 else f"({cols})"
    sql = (f"DELETE FROM {table} WHERE {target} IN (SELECT {cols} FROM {table} WHERE {where} "
           f"LIMIT {_DELETE_BATCH})")
    while True:
        with ws.transaction():
            if ws.conn.execute(sql, params).rowcount == 0:
                return


# -- before images --------------------------------------------------------------------------
def _document_before(ws: Workspace, doc_id: str | int) -> dict[str, Any] | None:
    row = ws.conn.execute(f"SELECT {', '.join(_DOC_COLUMNS)} FROM documents WHERE doc_id = ?",
                          (str(doc_id),)).fetchone()
    return dict(row) if row else None


def _annotations_before(ws: Workspace, doc_id: str | int) -> list[list[Any]]:
    return [list(r) for r in ws.conn.execute(
        "SELECT start, end, text, type, ids FROM annotations WHERE doc_id = ?", (str(doc_id),))]


def _relation_before(ws: Workspace, rel_id: str | int) -> dict[str, Any] | None:
    row = ws.conn.execute(f"SELECT {', '.join(_REL_COLUMNS)} FROM relations WHERE id = ?",
                          (int(rel_id),)).fetchone()
    if row is None:
        return None
    slots = [list(r) for r in ws.conn.execute(
        "SELECT slot, entity_key, text FROM relation_slots WHERE relation_id = ?", (int(rel_id),))]
    pmids = [r[0] for r in ws.conn.execute(
        "SELECT pmid FROM relation_pmids WHERE relation_id = ?", (int(rel_id),))]
    return {"row": dict(row), "slots": slots, "pmids": pmids}


_BEFORE = {"document": _document_before, "annotations": _annotations_before,
           "relation": _relation_before}


def _restore_batch(ws: Workspace, import_id: int, limit: int = 500) -> bool:
    """Restore the newest ``limit`` before images; False when none were left."""
    with ws.transaction():
        rows = ws.conn.execute(
            "SELECT seq, kind, key, before FROM import_undo WHERE import_id = ? "
            "ORDER BY seq DESC LIMIT ?", (import_id, limit)).fetchall()
        for row in rows:
            _RESTORE[row["kind"]](ws, row["key"], json.loads(row["before"]))
        if rows:
            ws.conn.execute("DELETE FROM import_undo WHERE import_id = ? AND seq >= ?",
                            (import_id, rows[-1]["seq"]))
    return bool(rows)


def _restore_document(ws: Workspace, doc_id: str, before: dict[str, Any]) -> None:
    ws.conn.execute(f"UPDATE documents SET {', '.join(f'{c} = ?' for c in _DOC_COLUMNS)} "
                    "WHERE doc_id = ?", (*(before[c] for c in _DOC_COLUMNS), doc_id))


def _restore_annotations(ws: Workspace, doc_id: str, before: list[list[Any]]) -> None:
    ws.conn.execute("DELETE FROM annotations WHERE doc_id = ?", (doc_id,))
    ws.conn.executemany("INSERT INTO annotations(doc_id, start, end, text, type, ids) "
                        "VALUES (?, ?, ?, ?, ?, ?)", [(doc_id, *r) for r in before])


def _restore_relation(ws: Workspace, rel_id: str, before: dict[str, Any]) -> None:
    row = before["row"]
    ws.conn.execute(f"UPDATE relations SET {', '.join(f'{c} = ?' for c in _REL_COLUMNS)} "
                    "WHERE id = ?", (*(row[c] for c in _REL_COLUMNS), int(rel_id)))
    for table in ("relation_slots", "relation_pmids"):
        ws.conn.execute(f"DELETE FROM {table} WHERE relation_id = ?", (int(rel_id),))
    ws.conn.executemany("INSERT INTO relation_slots(relation_id, slot, entity_key, text) "
                        "VALUES (?, ?, ?, ?)", [(int(rel_id), *s) for s in before["slots"]])
    ws.conn.executemany("INSERT INTO relation_pmids(relation_id, pmid) VALUES (?, ?)",
                        [(int(rel_id), p) for p in before["pmids"]])


_RESTORE = {"document": _restore_document, "annotations": _restore_annotations,
            "relation": _restore_relation}
