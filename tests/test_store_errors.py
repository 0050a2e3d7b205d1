"""Store errors: a full disk, a held write lock or a read-only workspace give one clear
CurationError that names the workspace and the fix, never a raw sqlite3 error."""

from __future__ import annotations

import os
import sqlite3

import pytest

from curation.store.errors import WorkspaceBusyError, WorkspaceFullError, WorkspaceReadOnlyError
from curation.store.importer import import_items
from curation.store.label_files import export_labels
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.workspace import DB_NAME, Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Document, Entity, Relation

LABEL = {"user": "ann", "schema": "PO", "query_key": "q", "query_text": "BRAF?", "doc_id": "1",
         "grade": "complete"}


def fill_disk(ws: Workspace) -> None:
    """Simulate a full disk: the database may not grow past its current size."""
    pages = ws.conn.execute("PRAGMA page_count").fetchone()[0]
    ws.conn.execute(f"PRAGMA max_page_count = {pages}")


def hold_write_lock(ws: Workspace) -> sqlite3.Connection:
    """A second connection (another process's import) holding the write lock."""
    other = sqlite3.connect(ws.root / DB_NAME, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


@pytest.fixture
def seeded(tmp_workspace):
    rel = Relation("PO", "civic", "EID1", {"gene": (Entity("BRAF", "gene"),),
                                            "variant": (Entity("V600E", "variant"),),
                                            "treatment": (Entity("Vemurafenib", "drug"),)},
                   pmids=("1",))
    import_items(tmp_workspace, [Document("1", "BRAF V600E", "abstract", "pool"), rel],
                 reader="kb:test", path="mem", progress=False)
    Labels(tmp_workspace).record(**LABEL)
    return tmp_workspace


@pytest.fixture
def read_only_root(seeded, monkeypatch):
    """A clean workspace the current user cannot write: chmod -w on folder and database. As
    root chmod does not bind, so the permission check is made to report what chmod would."""
    root = seeded.root
    seeded.close()
    if os.geteuid() == 0:
        monkeypatch.setattr("curation.store.connection.not_writable_reason",
                            lambda path: f"the folder {path.parent} is not writable")
    (root / DB_NAME).chmod(0o444)
    root.chmod(0o555)
    yield root
    root.chmod(0o755)
    (root / DB_NAME).chmod(0o644)


def test_disk_full_is_named_not_hidden_by_rollback(tmp_workspace):
    fill_disk(tmp_workspace)
    with pytest.raises(WorkspaceFullError, match=r"^Disk full: the workspace .*ws cannot grow "
                       r"\(database or disk is full\)\. Free space in .*ws") as info, \
            tmp_workspace.transaction():
        for i in range(500):
            tmp_workspace.audit("me", "x", "t", str(i), after={"blob": "x" * 2000})
    assert "cannot rollback" not in str(info.value)
    assert isinstance(info.value, CurationError) and not isinstance(info.value, sqlite3.Error)
    assert not tmp_workspace.conn.in_transaction
    tmp_workspace.conn.execute("PRAGMA max_page_count = 1073741823")
    assert tmp_workspace.audit_log() == []


def test_lock_wait_running_out_says_retry(tmp_workspace):
    other = hold_write_lock(tmp_workspace)
    try:
        with pytest.raises(WorkspaceBusyError,
                           match=r"workspace .*ws is busy \(database is locked\): another import "
                                 r"or job held the write lock and we waited for 0 s\. Another "
                                 r"import is running; retry"), \
                tmp_workspace.lock_wait(0), tmp_workspace.transaction():
            tmp_workspace.audit("me", "x", "t", "1")
    finally:
        other.rollback()
        other.close()
    assert tmp_workspace.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    with tmp_workspace.transaction():  # the lock is free again
        tmp_workspace.audit("me", "x", "t", "1")
    assert len(tmp_workspace.audit_log("t")) == 1


def test_bugs_are_not_disguised(tmp_workspace):
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        tmp_workspace.conn.execute("SELECT * FROM nowhere")


def test_read_only_workspace_reads(read_only_root, tmp_path):
    with Workspace.open(read_only_root) as ws:
        assert ws.read_only and "not writable" in ws.read_only_reason
        assert (ws.stats().documents, ws.stats().relations, ws.stats().labels) == (1, 1, 1)
        (rel,) = Relations(ws).partial("PO")
        assert rel.query["gene"][0].text == "BRAF"
        out = export_labels(Labels(ws).find(), tmp_path / "labels.csv")
    assert out.read_text().count("\n") == 2


def test_read_only_workspace_refuses_writes_clearly(read_only_root):
    with Workspace.open(read_only_root) as ws:
        with pytest.raises(WorkspaceReadOnlyError, match=r"workspace .* is read-only \(.* is not "
                           r"writable\)\. This step needs to write: make the folder and its "
                           r"workspace.sqlite writable \(chmod u\+w\)"):
            Labels(ws).record(**{**LABEL, "doc_id": "2"})
        with pytest.raises(WorkspaceReadOnlyError, match="is read-only"):
            import_items(ws, [Document("9", "t", "a", "pool")], reader="docs:test", path="mem",
                         progress=False)
        assert ws.stats().documents == 1
    assert not (read_only_root / "pending_labels.jsonl").exists()


def test_open_read_only_on_request_uses_mode_ro(seeded):
    root = seeded.root
    seeded.close()
    with Workspace.open(root, read_only=True) as ws:
        assert ws.read_only_reason == "opened read-only"
        assert ws.stats().labels == 1
        with pytest.raises(WorkspaceReadOnlyError, match="is read-only"):
            ws.conn.execute("INSERT INTO meta(key, value) VALUES ('k', 'v')")
    with Workspace.open(root) as ws:  # read-write again afterwards
        assert not ws.read_only


def test_read_only_workspace_needing_migration_says_so(seeded):
    root = seeded.root
    seeded.conn.execute("PRAGMA user_version = 4")
    seeded.close()
    with pytest.raises(WorkspaceReadOnlyError, match=r"has schema version 4; this kbcurate needs "
                       r"version \d+ and must upgrade it, which needs write access"):
        Workspace.open(root, read_only=True)
