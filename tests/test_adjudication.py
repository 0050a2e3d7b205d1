"""Disagreements, adjudicated final grades and blind mode (issue 14); the settings command."""

from __future__ import annotations

import csv
import json

import pytest
from app_helpers import build_app_workspace

from curation.access.adjudication import (
    adjudicate,
    blind_mode,
    current_adjudications,
    disagreements,
    final_grade,
    final_grades,
    next_open_item,
    relation_texts,
    set_blind_mode,
    visible_labels,
)
from curation.access.users import PermissionDenied, Role, User
from curation.cli.main import main
from curation.store.adjudications import Adjudications
from curation.store.documents import Documents
from curation.store.labels import Grade, Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

ALICE, BOB = User("alice", Role.ANNOTATOR), User("bob", Role.ANNOTATOR)
CUR, ADMIN = User("cur", Role.CURATOR), User("boss", Role.ADMIN)
#: doc, alice, bob (as in tests/test_app_review.py), plus bob alone on 5 and a PTM item
ITEMS = (("1", "complete", "complete"), ("2", "irrelevant", "irrelevant"),
         ("3", "partial", "complete"), ("4", "skip", "partial"), ("5", None, "complete"))


@pytest.fixture
def ws(tmp_path):
    with Workspace.open(build_app_workspace(tmp_path / "ws", bm25=False)) as w:
        for doc, a, b in ITEMS:
            for user, grade in (("alice", a), ("bob", b)):
                if grade:
                    label(w, user, doc, grade)
        label(w, "alice", "9", "partial", schema="PTM")
        label(w, "bob", "9", "irrelevant", schema="PTM")
        yield w


def label(ws, user, doc, grade, schema="PO"):
    return Labels(ws).record(user=user, schema=schema, query_key="q", query_text=f"{schema}?",
                             doc_id=doc, grade=grade)


def test_disagreements_are_items_graded_differently_skips_left_out(ws):
    found = disagreements(ws)
    assert [(d.schema, d.doc_id) for d in found] == [("PTM", "9"), ("PO", "3")]  # newest first
    po = found[1]
    assert po.grades == (("alice", Grade.PARTIAL), ("bob", Grade.COMPLETE))
    assert (po.query_text, po.adjudication, po.resolved) == ("PO?", None, False)
    assert [d.doc_id for d in disagreements(ws, "PO")] == ["3"]
    label(ws, "alice", "3", "complete")  # a relabel settles it
    assert [d.doc_id for d in disagreements(ws, "PO")] == []


def test_a_third_user_makes_an_agreed_item_a_disagreement(ws):
    label(ws, "carol", "1", "partial")
    (first, second) = disagreements(ws, "PO")
    assert first.doc_id == "1" and dict(first.grades) == {
        "alice": Grade.COMPLETE, "bob": Grade.COMPLETE, "carol": Grade.PARTIAL}
    assert second.doc_id == "3"


def test_adjudicate_records_supersedes_and_audits(ws):
    first = adjudicate(ws, "PO", "q", "3", "partial", " mentions no response ", user=CUR)
    assert (first.user, first.grade, first.reason, first.superseded_by) == (
        "cur", Grade.PARTIAL, "mentions no response", None)
    second = adjudicate(ws, "PO", "q", "3", Grade.COMPLETE, "the response is in table 2",
                        user=ADMIN)
    history = Adjudications(ws).history("PO", "q", "3")
    assert [(a.id, a.grade, a.superseded_by) for a in history] == [
        (second.id, Grade.COMPLETE, None), (first.id, Grade.PARTIAL, second.id)]
    assert current_adjudications(ws) == {("PO", "q", "3"): second}
    audits = ws.audit_log("adjudication")
    assert [(a.action, a.actor, a.object_id) for a in audits] == [
        ("adjudicate", "boss", str(second.id)), ("adjudicate", "cur", str(first.id))]
    assert audits[1].before is None
    assert audits[0].before_value() == {"id": first.id, "user": "cur",
                                               "grade": "partial",
                                               "reason": "mentions no response"}
    assert audits[0].after_value() == {"schema": "PO", "query_key": "q", "doc_id": "3",
                                              "grade": "complete",
                                              "reason": "the response is in table 2"}
    (po,) = [d for d in disagreements(ws) if d.schema == "PO"]
    assert po.adjudication == second and po.resolved
    assert [d.schema for d in disagreements(ws)] == ["PTM", "PO"]  # unresolved first


@pytest.mark.parametrize(("user", "args", "error", "message"), [
    (ALICE, ("3", "complete", "sure"), PermissionDenied,
     r"Recording a final grade needs the curator or admin role; alice \(annotator\) may not"),
    (None, ("3", "complete", "sure"), PermissionDenied, "an anonymous user may not do it"),
    (CUR, ("3", "skip", "sure"), CurationError, "skip decides nothing"),
    (CUR, ("3", "maybe", "sure"), CurationError, "Unknown grade 'maybe'. Available options"),
    (CUR, ("3", "complete", "  "), CurationError, "A final grade needs a written reason"),
    (CUR, ("77", "complete", "sure"), CurationError,
     "Nobody labelled document 77 for query 'q' of PO"),
])
def test_bad_adjudications_are_refused(ws, user, args, error, message):
    with pytest.raises(error, match=message):
        adjudicate(ws, "PO", "q", *args, user=user)
    assert current_adjudications(ws) == {} and ws.audit_log("adjudication") == []


def test_final_grade(ws):
    assert final_grade(ws, "PO", "q", "1") is Grade.COMPLETE  # both agree
    assert final_grade(ws, "PO", "q", "4") is Grade.PARTIAL  # the skip is no grade
    assert final_grade(ws, "PO", "q", "3") is None  # open disagreement
    assert final_grade(ws, "PO", "q", "77") is None  # nobody labelled it
    adjudicate(ws, "PO", "q", "3", "partial", "no response given", user=CUR)
    assert final_grade(ws, "PO", "q", "3") is Grade.PARTIAL
    adjudicate(ws, "PO", "q", "1", "irrelevant", "wrong disease", user=CUR)
    assert final_grade(ws, "PO", "q", "1") is Grade.IRRELEVANT  # a decision beats agreement


def test_final_grades_of_every_item(ws):
    adj = adjudicate(ws, "PO", "q", "3", "complete", "response in the abstract", user=CUR)
    finals = final_grades(ws)
    assert {item: (f.grade.value, f.source) for item, f in finals.items()} == {
        ("PO", "q", "1"): ("complete", "unanimous"), ("PO", "q", "2"): ("irrelevant", "unanimous"),
        ("PO", "q", "3"): ("complete", "adjudicated"), ("PO", "q", "4"): ("partial", "unanimous"),
        ("PO", "q", "5"): ("complete", "unanimous")}  # PTM 9 is open: left out
    assert finals["PO", "q", "3"].adjudication == adj and finals["PO", "q", "1"].adjudication \
        is None
    assert set(final_grades(ws, "PTM")) == set()
    for item, final in finals.items():  # the same rule as final_grade
        assert final_grade(ws, *item) is final.grade
    set_blind_mode(ws, True, user=ADMIN)  # alice graded 1-3 and skipped 4
    assert sorted(d for _, _, d in final_grades(ws, viewer=ALICE)) == ["1", "2", "3"]
    assert len(final_grades(ws, viewer=CUR)) == 5


def test_disagreements_carry_each_annotators_note_and_next_open_item(ws):
    Labels(ws).record(user="alice", schema="PO", query_key="q", query_text="PO?", doc_id="6",
                      grade="partial", note="only <i>in vitro</i>")
    label(ws, "bob", "6", "complete")
    items = disagreements(ws, "PO")
    assert [(d.doc_id, d.notes) for d in items] == [
        ("6", (("alice", "only <i>in vitro</i>"), ("bob", ""))),
        ("3", (("alice", ""), ("bob", "")))]
    assert [u for u, _ in items[0].grades] == [u for u, _ in items[0].notes]
    assert next_open_item(items, items[0].item) == items[1]
    assert next_open_item(items, items[1].item) == items[0]  # wraps round
    assert next_open_item(items, ("PO", "q", "nope")) == items[0]
    adjudicate(ws, "PO", "q", "3", "partial", "no response", user=CUR)
    settled = disagreements(ws, "PO")
    assert next_open_item(settled, ("PO", "q", "6")) is None  # only the settled one is left


# -- blind mode ----------------------------------------------------------------------------------
def test_blind_mode_is_an_audited_admin_setting(ws):
    assert blind_mode(ws) is False
    for user in (ALICE, CUR, None):
        with pytest.raises(PermissionDenied, match="Switching blind review needs the admin role"):
            set_blind_mode(ws, True, user=user)
    assert set_blind_mode(ws, True, user=ADMIN) is True and blind_mode(ws) is True
    set_blind_mode(ws, True, user=ADMIN)  # no change, no audit row
    set_blind_mode(ws, False, user=ADMIN)
    audits = ws.audit_log("setting")
    assert [(a.action, a.actor, a.object_id, a.after_value()) for a in audits] \
        == [("set", "boss", "blind_review", {"blind_review": False}),
            ("set", "boss", "blind_review", {"blind_review": True})]
    assert blind_mode(ws) is False


def seen(ws, viewer):
    return sorted((lab.user, lab.doc_id) for lab in visible_labels(ws, Labels(ws).find(schema="PO"),
                                                                   viewer))


def test_blind_mode_hides_other_grades_from_an_annotator_until_she_gave_hers(ws):
    everything = seen(ws, CUR)
    assert len(everything) == 9 and seen(ws, ALICE) == everything  # blind mode off
    set_blind_mode(ws, True, user=ADMIN)
    # alice graded 1-3 and skipped 4: bob's 4 and 5 stay hidden
    assert seen(ws, ALICE) == [("alice", d) for d in "1234"] + [("bob", d) for d in "123"]
    assert seen(ws, BOB) == everything  # bob graded every item alice labelled
    assert seen(ws, CUR) == seen(ws, ADMIN) == everything  # reviewers see all
    assert seen(ws, None) == []
    label(ws, "alice", "5", "partial")
    assert ("bob", "5") in seen(ws, ALICE)  # her grade given, bob's shows
    # the disagreements view follows the same rule
    label(ws, "bob", "6", "complete")
    label(ws, "cur", "6", "partial")
    assert [d.doc_id for d in disagreements(ws, "PO", viewer=ALICE)] == ["5", "3"]
    assert [d.doc_id for d in disagreements(ws, "PO", viewer=CUR)] == ["6", "5", "3"]


# -- how an item reads ---------------------------------------------------------------------------
def test_relation_texts_and_titles(ws):
    (braf,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    typed = "gene=gene:673|variant=variant:x1,variant:x2|disease="
    assert relation_texts(ws, [("PO", braf.query_key), ("PO", typed), ("PO", "q")]) == {
        ("PO", braf.query_key): "gene: BRAF · variant: V600E",
        ("PO", typed): "gene: BRAF · variant: x1 + x2",
        ("PO", "q"): ""}
    titles = Documents(ws).titles(["25265492", "nope"])
    assert list(titles) == ["25265492"] and titles["25265492"].startswith("Combined dabrafenib")


# -- kbcurate settings ---------------------------------------------------------------------------
def test_settings_blind_review_command(tmp_path, capsys):
    root = build_app_workspace(tmp_path / "ws", bm25=False)
    assert main(["settings", "blind-review", "-w", str(root)]) == 0
    assert capsys.readouterr().out == "blind-review: off\n"
    assert main(["settings", "blind-review", "on", "-w", str(root)]) == 0
    assert capsys.readouterr().out == "blind-review: on\n"
    with Workspace.open(root) as ws:
        assert blind_mode(ws) and ws.audit_log("setting")[0].actor == "cli"
    assert main(["settings", "blind-review", "off", "-w", str(root)]) == 0
    assert capsys.readouterr().out == "blind-review: off\n"
    with pytest.raises(SystemExit):
        main(["settings", "blind-review", "maybe", "-w", str(root)])
    assert "invalid choice: 'maybe'" in capsys.readouterr().err


# -- kbcurate labels export: the final grade ------------------------------------------------------
def test_labels_export_command_writes_final_grades_and_documents_them(ws, tmp_path, capsys,
                                                                      monkeypatch):
    adj = adjudicate(ws, "PO", "q", "3", "partial", "no response, only resistance", user=CUR)
    out = tmp_path / "labels.csv"
    assert main(["labels", "export", str(out), "--schema", "PO", "-w", str(ws.root)]) == 0
    assert capsys.readouterr().out == \
        f"9 labels written to {out} (with each item's final grade)\n"
    with open(out, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    got = {(r["user"], r["doc_id"]): (r["grade"], r["final_grade"], r["final_source"],
                                      r["adjudicated_by"], r["adjudicated_at"],
                                      r["adjudication_reason"]) for r in rows}
    decided = ("partial", "adjudicated", "cur", adj.created_at, "no response, only resistance")
    assert got == {("alice", "1"): ("complete", "complete", "unanimous", "", "", ""),
                   ("bob", "1"): ("complete", "complete", "unanimous", "", "", ""),
                   ("alice", "2"): ("irrelevant", "irrelevant", "unanimous", "", "", ""),
                   ("bob", "2"): ("irrelevant", "irrelevant", "unanimous", "", "", ""),
                   ("alice", "3"): ("partial", *decided), ("bob", "3"): ("complete", *decided),
                   ("alice", "4"): ("skip", "partial", "unanimous", "", "", ""),
                   ("bob", "4"): ("partial", "partial", "unanimous", "", "", ""),
                   ("bob", "5"): ("complete", "complete", "unanimous", "", "", "")}
    jsonl = tmp_path / "ptm.jsonl"
    assert main(["labels", "export", str(jsonl), "--schema", "PTM", "-w", str(ws.root)]) == 0
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [(r["user"], r["final_grade"], r["final_source"]) for r in lines] == [
        ("bob", None, None), ("alice", None, None)]  # an open disagreement: no final grade
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps the help at the terminal width
    with pytest.raises(SystemExit):
        main(["labels", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "final_grade (a curator's adjudicated grade, else the grade every current non-skip " \
           "label gives), final_source (adjudicated or unanimous), adjudicated_by, " \
           "adjudicated_at (UTC) and adjudication_reason" in help_text
