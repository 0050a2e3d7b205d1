"""Labels: record, relabel with audit, undo, filters, export, Cohen's kappa, and the outbox
that keeps a label the database cannot take yet."""

from __future__ import annotations

import csv
import json
import math

import pytest

from curation.store.label_files import EXPORT_COLUMNS_HELP, FINAL_FIELDS, export_labels
from curation.store.labels import Grade, LabelPending, Labels
from curation.store.workspace import WorkspaceBusyError
from kb_sources.errors import CurationError

Q = {"schema": "PO", "query_key": "gene=gene:673|variant=variant:v600e",
     "query_text": "Treatment for gene BRAF and variant V600E?"}


def label(ws, user, doc, grade, **kw):
    return Labels(ws).record(user=user, doc_id=doc, grade=grade, **{**Q, **kw})


def test_label_row_has_user_and_model_version(tmp_workspace):
    lab = label(tmp_workspace, "ann", "21639808", "complete", model_version="minilm@1",
                train_size=0, note="vemurafenib response")
    rows = tmp_workspace.conn.execute("SELECT user, doc_id, grade, model_version, train_size, "
                                      "note FROM labels").fetchall()
    assert [tuple(r) for r in rows] == [("ann", "21639808", "complete", "minilm@1", 0,
                                         "vemurafenib response")]
    assert lab.grade is Grade.COMPLETE and lab.id == 1


def test_relabel_supersedes_and_is_audited(tmp_workspace):
    first = label(tmp_workspace, "ann", "1", "partial")
    second = label(tmp_workspace, "ann", "1", "complete", note="names the drug")
    assert [lab.grade for lab in Labels(tmp_workspace).find()] == [Grade.COMPLETE]
    all_rows = Labels(tmp_workspace).find(include_superseded=True)
    assert [(lab.id, lab.superseded_by) for lab in all_rows] == [(second.id, None),
                                                                 (first.id, second.id)]
    (entry,) = tmp_workspace.audit_log("label")[:1]
    assert entry.action == "relabel" and entry.before_value()["grade"] == "partial"


def test_undo_removes_last_and_restores_previous(tmp_workspace):
    label(tmp_workspace, "ann", "1", "partial")
    label(tmp_workspace, "ann", "1", "irrelevant")
    label(tmp_workspace, "other", "2", "complete")
    undone = Labels(tmp_workspace).undo_last("ann")
    assert undone.grade is Grade.IRRELEVANT
    assert Labels(tmp_workspace).grades("PO", Q["query_key"], "ann") == {"1": Grade.PARTIAL}
    assert Labels(tmp_workspace).undo_last("ann").grade is Grade.PARTIAL
    assert Labels(tmp_workspace).undo_last("ann") is None
    assert [lab.user for lab in Labels(tmp_workspace).find()] == ["other"]
    undos = [e for e in tmp_workspace.audit_log("label") if e.action == "undo"]
    assert len(undos) == 2 and undos[0].before_value()["grade"] == "partial"


def test_undo_messages_say_what_came_back(tmp_workspace):
    """Issue 44 item 6: an undo says whether a note edit or a grade went back."""
    from app_pages.curate_cards import undo_message

    ws, labels = tmp_workspace, Labels(tmp_workspace)
    label(ws, "ann", "1", "partial")
    label(ws, "ann", "1", "irrelevant")
    label(ws, "ann", "1", "irrelevant", note="no drug named")

    def undo() -> str:
        undone = labels.undo("ann")
        return undo_message(undone, labels.current("ann", "PO", Q["query_key"], "1"))

    assert undo() == ("Undid your note edit on 1: the note is empty again; its label "
                      "'irrelevant' stays.")
    assert undo() == "Undid your label 'irrelevant' on 1: it is 'partial' again."
    assert undo() == "Undid your label 'partial' on 1."


def test_bad_grade_and_missing_user(tmp_workspace):
    with pytest.raises(CurationError, match="Unknown grade 'maybe'. Available options: complete"):
        label(tmp_workspace, "ann", "1", "maybe")
    with pytest.raises(CurationError, match="sign in"):
        label(tmp_workspace, " ", "1", "skip")
    assert Labels(tmp_workspace).find() == []


def test_filters(tmp_workspace):
    label(tmp_workspace, "a", "1", "complete", model_version="m1")
    label(tmp_workspace, "b", "2", "irrelevant", model_version="m2")
    assert [lab.doc_id for lab in Labels(tmp_workspace).find(user="a")] == ["1"]
    assert [lab.doc_id for lab in Labels(tmp_workspace).find(grade="IRRELEVANT")] == ["2"]
    assert [lab.doc_id for lab in Labels(tmp_workspace).find(model_version="m1")] == ["1"]
    assert Labels(tmp_workspace).find(since="2999-01-01") == []


def test_export_csv_and_jsonl(tmp_workspace, tmp_path):
    label(tmp_workspace, "a", "1", "complete", note='has "quotes", commas')
    labels = Labels(tmp_workspace).find()
    with open(export_labels(labels, tmp_path / "l.csv"), encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    assert row["note"] == 'has "quotes", commas' and row["grade"] == "complete"
    lines = (export_labels(labels, tmp_path / "l.jsonl")).read_text().splitlines()
    assert json.loads(lines[0])["doc_id"] == "1"
    with pytest.raises(CurationError, match="use a .csv, .tsv or .jsonl"):
        export_labels(labels, tmp_path / "l.xlsx")


def test_export_writes_the_final_grade_columns(tmp_workspace, tmp_path):
    label(tmp_workspace, "a", "1", "complete")
    label(tmp_workspace, "b", "1", "partial")
    label(tmp_workspace, "a", "2", "irrelevant")
    labels = Labels(tmp_workspace).find()
    final = {"final_grade": "partial", "final_source": "adjudicated", "adjudicated_by": "cur",
             "adjudicated_at": "2026-01-02T03:04:05+00:00", "adjudication_reason": "a, \"b\""}
    finals = {(Q["schema"], Q["query_key"], "1"): final}
    with open(export_labels(labels, tmp_path / "l.tsv", finals=finals), encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert list(rows[0])[-5:] == list(FINAL_FIELDS) == list(final)
    assert {(r["user"], r["doc_id"]): tuple(r[k] for k in FINAL_FIELDS) for r in rows} == {
        ("a", "1"): tuple(final.values()), ("b", "1"): tuple(final.values()),
        ("a", "2"): ("",) * 5}
    lines = export_labels(labels, tmp_path / "l.jsonl", finals=finals).read_text().splitlines()
    by_doc = {(d["user"], d["doc_id"]): d for d in map(json.loads, lines)}
    assert {k: by_doc["b", "1"][k] for k in FINAL_FIELDS} == final
    assert [by_doc["a", "2"][k] for k in FINAL_FIELDS] == [None] * 5
    for name in ("id", "grade", "note", "train_size", *FINAL_FIELDS):  # the help names each
        assert name in EXPORT_COLUMNS_HELP


def test_cohen_kappa_on_shared_items(tmp_workspace):
    # a and b agree on 3 of 4 shared items; item 5 only a labelled; skips are ignored
    for doc, ga, gb in [("1", "complete", "complete"), ("2", "irrelevant", "irrelevant"),
                        ("3", "partial", "irrelevant"), ("4", "complete", "complete")]:
        label(tmp_workspace, "a", doc, ga)
        label(tmp_workspace, "b", doc, gb)
    label(tmp_workspace, "a", "5", "complete")
    label(tmp_workspace, "a", "6", "skip")
    label(tmp_workspace, "b", "6", "skip")
    result = Labels(tmp_workspace).agreement("a", "b")
    assert result.shared == 4 and result.observed == 0.75
    # p_o = .75; p_e = (2/4*2/4) + (1/4*2/4) + (1/4*0) = .375 -> kappa = .375/.625 = .6
    assert result.kappa == pytest.approx(0.6)
    assert math.isnan(Labels(tmp_workspace).agreement("a", "nobody").kappa)


# -- the outbox: a label that cannot be written now is kept, then saved ------------------------
def hold_write_lock(ws):
    import sqlite3

    other = sqlite3.connect(ws.root / "workspace.sqlite", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a long import in another process
    return other


@pytest.fixture
def no_wait(monkeypatch):
    monkeypatch.setattr("curation.store.labels.LABEL_LOCK_WAIT_S", 0.0)


def test_label_during_long_write_is_pending_then_saved(tmp_workspace, no_wait):
    ws = tmp_workspace
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending, match=r"Label 'complete' on 21639808 is pending, not saved "
                       r"yet: another import or job is writing to the workspace\. It is kept in "
                       r"the workspace's outbox") as info:
        label(ws, "ann", "21639808", "complete", note="first")
    assert isinstance(info.value, CurationError)
    assert (info.value.pending.doc_id, info.value.pending.grade) == ("21639808", Grade.COMPLETE)
    assert [(p.user, p.doc_id, p.note) for p in Labels(ws).pending()] == [
        ("ann", "21639808", "first")]
    assert Labels(ws).pending(user="bob") == []
    assert Labels(ws).find() == []
    other.rollback()
    other.close()
    # the next label that reaches the database takes the pending one first
    newest = label(ws, "ann", "2", "irrelevant")
    assert [(lab.doc_id, lab.grade, lab.id) for lab in Labels(ws).find()] == [
        ("2", Grade.IRRELEVANT, newest.id), ("21639808", Grade.COMPLETE, newest.id - 1)]
    assert Labels(ws).pending() == []
    assert not (ws.root / "pending_labels.jsonl").exists()
    (entry,) = [e for e in ws.audit_log("label") if e.object_id == str(newest.id - 1)]
    assert entry.after_value()["pending_since"] == info.value.pending.created_at


def test_flush_pending_labels_keeps_order_and_waits_for_the_lock(tmp_workspace, no_wait):
    ws = tmp_workspace
    other = hold_write_lock(ws)
    for grade in ("partial", "complete"):
        with pytest.raises(LabelPending):
            label(ws, "ann", "1", grade)
    with pytest.raises(WorkspaceBusyError, match="Another import is running; retry"):
        Labels(ws).flush_pending(wait_s=0)
    assert len(Labels(ws).pending()) == 2
    other.rollback()
    other.close()
    assert Labels(ws).flush_pending() == 2
    assert Labels(ws).flush_pending() == 0
    current, first = Labels(ws).find(include_superseded=True)
    assert (current.grade, first.grade, first.superseded_by) == (
        Grade.COMPLETE, Grade.PARTIAL, current.id)


def test_label_on_full_disk_is_kept(tmp_workspace):
    ws = tmp_workspace
    pages = ws.conn.execute("PRAGMA page_count").fetchone()[0]
    ws.conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(LabelPending, match="the disk is full") as info:
        for i in range(300):
            label(ws, "ann", str(i), "complete", note="n" * 3000)
    kept = info.value.pending
    assert [p.doc_id for p in Labels(ws).pending()] == [kept.doc_id]
    ws.conn.execute("PRAGMA max_page_count = 1073741823")  # space was freed
    assert Labels(ws).flush_pending() == 1
    assert Labels(ws).find()[0].doc_id == kept.doc_id


def test_flush_after_a_kill_does_not_write_twice(tmp_workspace, no_wait):
    ws = tmp_workspace
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending) as info:
        label(ws, "ann", "1", "complete")
    other.rollback()
    other.close()
    assert Labels(ws).flush_pending() == 1
    # killed after the commit but before the outbox was emptied: the line is still there
    (ws.root / "pending_labels.jsonl").write_text(json.dumps(info.value.pending.to_json()) + "\n")
    assert Labels(ws).flush_pending() == 1
    assert len(Labels(ws).find(include_superseded=True)) == 1


def test_torn_outbox_line_is_set_aside_not_lost(tmp_workspace, no_wait):
    ws = tmp_workspace
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending):
        label(ws, "ann", "1", "complete")
    other.rollback()
    other.close()
    with open(ws.root / "pending_labels.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"user": "ann", "doc_')  # a crash in the middle of an append
    assert [p.doc_id for p in Labels(ws).pending()] == ["1"]
    assert (ws.root / "pending_labels.jsonl.unreadable").read_text() == '{"user": "ann", "doc_\n'


def test_undo_takes_pending_labels_into_account(tmp_workspace, no_wait):
    ws = tmp_workspace
    label(ws, "ann", "1", "partial")
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending):
        label(ws, "ann", "2", "complete")
    other.rollback()
    other.close()
    assert Labels(ws).undo_last("ann").doc_id == "2"
    assert [lab.doc_id for lab in Labels(ws).find()] == ["1"] and Labels(ws).pending() == []


def test_outbox_record_that_is_not_a_label_does_not_block_the_rest(tmp_workspace, no_wait):
    ws = tmp_workspace
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending):
        label(ws, "ann", "1", "complete")
    other.rollback()
    other.close()
    with open(ws.root / "pending_labels.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"user": null, "grade": "complete"}\n')
    assert label(ws, "ann", "2", "partial").doc_id == "2"
    assert sorted(lab.doc_id for lab in Labels(ws).find()) == ["1", "2"]
    set_aside = (ws.root / "pending_labels.jsonl.unreadable").read_text()
    assert json.loads(set_aside) == {"user": None, "grade": "complete"}


def test_a_label_does_not_wait_behind_the_outbox_lock_when_nothing_is_pending(tmp_workspace):
    """Item 17 of issue 28: with an empty outbox, labels queue on the database lock only (each
    bounded by LABEL_LOCK_WAIT_S), never behind another label's whole wait."""
    import fcntl
    import threading

    from curation.store.outbox import Outbox

    ws = tmp_workspace
    outbox = Outbox(ws.root / "pending_labels.jsonl")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with outbox.locked():
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    try:
        done = label(ws, "ann", "7", "complete")  # blocked until the holder gave up, before
        assert done.doc_id == "7"
        assert t.is_alive() and not release.is_set()  # stored while the outbox lock was held
    finally:
        release.set()
        t.join()
    with (ws.root / "pending_labels.jsonl.lock").open("ab") as fh:  # the lock is free again
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_pending_label_older_than_the_current_one_enters_the_history(tmp_workspace):
    from curation.store.labels import PendingLabel
    from curation.store.outbox import Outbox

    ws = tmp_workspace
    newer = label(ws, "ann", "9", "irrelevant", note="second look")
    late = PendingLabel("x1", "2000-01-01T00:00:00+00:00", "ann", Q["schema"], Q["query_key"],
                        Q["query_text"], "9", Grade.COMPLETE, "first look", "", None)
    outbox = Outbox(ws.root / "pending_labels.jsonl")
    with outbox.locked():
        outbox.append(late.to_json())
    assert Labels(ws).flush_pending() == 1
    rows = ws.conn.execute("SELECT id, grade, note, superseded_by FROM labels WHERE doc_id = '9' "
                           "ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [(newer.id, "irrelevant", "second look", None),
                                        (newer.id + 1, "complete", "first look", newer.id)]
    assert Labels(ws).grades(Q["schema"], Q["query_key"], "ann") == {"9": Grade.IRRELEVANT}


# -- bulk grades: one transaction, one batch, one undo (issue 36, item 12) ----------------------
def bulk(ws, user, docs, grade, **kw):
    return Labels(ws).record_many(user=user, doc_ids=docs, grade=grade, **{**Q, **kw})


def test_a_bulk_grade_is_one_batch_and_one_undo_takes_it_back(tmp_workspace):
    ws = tmp_workspace
    first = label(ws, "ann", "1", "partial", note="dose unclear")
    label(ws, "ann", "9", "complete")  # given before the batch: stays after its undo
    stored = bulk(ws, "ann", ["1", "2", "3", "2"], "irrelevant", notes={"3": "no drug"},
                  model_version="bm25+rerank")
    assert [(s.doc_id, s.grade, s.note) for s in stored] == [
        ("1", Grade.IRRELEVANT, "dose unclear"),  # a regrade keeps the item's note
        ("2", Grade.IRRELEVANT, ""), ("3", Grade.IRRELEVANT, "no drug")]
    assert len({s.batch for s in stored}) == 1 and stored[0].batch
    assert {s.model_version for s in stored} == {"bm25+rerank"}
    assert Labels(ws).get(first.id).superseded_by == stored[0].id
    undone = Labels(ws).undo("ann")
    assert sorted(u.doc_id for u in undone) == ["1", "2", "3"]
    assert Labels(ws).grades(Q["schema"], Q["query_key"], "ann") == {
        "1": Grade.PARTIAL, "9": Grade.COMPLETE}
    assert Labels(ws).current("ann", Q["schema"], Q["query_key"], "1").note == "dose unclear"
    assert [e.action for e in ws.audit_log("label")].count("undo") == 3
    assert Labels(ws).undo_last("ann").doc_id == "9"  # the next undo: the label before it
    assert Labels(ws).undo("ann")[0].id == first.id and Labels(ws).undo("ann") == []


def test_a_label_given_after_a_batch_is_undone_alone_first(tmp_workspace):
    ws = tmp_workspace
    bulk(ws, "ann", ["1", "2"], "skip")
    label(ws, "ann", "2", "complete")  # relabels one item of the batch
    label(ws, "bob", "5", "partial")  # another user's label is never undone by ann
    assert [u.doc_id for u in Labels(ws).undo("ann")] == ["2"]
    assert Labels(ws).grades(Q["schema"], Q["query_key"], "ann") == {"1": Grade.SKIP,
                                                                      "2": Grade.SKIP}
    assert sorted(u.doc_id for u in Labels(ws).undo("ann")) == ["1", "2"]
    assert [lab.user for lab in Labels(ws).find()] == ["bob"]


def test_a_bulk_grade_needs_a_user_and_a_document(tmp_workspace):
    with pytest.raises(CurationError, match="Select at least one abstract"):
        bulk(tmp_workspace, "ann", [], "skip")
    with pytest.raises(CurationError, match="sign in first"):
        bulk(tmp_workspace, " ", ["1"], "skip")
    with pytest.raises(CurationError, match="grade"):
        bulk(tmp_workspace, "ann", ["1"], "maybe")
    assert Labels(tmp_workspace).find() == []


def test_a_bulk_grade_during_a_long_write_is_kept_whole_and_saved_as_one_batch(tmp_workspace,
                                                                             no_wait):
    ws = tmp_workspace
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending, match=r"3 labels 'irrelevant' \(1 and others\) are pending, "
                       r"not saved yet: .*They are kept") as info:
        bulk(ws, "ann", ["1", "2", "3"], "irrelevant")
    assert info.value.count == 3
    pending = Labels(ws).pending()
    assert [p.doc_id for p in pending] == ["1", "2", "3"] and len({p.batch for p in pending}) == 1
    other.rollback()
    other.close()
    assert Labels(ws).flush_pending() == 3
    assert len({lab.batch for lab in Labels(ws).find()}) == 1
    assert len(Labels(ws).undo("ann")) == 3 and Labels(ws).find() == []


def test_an_outbox_record_from_before_batches_is_still_read(tmp_workspace):
    ws = tmp_workspace
    record = {"outbox_id": "x2", "created_at": "2024-01-01T00:00:00+00:00", "user": "ann",
              **Q, "doc_id": "4", "grade": "partial", "note": "", "model_version": "",
              "train_size": None}  # written by an older kbcurate: no "batch"
    (ws.root / "pending_labels.jsonl").write_text(json.dumps(record) + "\n")
    assert [p.doc_id for p in Labels(ws).pending()] == ["4"]
    assert Labels(ws).flush_pending() == 1
    assert Labels(ws).find()[0].batch is None


def test_a_label_records_whether_the_order_was_learned_in_the_query(tmp_workspace, tmp_path,
                                                                   no_wait):
    """Issue 38: the row says the order was learned within the query and after how many labels
    (NULL: shown as ranked), alone, in a bulk grade, through the outbox and in exports."""
    ws = tmp_workspace
    ranked = label(ws, "ann", "1", "complete", model_version="ranked · PO-ranker@2")
    learned = label(ws, "ann", "2", "partial", model_version="ranked · PO-ranker@2",
                    order_labels=7)
    assert (ranked.order_labels, learned.order_labels) == (None, 7)
    assert learned.model_version == "ranked · PO-ranker@2"
    batch = bulk(ws, "ann", ["3", "4"], "irrelevant", order_labels=8)
    assert [lab.order_labels for lab in batch] == [8, 8]
    other = hold_write_lock(ws)
    with pytest.raises(LabelPending):
        label(ws, "ann", "5", "skip", order_labels=9)
    assert [p.order_labels for p in Labels(ws).pending()] == [9]
    other.rollback()
    other.close()
    assert Labels(ws).flush_pending() == 1
    rows = ws.conn.execute("SELECT doc_id, order_labels FROM labels ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [("1", None), ("2", 7), ("3", 8), ("4", 8), ("5", 9)]
    with open(export_labels(Labels(ws).find(), tmp_path / "l.csv"), encoding="utf-8") as fh:
        exported = {r["doc_id"]: r["order_labels"] for r in csv.DictReader(fh)}
    assert exported == {"1": "", "2": "7", "3": "8", "4": "8", "5": "9"}
    assert "order_labels" in EXPORT_COLUMNS_HELP
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(CurationError, match="order_labels is"):
            label(ws, "ann", "6", "skip", order_labels=bad)
