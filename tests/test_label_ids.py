"""Label ids are never reused (issue 14, bug 3): after an undo the next label gets a new id, so
the audit rows of one id always name one document; migration 6 keeps old ids and continues above
every id the audit log has seen."""

from __future__ import annotations

import json

from curation.store.connection import connect
from curation.store.labels import Labels
from curation.store.migrations import MIGRATIONS, SCHEMA_VERSION
from curation.store.workspace import DB_NAME, Workspace


def _label(ws, doc_id: str, user: str = "alice"):
    return Labels(ws).record(user=user, schema="PO", query_key="q", query_text="BRAF V600E",
                             doc_id=doc_id, grade="complete")


def test_an_undone_label_id_is_not_given_to_the_next_label(tmp_workspace):
    ws = tmp_workspace
    first = _label(ws, "111")
    assert Labels(ws).undo_last("alice").id == first.id
    second = _label(ws, "222")
    assert second.id != first.id and second.id > first.id
    docs_per_id: dict[str, set[str]] = {}
    for row in ws.conn.execute("SELECT object_id, before, after FROM audit_log "
                               "WHERE object_type = 'label'"):
        image = json.loads(row["after"] or row["before"])
        docs_per_id.setdefault(row["object_id"], set()).add(image["doc_id"])
    assert docs_per_id == {str(first.id): {"111"}, str(second.id): {"222"}}


def test_migration_keeps_ids_and_continues_above_audited_ones(tmp_path):
    root = tmp_path / "old"
    root.mkdir()
    old = Workspace(root, connect(root / DB_NAME))
    old.migrate(MIGRATIONS[:5])
    for i, doc in ((1, "11"), (2, "22")):
        old.conn.execute(
            "INSERT INTO labels(id, created_at, user, schema, query_key, query_text, doc_id, "
            "grade) VALUES (?, 't', 'bob', 'PO', 'q', 'text', ?, 'partial')", (i, doc))
    old.conn.execute("UPDATE labels SET superseded_by = 2 WHERE id = 1")
    old.conn.execute("INSERT INTO audit_log(ts, actor, action, object_type, object_id, before) "
                     "VALUES ('t', 'bob', 'undo', 'label', '3', '{\"doc_id\": \"33\"}')")
    old.close()
    with Workspace.open(root) as ws:
        assert ws.schema_version == SCHEMA_VERSION
        rows = [tuple(r) for r in ws.conn.execute(
            "SELECT id, doc_id, superseded_by FROM labels ORDER BY id")]
        assert rows == [(1, "11", 2), (2, "22", None)]
        assert _label(ws, "44").id == 4  # above the undone label 3 the audit log remembers
        sql = ws.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'labels'").fetchone()[0]
        assert "AUTOINCREMENT" in sql
        indexes = {r[0] for r in ws.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'labels'")}
        assert {"labels_query", "labels_user"} <= indexes
