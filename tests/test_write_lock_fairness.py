"""Issue 35 item 14: a label waited 5.5 s beside a 60k-document import (p99 407 ms) without
being spooled. The cause: SQLite's busy handler sleeps longer and longer between tries (up to
100 ms), while the import took the write lock again microseconds after each batch, so a waiting
label missed gap after gap. Now a writer polls for the lock every millisecond and the import
pauses after each batch; ``benchmarks/stress.py`` measures the latencies (no timed test here)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from curation.store import connection, import_log
from curation.store.importer import import_items
from curation.store.workspace import Workspace, WorkspaceBusyError
from kb_sources.types import Document


def test_a_waiting_writer_polls_every_millisecond_without_sqlites_backoff(tmp_path, monkeypatch):
    with Workspace.init(tmp_path / "ws") as ws:
        other = sqlite3.connect(tmp_path / "ws" / "workspace.sqlite", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        sleeps: list[float] = []
        timeouts: list[int] = []

        def fake_sleep(seconds: float) -> None:
            sleeps.append(seconds)
            timeouts.append(ws.conn.execute("PRAGMA busy_timeout").fetchone()[0])
            if len(sleeps) == 5:
                other.execute("COMMIT")  # the holder lets go after the fifth try

        monkeypatch.setattr(connection, "pause_for_lock", fake_sleep)
        with ws.lock_wait(5.0), ws.transaction():
            ws.conn.execute("INSERT INTO meta(key, value) VALUES ('probe', '1')")
        assert sleeps == [connection.POLL_S] * 5 and connection.POLL_S <= 0.002
        assert set(timeouts) == {0}  # SQLite's own handler is off while we poll
        restored = ws.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        assert restored == int(connection.LOCK_WAIT_S * 1000)  # the connection's own wait
        other.close()


def test_the_wait_still_ends_after_the_lock_wait(tmp_path):
    with Workspace.init(tmp_path / "ws") as ws:
        other = sqlite3.connect(tmp_path / "ws" / "workspace.sqlite", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(WorkspaceBusyError, match=r"busy .* we waited for 0.05 s"), \
                ws.lock_wait(0.05), ws.transaction():
            pass
        assert not ws.conn.in_transaction
        other.execute("ROLLBACK")
        other.close()


def test_an_import_pauses_after_each_batch(tmp_path, monkeypatch):
    pauses: list[float] = []
    monkeypatch.setattr(import_log.time, "sleep", pauses.append)
    docs = [Document(str(1000 + i), f"title {i}", f"abstract {i}", "test") for i in range(10)]
    with Workspace.init(tmp_path / "ws") as ws:
        report = import_items(ws, docs, reader="test", path="synthetic", progress=False,
                              batch_size=2)
        assert report.documents_added == 10
    assert pauses == [import_log.YIELD_S] * 5 and import_log.YIELD_S <= 0.02


def test_two_threads_both_get_the_lock(tmp_path):
    """A sanity check of the polling path with a real second connection (no timing)."""
    Workspace.init(tmp_path / "ws").close()
    done: list[str] = []

    def write(name: str) -> None:
        with Workspace.open(tmp_path / "ws") as ws:
            for i in range(20):
                with ws.lock_wait(5.0), ws.transaction():
                    ws.conn.execute("INSERT INTO meta(key, value) VALUES (?, '1')",
                                    (f"{name}-{i}",))
        done.append(name)

    threads = [threading.Thread(target=write, args=(n,)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(done) == ["a", "b", "c"]
    with Workspace.open(tmp_path / "ws") as ws:
        keys = [r[0] for r in ws.conn.execute("SELECT key FROM meta WHERE key GLOB '[abc]-*'")]
    assert len(keys) == 60
