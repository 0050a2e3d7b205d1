"""The Review page (AppTest): label log filters, relabel with audit trail, kappa, exports."""

from __future__ import annotations

import csv
import io
import json
import sqlite3

import pytest
from app_helpers import APP, add_users, build_app_workspace, label_rows, shown, sign_in
from streamlit.testing.v1 import AppTest

from curation.evaluation import reporting
from curation.evaluation.reporting import export_labels_bytes
from curation.search import session
from curation.store.labels import list_labels, record_label
from curation.store.workspace import Workspace

ITEMS = (("1", "complete", "complete"), ("2", "irrelevant", "irrelevant"),
         ("3", "partial", "complete"), ("4", "skip", "partial"))


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    root = build_app_workspace(tmp_path / "ws", bm25=False)
    add_users(root, alice="annotator", bob="annotator", boss="admin")
    with Workspace.open(root) as ws:
        for doc, a, b in ITEMS:
            for user, grade, version in (("alice", a, "bm25"), ("bob", b, "bm25+rerank")):
                record_label(ws, user=user, schema="PO", query_key="q", query_text="BRAF?",
                             doc_id=doc, grade=grade, model_version=version)
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def review(user: str) -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), user)
    at.switch_page("app_pages/review.py").run()
    assert not at.exception and at.subheader[0].value == "Review"
    assert at.title[0].value == "kbcurate: KB curation assistant"  # app.py ran (the gate too)
    return at


def log(at: AppTest):
    """The label log table (the page's first dataframe)."""
    return at.dataframe[0].value


def test_label_log_filters(ws_root):
    at = review("alice")
    assert len(log(at)) == 8
    at.selectbox(key="rv_user").set_value("bob").run()
    assert set(log(at)["user"]) == {"bob"} and len(log(at)) == 4
    at.selectbox(key="rv_grade").set_value("complete").run()
    assert list(log(at)["doc_id"]) == ["3", "1"]
    at.selectbox(key="rv_user").set_value("(all)").run()
    at.selectbox(key="rv_grade").set_value("(all)").run()
    at.selectbox(key="rv_model").set_value("bm25+rerank").run()
    assert set(log(at)["user"]) == {"bob"}


def test_relabel_keeps_the_audit_trail(ws_root):
    at = review("alice")
    with Workspace.open(ws_root) as ws:
        target = next(lab for lab in list_labels(ws, user="alice") if lab.doc_id == "3")
    at.selectbox(key="rv_label").set_value(target.id).run()
    at.selectbox(key="rv_new_grade").set_value("complete").run()
    at.text_input(key="rv_new_note").input("on second reading")
    at.button(key="rv_relabel").click().run()
    assert any("Relabelled 3 as complete" in s.value for s in at.success)
    rows = [r for r in label_rows(ws_root) if r["user"] == "alice" and r["doc_id"] == "3"]
    assert [(r["grade"], r["superseded_by"] is None) for r in rows] == [
        ("partial", False), ("complete", True)]
    assert rows[1]["model_version"] == "bm25" and rows[1]["note"] == "on second reading"
    with Workspace.open(ws_root) as ws:
        audit = ws.audit_log("label")[0]
    assert audit["action"] == "relabel" and json.loads(audit["before"])["grade"] == "partial"
    at.checkbox(key="rv_superseded").check().run()
    assert len(log(at)) == 9
    history = at.dataframe[1].value  # the relabelled item's versions, newest first
    assert history["grade"].tolist() == ["complete", "partial"]
    assert history["doc_id"].tolist() == ["3", "3"]


def test_agreement_shows_cohens_kappa(ws_root):
    at = review("boss")
    metrics = {m.label: m.value for m in at.metric}
    # shared non-skip items: 1 (c/c), 2 (i/i), 3 (p/c); kappa = (2/3 - 1/3) / (1 - 1/3) = 0.5
    assert metrics == {"Shared items": "3", "Observed agreement": "0.667",
                       "Cohen's kappa": "0.500"}


def test_exports_offered_and_written(ws_root):
    at = review("alice")
    keys = {b.key for b in at.get("download_button")}
    assert {"rv_export_csv", "rv_export_jsonl", "rv_export_suggestions"} <= keys
    with Workspace.open(ws_root) as ws:
        labels = list_labels(ws)
        rows = list(csv.DictReader(io.StringIO(export_labels_bytes(ws, labels, "csv").decode())))
        lines = export_labels_bytes(ws, labels, "jsonl").decode().splitlines()
        assert len(list((ws.root / "exports").glob("labels-*"))) == 2
    assert len(rows) == len(lines) == 8
    assert {r["user"] for r in rows} == {"alice", "bob"}
    assert json.loads(lines[0])["model_version"] in {"bm25", "bm25+rerank"}


@pytest.mark.parametrize(("error", "expected"), [
    (sqlite3.OperationalError("no such column: grade2"),
     "unexpected database error in workspace {root}: no such column: grade2 "
     "(OperationalError). This is a bug in kbcurate or a damaged workspace"),
    (sqlite3.DatabaseError("database disk image is malformed"),
     "The database of the workspace {root} is damaged: restore workspace.sqlite from a backup"),
])
def test_a_database_error_in_a_page_is_one_readable_message(ws_root, monkeypatch, error,
                                                             expected):
    at = review("alice")

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(reporting, "label_users", broken)
    at.run()
    assert not at.exception
    (message,) = [shown(e.value) for e in at.error]
    assert message.startswith(expected.format(root=ws_root))
    assert "Traceback" not in message
    assert at.title[0].value == "kbcurate: KB curation assistant"  # the app around it still runs


def test_a_database_error_before_the_pages_is_one_readable_message(ws_root, monkeypatch):
    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(session, "corpus_counts", broken)
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    assert not at.exception
    (message,) = [shown(e.value) for e in at.error]
    assert message.startswith(f"Disk I/O error in the workspace {ws_root}: check that the disk "
                              "has free space and is still mounted")
