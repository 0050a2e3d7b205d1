"""An import running on another machine (shared PostgreSQL database) is never taken for dead
while its batches keep coming; one on this machine is judged by its process id."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from curation.store import import_log
from curation.store.errors import WorkspaceBusyError
from curation.store.import_log import REMOTE_STALE_S, begin_import, import_alive, this_host
from curation.store.workspace import Workspace

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _row(host: str, pid: int | None, beat: datetime | None, ts: datetime = NOW) -> dict:
    return {"host": host, "pid": pid, "beat": beat.isoformat() if beat else None,
            "ts": ts.isoformat()}


def test_this_machine_is_judged_by_its_process_id(monkeypatch):
    monkeypatch.setattr(import_log, "pid_alive", lambda pid: pid == 111)
    assert import_alive(_row(this_host(), 111, NOW), now=NOW) is True
    assert import_alive(_row(this_host(), 222, NOW), now=NOW) is False
    assert import_alive(_row("", 222, None), now=NOW) is False  # a row from before migration 8
    assert import_alive(_row(this_host(), None, NOW), now=NOW) is False


def test_another_machine_is_alive_until_its_batches_stop(monkeypatch):
    monkeypatch.setattr(import_log, "pid_alive", lambda pid: False)  # never asked for remotes
    fresh = NOW - timedelta(seconds=REMOTE_STALE_S - 60)
    stale = NOW - timedelta(seconds=REMOTE_STALE_S + 60)
    assert import_alive(_row("other-box", 111, fresh), now=NOW) is True
    assert import_alive(_row("other-box", 111, stale), now=NOW) is False
    # no batch yet: the start time counts
    assert import_alive(_row("other-box", 111, None, ts=fresh), now=NOW) is True
    assert import_alive(_row("other-box", 111, None, ts=stale), now=NOW) is False
    assert import_alive({"host": "other-box", "pid": 1, "beat": "garbage", "ts": "x"}) is True


def _fake_running_import(ws: Workspace, host: str, beat: datetime) -> int:
    with ws.transaction():
        cur = ws.conn.execute(
            "INSERT INTO imports(ts, actor, kind, reader, path, sha256, added, updated, "
            "unchanged, status, pid, host, beat) "
            "VALUES (?, 'cli', 'documents', 'jsonl', 'big.jsonl', '', 0, 0, 0, 'running', ?, ?, ?)",
            (beat.isoformat(), os.getpid() + 100000, host, beat.isoformat()))
    return int(cur.lastrowid)


def test_a_remote_running_import_survives_open_and_blocks_a_second_import(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    import_id = _fake_running_import(ws, "other-box", datetime.now(UTC))
    ws.close()
    ws = Workspace.open(tmp_path / "ws")  # recovery on open must not roll it back
    status = ws.conn.execute("SELECT status FROM imports WHERE id = ?", (import_id,)).fetchone()
    assert status[0] == "running"
    with pytest.raises(WorkspaceBusyError, match=r"process \d+ on other-box"):
        begin_import(ws, actor="cli", kind="documents", reader="jsonl", path="b.jsonl")
    ws.close()


def test_a_stale_remote_import_is_rolled_back(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    old = datetime.now(UTC) - timedelta(seconds=REMOTE_STALE_S + 5)
    import_id = _fake_running_import(ws, "other-box", old)
    assert import_log.recover_unfinished_imports(ws) == 1
    assert ws.conn.execute("SELECT COUNT(*) FROM imports WHERE id = ?",
                           (import_id,)).fetchone()[0] == 0
    run = begin_import(ws, actor="cli", kind="documents", reader="jsonl", path="b.jsonl")
    row = ws.conn.execute("SELECT host, beat, status FROM imports WHERE id = ?",
                          (run.id,)).fetchone()
    assert (row["host"], row["status"]) == (this_host(), "running") and row["beat"]
    ws.close()
