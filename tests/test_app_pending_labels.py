"""Labels given while the workspace is busy (AppTest, issue 12): the Curate page keeps them as
pending, shows them on their cards, and saves them on a later run, each exactly once."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from app_helpers import APP, add_users, build_app_workspace, label_rows, shown, sign_in
from streamlit.testing.v1 import AppTest

import curation.store.labels as labels_module
from curation.store.labels import Labels
from curation.store.outbox import Outbox
from curation.store.workspace import DB_NAME, Workspace

DOC = "25265492"
OTHER = "90100001"


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    monkeypatch.setattr(labels_module, "LABEL_LOCK_WAIT_S", 0.2)  # a busy label gives up fast
    return root


@contextmanager
def import_running(root: Path) -> Iterator[None]:
    """Another connection holds the workspace's write lock, as a long import does."""
    conn = sqlite3.connect(root / DB_NAME, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def braf_page() -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    assert not at.exception and not at.error
    return at


def grade_control(at: AppTest, doc_id: str):
    return next(w for w in at.segmented_control if w.key.startswith(f"grade_{doc_id}_"))


def card(at: AppTest, doc_id: str) -> str:
    (html,) = [m.value for m in at.markdown if f">PMID {doc_id}</a>" in m.value]
    return html


def pending(root: Path) -> list[tuple[str, str, str]]:
    with Workspace.open(root) as ws:
        return [(p.user, p.doc_id, p.grade.value) for p in Labels(ws).pending()]


def texts(elements) -> list[str]:
    return [shown(e.value) for e in elements]


def test_a_label_given_while_busy_is_pending_then_saved_once(ws_root):
    at = braf_page()
    with import_running(ws_root):
        grade_control(at, DOC).set_value("complete").run()
        assert not at.exception and not at.error
        (warning,) = texts(at.warning)
        assert warning.startswith(f"Label 'complete' on {DOC} is pending, not saved yet: "
                                  "another import or job is writing to the workspace")
        assert "saved automatically" in warning and "nothing is lost" in warning
        assert pending(ws_root) == [("alice", DOC, "complete")]
        assert label_rows(ws_root) == []
        # the card shows the grade, marked pending; the counts say so too
        assert grade_control(at, DOC).value == "complete"
        assert "labelled <b>complete (pending)</b>" in card(at, DOC)
        assert any("pending: not saved yet" in c for c in texts(at.caption))
        assert "Labelled 1 of 4 shown (1 pending, not saved yet)" in \
            at.get("progress")[0].proto.text
        assert "1 label(s) pending: not saved yet" in " ".join(texts(at.sidebar.caption))
        at.run()  # still busy: the retry is quiet, the label stays pending and visible
        assert not at.exception and not at.error and not at.warning and not at.success
        assert pending(ws_root) == [("alice", DOC, "complete")]
        assert "1 label(s) pending" in " ".join(texts(at.sidebar.caption))
    at.run()  # the import has finished
    assert not at.exception and not at.error
    assert texts(at.success) == ["1 pending label(s) saved."]
    assert [(r["user"], r["doc_id"], r["grade"]) for r in label_rows(ws_root)] == [
        ("alice", DOC, "complete")]
    assert pending(ws_root) == []
    assert "labelled <b>complete</b>" in card(at, DOC)
    assert "pending" not in " ".join(texts(at.sidebar.caption))
    at.run()
    assert not at.success and len(label_rows(ws_root)) == 1  # saved exactly once


def test_the_next_label_saves_the_pending_one_first(ws_root):
    at = braf_page()
    with import_running(ws_root):
        grade_control(at, DOC).set_value("partial").run()
        assert pending(ws_root) == [("alice", DOC, "partial")]
    grade_control(at, OTHER).set_value("irrelevant").run()
    assert not at.exception and not at.error
    assert "1 pending label(s) saved." in texts(at.success)
    assert [(r["doc_id"], r["grade"]) for r in label_rows(ws_root)] == [
        (DOC, "partial"), (OTHER, "irrelevant")]  # in the order they were given
    assert pending(ws_root) == []


def test_undo_while_busy_says_so_and_keeps_the_pending_label(ws_root):
    at = braf_page()
    with import_running(ws_root):
        grade_control(at, DOC).set_value("complete").run()
        at.button(key="undo").click().run()
        assert not at.exception
        (error,) = texts(at.error)
        assert error.startswith("Nothing was undone: The workspace ") and "is busy" in error
        assert "retry when it has finished" in error
        assert pending(ws_root) == [("alice", DOC, "complete")]
    at.button(key="undo").click().run()  # free again: the pending label is saved, then undone
    assert not at.exception and not at.error
    assert any(f"Undid your label 'complete' on {DOC}" in i for i in texts(at.info))
    assert label_rows(ws_root) == [] and pending(ws_root) == []


def test_page_runs_do_not_touch_the_outbox_when_nothing_is_pending(ws_root, monkeypatch):
    at = braf_page()
    lock_file = ws_root / "pending_labels.jsonl.lock"
    assert not lock_file.exists()  # no page run so far created it
    grade_control(at, DOC).set_value("complete").run()
    assert len(label_rows(ws_root)) == 1
    calls = []
    original = Outbox.locked
    monkeypatch.setattr(Outbox, "locked", lambda self: calls.append(1) or original(self))
    at.run()
    at.switch_page("app_pages/review.py").run()
    assert not at.exception and calls == []
    assert not (ws_root / "pending_labels.jsonl").exists()


def test_a_relabel_while_busy_is_pending_on_the_review_page_then_saved(ws_root):
    with Workspace.open(ws_root) as ws:
        first = labels_module.Labels(ws).record(user="alice", schema="PO", query_key="q",
                                                query_text="BRAF?", doc_id=DOC, grade="partial")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.switch_page("app_pages/review.py").run()
    at.selectbox(key="rv_label").set_value(first.id).run()
    at.selectbox(key="rv_new_grade").set_value("complete").run()
    with import_running(ws_root):
        at.button(key="rv_relabel").click().run()
        assert not at.exception and not at.error and not at.success
        (warning,) = texts(at.warning)
        assert warning.startswith(f"Label 'complete' on {DOC} is pending, not saved yet")
        assert pending(ws_root) == [("alice", DOC, "complete")]
        assert "1 label(s) pending" in " ".join(texts(at.sidebar.caption))
        assert len(at.dataframe[0].value) == 1  # the log still has the stored label only
    at.run()
    assert not at.exception and texts(at.success) == ["1 pending label(s) saved."]
    rows = label_rows(ws_root)
    assert [(r["grade"], r["superseded_by"] is None) for r in rows] == [
        ("partial", False), ("complete", True)]
    assert list(at.dataframe[0].value["grade"]) == ["complete"]
