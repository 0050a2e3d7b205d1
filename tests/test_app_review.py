"""The Review page (AppTest): label log filters, relabel with audit trail, kappa, exports."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3

import pytest
from app_helpers import (
    APP,
    add_users,
    build_app_workspace,
    label_rows,
    live_markdown,
    shown,
    sign_in,
)
from streamlit.testing.v1 import AppTest

from curation.access.adjudication import adjudicate, blind_mode, set_blind_mode
from curation.access.users import Role, User
from curation.evaluation.reporting import export_labels_bytes
from curation.search import session
from curation.search.suggestions import add_suggestion, list_suggestions
from curation.store.labels import Labels
from curation.store.relations import Relations
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
                Labels(ws).record(user=user, schema="PO", query_key="q", query_text="BRAF?",
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


def abstract_html(at: AppTest) -> str:
    """The highlighted title and abstract (curation.matching.highlight) the page shows."""
    (html,) = [m.value for m in at.markdown if m.value.startswith('<div class="kb-doc">')]
    return html


def marked(html: str) -> list[tuple[str, str]]:
    """(slot, text) of each highlight mark, in reading order."""
    return re.findall(r'<mark [^>]*data-slot="([^"]+)"[^>]*>([^<]*)</mark>', html)


def table_with(at: AppTest, column: str):
    """The first table of the page that has ``column`` (the tabs' tables carry no key)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


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
    # the filter names what ranked the abstract in words, and filters by the exact version
    assert at.selectbox(key="rv_model").label == "Ranked by"
    assert "BM25 + entity rerank" in at.selectbox(key="rv_model").options


def test_relabel_keeps_the_audit_trail(ws_root):
    at = review("alice")
    with Workspace.open(ws_root) as ws:
        target = next(lab for lab in Labels(ws).find(user="alice") if lab.doc_id == "3")
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
    assert audit.action == "relabel" and audit.before_value()["grade"] == "partial"
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
        labels = Labels(ws).find()
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

    monkeypatch.setattr(Labels, "users", broken)
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


# -- issue 14: the relation, title and abstract of a label; disagreements; suggestions; blind ----
def test_log_shows_relation_and_title_and_opens_the_abstract(ws_root):
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        Labels(ws).record(user="alice", schema="PO", query_key=partial.query_key,
                          query_text="BRAF V600E treatment", doc_id="90100002", grade="partial")
    at = review("alice")
    first = log(at).iloc[0]  # newest first
    assert (first["doc_id"], first["relation"]) == ("90100002", "gene: BRAF · variant: V600E")
    assert first["title"].startswith("BRAF V600E <script>alert(1)</script> resistance")
    assert not at.get("link_button")  # nothing opened yet
    at.session_state["rv_table"] = {"selection": {"rows": [0], "columns": []}}
    at.run()
    assert not at.exception
    text = abstract_html(at)  # highlighted as on the Curate page (issue 29 item 5)
    assert "<script>" not in text and "<img" not in text  # escaped, shown literally
    assert "&lt;script&gt;alert(1)&lt;/script&gt; resistance" in text
    assert marked(text) == 2 * [("gene", "BRAF"), ("variant", "V600E"),
                                ("treatment", "trametinib")]  # title, then abstract
    # each mark has its tooltip: the name and NCBI Gene link, the CIViC record of V600E
    assert text.count('<span class="kb-tip" role="tooltip">') == 6 and "gene: 673" not in text
    assert 'href="https://www.ncbi.nlm.nih.gov/gene/673"' in text
    assert 'href="https://civicdb.org/evidence/1425/summary"' in text
    assert any(shown(c.value) == "90100002 (2020) · <b>Evil</b> [journal](javascript:alert(1))"
               for c in at.caption)  # the journal escaped too
    (link,) = at.get("link_button")
    assert link.proto.url == "https://pubmed.ncbi.nlm.nih.gov/90100002/"


def test_a_curator_accepts_a_suggestion_with_a_reason(ws_root):
    add_users(ws_root, cur="curator", eve="curator")
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        row = add_suggestion(ws, user=User("eve", Role.CURATOR), schema=ws.schemas()["PO"],
                             partial=partial, pmid="90100001", answer="Imatinib",
                             answer_key="drug:imatinib", comment="one patient responded")
    at = review("cur")
    assert at.selectbox(key="sg_status").value == "new"  # the queue first
    assert table_with(at, "review_reason")["answer"].tolist() == ["Imatinib"]
    at.text_input(key="sg_reason").input("names gene, variant, drug and the response")
    at.button(key="sg_accept").click().run()
    assert any(shown(s.value) == f"Suggestion {row.id} (PMID 90100001, Imatinib) accepted."
               for s in at.success)
    with Workspace.open(ws_root) as ws:
        stored = list_suggestions(ws, status="accepted")
        audit = ws.audit_log("source_suggestion")[0]
    assert [(s.id, s.reviewed_by, s.review_reason) for s in stored] == [
        (row.id, "cur", "names gene, variant, drug and the response")]
    assert (audit.action, audit.actor) == ("accept", "cur")
    at.selectbox(key="sg_status").set_value("accepted").run()
    assert table_with(at, "review_reason")["reviewed_by"].tolist() == ["cur"]


def test_an_annotator_sees_suggestions_but_cannot_moderate(ws_root):
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        add_suggestion(ws, user=User("boss", Role.ADMIN), schema=ws.schemas()["PO"],
                       partial=partial, pmid="90100001", answer="Imatinib", comment="ok")
    at = review("alice")
    assert table_with(at, "review_reason")["pmid"].tolist() == ["90100001"]
    keys = {b.key for b in at.button}
    assert not keys & {"sg_accept", "sg_reject"} and "dg_save" not in keys
    assert "Curators and admins accept or reject suggestions." in [c.value for c in at.caption]


def test_disagreements_list_the_differing_items_and_an_admin_records_a_final_grade(ws_root):
    add_users(ws_root, carol="annotator")
    with Workspace.open(ws_root) as ws:  # carol makes items 1 and 2 disagree too
        for doc, grade in (("1", "partial"), ("2", "complete")):
            Labels(ws).record(user="carol", schema="PO", query_key="q", query_text="BRAF?",
                              doc_id=doc, grade=grade)
    at = review("boss")
    table = table_with(at, "decided_by")
    assert sorted(table["doc_id"]) == ["1", "2", "3"]  # 4 is skip vs partial: no disagreement
    assert table.set_index("doc_id").loc["3", "grades"] == "alice: partial · bob: complete"
    options = at.selectbox(key="dg_item").options  # open items, the newest labelled first
    assert [o.split(" · ")[0] for o in options] == ["2", "1", "3"]
    at.selectbox(key="dg_item").set_value("PO\x1fq\x1f3").run()
    at.selectbox(key="dg_grade").set_value("complete").run()
    at.text_input(key="dg_reason").input("the abstract names the response")
    at.button(key="dg_save").click().run()
    assert not at.exception
    assert [shown(s.value) for s in at.success] == [
        "Final grade of 3 (BRAF?) recorded: complete. Next open item: 2 · BRAF?."]
    assert at.selectbox(key="dg_item").value == "PO\x1fq\x1f2"  # wrapped round to the first
    with Workspace.open(ws_root) as ws:
        rows = [dict(r) for r in ws.conn.execute("SELECT * FROM adjudications")]
        audit = ws.audit_log("adjudication")[0]
    assert [(r["doc_id"], r["grade"], r["user"], r["reason"], r["superseded_by"])
            for r in rows] == [("3", "complete", "boss", "the abstract names the response", None)]
    assert (audit.action, audit.actor) == ("adjudicate", "boss")
    table = table_with(at, "decided_by").set_index("doc_id")
    assert (table.loc["3", "final"], table.loc["3", "decided_by"]) == ("complete", "boss")


def test_blind_mode_hides_other_grades_until_the_annotator_gave_hers(ws_root):
    with Workspace.open(ws_root) as ws:
        Labels(ws).record(user="bob", schema="PO", query_key="q", query_text="BRAF?",
                          doc_id="5", grade="complete")
        set_blind_mode(ws, True, user=User("boss", Role.ADMIN))
    at = review("alice")
    rows = log(at)
    # alice graded 1-3 and skipped 4: bob's 4 and 5 stay hidden
    assert sorted(zip(rows["user"], rows["doc_id"], strict=True)) == [
        ("alice", "1"), ("alice", "2"), ("alice", "3"), ("alice", "4"),
        ("bob", "1"), ("bob", "2"), ("bob", "3")]
    assert any("2 labels of other users stay hidden" in c.value for c in at.caption)
    assert not at.metric  # no kappa over other users' grades either
    at = review("bob")  # bob graded 1-5, so he sees alice's labels
    assert len(log(at)) == 9
    at = review("boss")  # the admin sees everything and holds the switch
    assert len(log(at)) == 9 and at.toggle(key="rv_blind").value is True
    at.toggle(key="rv_blind").set_value(False).run()
    with Workspace.open(ws_root) as ws:
        assert not blind_mode(ws)
        assert ws.audit_log("setting")[0].actor == "boss"


# -- issue 29 item 5: the disagreements view highlights, shows notes, moves on; exports ----------
HOSTILE_NOTE = "see ![x](http://e.vil/x.png) <b>bold</b> :material/home:"


@pytest.fixture
def braf_disagreements(ws_root):
    """alice and bob disagree on two abstracts of the BRAF V600E relation, with notes."""
    add_users(ws_root, cur="curator")
    with Workspace.open(ws_root) as ws:
        (braf,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        for doc, (a, note_a), (b, note_b) in (
                ("90100001", ("partial", "no response data"), ("complete", "")),
                ("90100002", ("irrelevant", HOSTILE_NOTE), ("partial", "resistance only"))):
            for user, grade, note in (("alice", a, note_a), ("bob", b, note_b)):
                Labels(ws).record(user=user, schema="PO", query_key=braf.query_key,
                                  query_text="BRAF V600E treatment", doc_id=doc, grade=grade,
                                  note=note)
    return braf.query_key


def test_disagreement_view_highlights_shows_notes_and_moves_to_the_next_open_item(
        ws_root, braf_disagreements):
    key = braf_disagreements
    at = review("cur")
    table = table_with(at, "decided_by").set_index("doc_id")
    assert table.loc["90100002", "grades"] == "alice: irrelevant · bob: partial"
    assert table.loc["90100002", "notes"] == f"alice: {HOSTILE_NOTE} · bob: resistance only"
    grid = next(d for d in at.dataframe if "decided_by" in d.value.columns)
    config = json.loads(grid.proto.columns)
    longest = max(len(g) for g in table["grades"])  # "alice: partial · bob: partial" and kin
    assert config["grades"]["width"] >= 7 * longest and config["grades"]["pinned"] is True
    first = f"PO\x1f{key}\x1f90100002"  # the newest labelled open item
    assert at.selectbox(key="dg_item").value == first
    lines = [m.value for m in at.markdown if m.value.startswith("- **")]
    assert [shown(line) for line in lines] == [
        f"- **alice**: irrelevant · note: {HOSTILE_NOTE}",
        "- **bob**: partial · note: resistance only"]
    assert live_markdown(lines[0].partition("note: ")[2]) == []  # the note shows literally
    text = abstract_html(at)
    assert ("gene", "BRAF") in marked(text) and ("variant", "V600E") in marked(text)
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "<img" not in text
    at.selectbox(key="dg_grade").set_value("irrelevant").run()
    at.text_input(key="dg_reason").input("resistance, no treatment response")
    at.button(key="dg_save").click().run()
    assert not at.exception
    assert [shown(s.value) for s in at.success] == [
        "Final grade of 90100002 (BRAF V600E treatment) recorded: irrelevant. "
        "Next open item: 90100001 · BRAF V600E treatment."]
    assert at.selectbox(key="dg_item").value == f"PO\x1f{key}\x1f90100001"
    assert at.text_input(key="dg_reason").value == ""
    assert [shown(m.value) for m in at.markdown if m.value.startswith("- **")] == [
        "- **alice**: partial · note: no response data", "- **bob**: complete · *no note*"]
    assert ("gene", "BRAF") in marked(abstract_html(at))  # the next abstract, highlighted
    at.selectbox(key="dg_grade").set_value("complete").run()
    at.text_input(key="dg_reason").input("vemurafenib response")
    at.button(key="dg_save").click().run()
    assert [shown(s.value) for s in at.success] == [
        "Final grade of 90100001 (BRAF V600E treatment) recorded: complete. "
        "Next open item: 3 · BRAF?."]  # the fixture's own disagreement (query q)
    assert "Document 3 is not in the workspace." in [c.value for c in at.caption]
    at.text_input(key="dg_reason").input("both read it; complete")
    at.button(key="dg_save").click().run()
    assert [shown(s.value) for s in at.success] == [
        "Final grade of 3 (BRAF?) recorded: complete. No open disagreement is left."]
    assert any("3 items graded differently, 0 without a final grade (skips are not grades): "
               "every disagreement is settled" == shown(c.value) for c in at.caption)


def exported(data: bytes, fmt: str) -> list[dict]:
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(data.decode())))
    return [json.loads(line) for line in data.decode().splitlines()]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_app_exports_carry_the_final_grade(ws_root, braf_disagreements, fmt):
    key = braf_disagreements
    with Workspace.open(ws_root) as ws:
        adj = adjudicate(ws, "PO", key, "90100002", "irrelevant", "no treatment response",
                         user=User("cur", Role.CURATOR))
        rows = exported(export_labels_bytes(ws, Labels(ws).find(), fmt, User("cur", Role.CURATOR)),
                        fmt)
    empty = "" if fmt == "csv" else None
    final = {(r["user"], r["doc_id"]): (r["final_grade"], r["final_source"], r["adjudicated_by"],
                                        r["adjudicated_at"], r["adjudication_reason"])
             for r in rows}
    assert final[("alice", "90100002")] == final[("bob", "90100002")] == (
        "irrelevant", "adjudicated", "cur", adj.created_at, "no treatment response")
    assert final[("alice", "90100001")] == (empty,) * 5  # still open
    assert final[("alice", "1")] == final[("bob", "1")] == ("complete", "unanimous", "", "", "")
    assert final[("alice", "4")] == ("partial", "unanimous", "", "", "")  # the skip is no grade
    assert final[("alice", "3")] == (empty,) * 5  # partial against complete, not decided
    assert len(rows) == 12 and list(rows[0])[-5:] == [
        "final_grade", "final_source", "adjudicated_by", "adjudicated_at", "adjudication_reason"]


def test_blind_mode_export_gives_an_annotator_final_grades_of_her_items_only(ws_root):
    with Workspace.open(ws_root) as ws:
        Labels(ws).record(user="bob", schema="PO", query_key="q", query_text="BRAF?",
                          doc_id="5", grade="complete")
        set_blind_mode(ws, True, user=User("boss", Role.ADMIN))
        alice = User("alice", Role.ANNOTATOR)
        rows = exported(export_labels_bytes(ws, Labels(ws).find(user="alice"), "csv", alice),
                        "csv")
        everything = exported(export_labels_bytes(ws, Labels(ws).find(), "csv"), "csv")
    # alice skipped 4: bob's partial there is hidden from her, and so is the final grade
    assert {r["doc_id"]: r["final_grade"] for r in rows} == {
        "1": "complete", "2": "irrelevant", "3": "", "4": ""}
    assert {r["doc_id"]: r["final_grade"] for r in everything if r["user"] == "bob"} == {
        "1": "complete", "2": "irrelevant", "3": "", "4": "partial", "5": "complete"}


# -- issue 44: a relabel starts from the label's grade and note; agreement opens on a real pair --
def test_relabel_starts_from_the_labels_grade_and_keeps_its_note(ws_root):
    with Workspace.open(ws_root) as ws:
        noted = Labels(ws).record(user="alice", schema="PO", query_key="q", query_text="BRAF?",
                                  doc_id="22934253", grade="complete", note="names V600E")
    at = review("alice")
    at.selectbox(key="rv_label").set_value(noted.id).run()
    assert at.selectbox(key="rv_new_grade").value == "complete"  # not always "complete":
    assert at.text_input(key="rv_new_note").value == "names V600E"
    at.selectbox(key="rv_new_grade").set_value("partial").run()
    at.button(key="rv_relabel").click().run()
    assert any("Relabelled 22934253 as partial" in s.value for s in at.success)
    with Workspace.open(ws_root) as ws:
        (current,) = [lab for lab in Labels(ws).find(user="alice") if lab.doc_id == "22934253"]
    assert (current.grade.value, current.note) == ("partial", "names V600E")
    # the form now stands on the new label, with its grade and note
    assert at.selectbox(key="rv_label").value == current.id
    assert at.selectbox(key="rv_new_grade").value == "partial"
    assert at.text_input(key="rv_new_note").value == "names V600E"
    with Workspace.open(ws_root) as ws:
        other = next(lab for lab in Labels(ws).find(user="alice") if lab.doc_id == "3")
    at.selectbox(key="rv_label").set_value(other.id).run()
    assert (at.selectbox(key="rv_new_grade").value,
            at.text_input(key="rv_new_note").value) == ("partial", "")


def test_agreement_opens_on_the_pair_that_shares_the_most_items(ws_root):
    with Workspace.open(ws_root) as ws:  # "aaron" sorts first and shares nothing with alice
        Labels(ws).record(user="aaron", schema="PO", query_key="other", query_text="KRAS?",
                          doc_id="9", grade="complete")
        assert Labels(ws).busiest_pair() == ("alice", "bob")
        assert Labels(ws).agreement("aaron", "alice").shared == 0
    at = review("boss")
    assert (at.selectbox(key="ag_a").value, at.selectbox(key="ag_b").value) == ("alice", "bob")
    assert {m.label: m.value for m in at.metric}["Shared items"] == "3"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_exports_name_the_relation_in_words_and_the_abstracts_title(ws_root, fmt):
    """Issue 44 item 11: an export named the relation only by its key."""
    with Workspace.open(ws_root) as ws:
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        Labels(ws).record(user="alice", schema="PO", query_key=partial.query_key,
                          query_text="BRAF V600E treatment", doc_id="90100002", grade="partial")
        rows = exported(export_labels_bytes(ws, Labels(ws).find(), fmt), fmt)
    (row,) = [r for r in rows if r["doc_id"] == "90100002"]
    assert row["query_key"] == partial.query_key
    assert row["relation"] == "gene: BRAF · variant: V600E"
    assert row["title"].startswith("BRAF V600E <script>alert(1)</script> resistance")
    typed = [r for r in rows if r["query_key"] == "q"]  # a key of neither form: no words
    assert typed and all(r["relation"] == "" for r in typed)
    assert list(rows[0])[:10] == ["id", "created_at", "user", "schema", "query_key", "relation",
                                  "query_text", "doc_id", "title", "grade"]
