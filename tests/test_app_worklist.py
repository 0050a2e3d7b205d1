"""The Worklist page (AppTest): the relations table with progress, the priority radio, "Open in
Curate", the labels-per-day chart and progress per user, a missing index; the watched relations
(issue 37 item 2: "N new abstracts since DATE", best new score first, Open in Curate, a failed
run's error, the NEW badge on Curate's cards, the "Watch this relation" toggle)."""

from __future__ import annotations

import json

import pytest
from app_helpers import APP, add_users, build_app_workspace, shown, sign_in
from eutils_server import eutils_server_fixture  # noqa: F401 (fixture)
from streamlit.testing.v1 import AppTest

from curation.access.users import Role, User
from curation.jobs.queue import list_jobs, wait_for_job
from curation.pubmed.watch import add_watch
from curation.search.suggestions import add_suggestion
from curation.search.worklist import Priority
from curation.store.labels import Labels
from curation.store.relations import Relations
from curation.store.watches import RunCounts, Watches
from curation.store.workspace import Workspace

WORKLIST = "app_pages/worklist.py"
EGFR = "gene=gene:1956|variant=variant:l858r"
ABL1 = "gene=gene:25|variant=variant:bcr::abl"
ALK = "gene=gene:238|variant=variant:eml4-alk"
PDGFRA = "gene=gene:5156|variant=variant:d842v"
BRAF = "gene=gene:673|variant=variant:v600e"
RET = "gene=gene:5979|variant=variant:ret fusions"
LABELS = {EGFR: "EGFR · L858R → ? (2 known treatment, 1 PMIDs)",
          ABL1: "ABL1 · BCR::ABL → ? (2 known treatment, 1 PMIDs)",
          ALK: "ALK · EML4-ALK → ? (1 known treatment, 1 PMIDs)",
          PDGFRA: "PDGFRA · D842V → ? (1 known treatment, 1 PMIDs)",
          BRAF: "BRAF · V600E → ? (1 known treatment, 1 PMIDs)",
          RET: "RET · RET FUSIONS → ? (1 known treatment, 0 PMIDs)"}


@pytest.fixture
def ws_root(tmp_path, monkeypatch):
    """bob labelled ABL1's only top abstract and one of EGFR's; a pending suggestion of a new
    answer on RET."""
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, alice="curator", bob="annotator")
    with Workspace.open(root) as ws:
        for key, doc, grade, day in ((ABL1, "99000001", "partial", "2024-05-01"),
                                     (EGFR, "15118073", "complete", "2024-05-02")):
            label = Labels(ws).record(user="bob", schema="PO", query_key=key, query_text="q",
                                      doc_id=doc, grade=grade, model_version="bm25")
            with ws.transaction():
                ws.conn.execute("UPDATE labels SET created_at = ? WHERE id = ?",
                                (f"{day}T09:00:00+00:00", label.id))
        ret = next(p for p in Relations(ws).partial("PO") if p.query_key == RET)
        add_suggestion(ws, user=User("alice", Role.CURATOR), schema=ws.schemas()["PO"],
                       partial=ret, pmid="99000001", answer="Pralsetinib",
                       answer_key="drug:pralsetinib", comment="responses in RET fusions")
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(root))
    return root


def worklist_page(user: str = "alice") -> AppTest:
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), user)
    at.switch_page(WORKLIST).run()
    assert not at.exception and not at.error
    assert at.subheader[0].value == "Worklist"
    return at


def relations(at: AppTest) -> list[str]:
    return at.dataframe(key="wl_table").value["relation"].tolist()


def test_table_lists_relations_by_evidence_with_progress(ws_root):
    at = worklist_page("alice")
    assert relations(at) == [LABELS[k] for k in (BRAF, EGFR, ABL1, PDGFRA, RET, ALK)]
    table = at.dataframe(key="wl_table").value.set_index("query key")
    assert table.loc[ABL1, "to label (you)"] == 1 and table.loc[ABL1, "to label (anyone)"] == 0
    assert table.loc[ABL1, "team progress"] == 1.0 and table.loc[ABL1, "progress"] == 0.0
    assert table.loc[RET, "new answers"] == 1 and table.loc[BRAF, "evidence"] == "A"
    assert at.radio(key="wl_priority").value is Priority.EVIDENCE
    bob = worklist_page("bob")  # ABL1's only abstract is bob's: finished for him
    assert LABELS[ABL1] not in relations(bob)
    assert bob.dataframe(key="wl_table").value.set_index("query key").loc[EGFR, "your labels"] == 1


def test_priority_changes_the_order(ws_root):
    at = worklist_page()
    at.radio(key="wl_priority").set_value(Priority.FEWEST_LABELS).run()
    assert not at.exception
    assert relations(at) == [LABELS[k] for k in (ALK, PDGFRA, BRAF, RET, EGFR, ABL1)]
    at.radio(key="wl_priority").set_value(Priority.NEW_ANSWERS).run()
    assert relations(at)[0] == LABELS[RET]
    at.checkbox(key="wl_done").check().run()  # nothing finished for alice: the same list
    assert len(relations(at)) == 6


def test_most_suggested_new_answers_counts_candidates_and_says_how_it_ordered(ws_root):
    """Issue 29 item 6: without "Count candidates" this order tied on every relation no pending
    suggestion names and fell back to the KB order silently."""
    at = worklist_page()
    assert at.checkbox(key="wl_candidates").value is False
    at.radio(key="wl_priority").set_value(Priority.NEW_ANSWERS).run()
    assert not at.exception
    forced = at.checkbox(key="wl_candidates_forced")
    assert forced.value is True and forced.proto.disabled
    table = at.dataframe(key="wl_table").value
    assert relations(at) == [LABELS[k] for k in (RET, BRAF, EGFR, ABL1, ALK, PDGFRA)]
    assert table.set_index("query key")["answer candidates"].to_dict() == {
        RET: 0, BRAF: 1, EGFR: 0, ABL1: 0, ALK: 0, PDGFRA: 0}  # BRAF: imatinib in 90100001
    assert "Ordered by new answers of pending source suggestions, then pending suggestions, " \
           "then new answer candidates in the top abstracts, counted for all 6 of them." in [
               c.value for c in at.caption]
    assert not at.warning
    at.radio(key="wl_priority").set_value(Priority.EVIDENCE).run()  # the choice is kept
    assert at.checkbox(key="wl_candidates").value is False


def test_new_answers_order_that_decides_nothing_says_so(ws_root, monkeypatch):
    with Workspace.open(ws_root) as ws, ws.transaction():  # no pending suggestion left
        ws.conn.execute("UPDATE source_suggestions SET status = 'rejected'")
    monkeypatch.setattr("curation.search.worklist.answer_candidates", lambda *a, **k: [])
    at = worklist_page()
    at.radio(key="wl_priority").set_value(Priority.NEW_ANSWERS).run()
    assert not at.exception
    (warning,) = at.warning
    assert warning.value.startswith("No listed relation has a pending source suggestion of a "
                                    "new answer or a new answer candidate in its top abstracts, "
                                    "so this order ties everywhere: the list is in KB order")
    assert relations(at) == [LABELS[k] for k in (EGFR, ABL1, ALK, PDGFRA, BRAF, RET)]


def test_open_in_curate_sets_the_relation_and_switches_page(ws_root):
    at = worklist_page()
    assert "wl_open" not in [b.key for b in at.button]  # nothing selected yet
    at.session_state["wl_table"] = {"selection": {"rows": [3], "columns": [], "cells": []}}
    at.run()
    assert any(LABELS[PDGFRA] in shown(m.value) for m in at.markdown)
    at.session_state["rel_search"] = "braf"  # would hide PDGFRA from Curate's picker
    at.button(key="wl_open").click().run()
    assert not at.exception
    assert at.subheader[0].value == "Curate"
    assert at.session_state["query_mode"] == "KB relation"
    assert at.selectbox(key="relation_pick_PO").value == PDGFRA
    assert at.text_input(key="rel_search").value == ""
    assert at.text_input(key=next(t.key for t in at.text_input
                                  if t.key.startswith("qtext_PO_"))).value == \
        "Treatment for gene PDGFRA and variant D842V?"


def test_chart_of_labels_per_day_and_progress_per_user(ws_root):
    at = worklist_page()
    (chart,) = at.get("plotly_chart")
    figure = json.loads(chart.proto.spec)
    bars = {trace["name"]: trace["y"] for trace in figure["data"]}
    assert set(bars) == {"complete", "partial"}
    users = at.dataframe[-1].value  # the last table (st.dataframe keys show only with on_select)
    assert users["user"].tolist() == ["bob"]
    assert users[["labels", "complete", "partial", "relations"]].iloc[0].tolist() == [2, 1, 1, 2]


def test_a_missing_dense_index_offers_a_background_build_only(ws_root):
    at = worklist_page()
    at.selectbox(key="retriever").set_value("dense").run()
    assert not at.exception
    assert any("The dense index is not built" in i.value for i in at.info)
    assert at.button(key="build_index").label == "Build the dense index in the background"
    assert "wl_table" not in [d.key for d in at.dataframe]
    with Workspace.open(ws_root) as ws:
        assert list_jobs(ws, "index") == []


ALICE = User("alice", Role.CURATOR)


def record(ws: Workspace, watch_id: int, since: str, hits: list, error: str = "") -> None:
    Watches(ws).record_run(watch_id, RunCounts("q", since, "2026-02-01", 1, len(hits),
                                               len(hits), len(hits), error),
                           actor="alice", started_at="2026-02-01T06:00:00+00:00",
                           finished_at="2026-02-01T06:01:00+00:00", hits=hits)


@pytest.fixture
def watched_root(ws_root):
    """alice watches BRAF V600E (a workspace abstract new, score 0.9), EGFR L858R (best new
    score 5.0, but bob labelled it; the next one 1.5) and ALK (its last run failed)."""
    with Workspace.open(ws_root) as ws:
        braf = add_watch(ws, ALICE, "PO", slots={"gene": "BRAF", "variant": "V600E"},
                         since="2019-01-01")
        egfr = add_watch(ws, ALICE, "PO", slots={"gene": "EGFR", "variant": "L858R"},
                         since="2010-01-01")
        alk = add_watch(ws, ALICE, "PO", slots={"gene": "ALK", "variant": "EML4-ALK"},
                        since="2021-01-01")
        record(ws, braf.id, "2019-01-01", [(BRAF, "25265492", 0.9, 3), (BRAF, "99200002", None,
                                                                        None)])
        record(ws, egfr.id, "2010-01-01", [(EGFR, "15118073", 5.0, 1),
                                           (EGFR, "99200011", 1.5, 2)])
        record(ws, alk.id, "2021-01-01", [], error="E-utilities esearch.fcgi failed <b>x</b>")
    return ws_root


def watched_lines(at: AppTest) -> list[str]:
    return [shown(m.value) for m in at.markdown if " by alice" in m.value]


def test_watched_relations_best_new_first_open_in_curate_and_new_badge(watched_root):
    at = worklist_page()
    assert "**Watched relations**" in [m.value for m in at.markdown]
    assert watched_lines(at) == [
        "**EGFR · L858R** · 1 new abstract since 2010-01-01 · best score 1.5 (PMID 99200011) · "
        "watch 2 by alice",
        "**BRAF · V600E** · 2 new abstracts since 2019-01-01 · best score 0.9 (PMID 25265492) · "
        "watch 1 by alice",
        "**ALK · EML4-ALK** · no new abstract since 2021-01-01 · watch 3 by alice"]
    (warning,) = at.warning
    assert shown(warning.value) == (
        "The last run of watch 3 (ALK · EML4-ALK), 2026-02-01 06:01 UTC, failed: E-utilities "
        "esearch.fcgi failed <b>x</b>. The next run catches up from 2021-01-01.")
    assert "<b>" not in warning.value  # escaped, shown literally
    assert [b.key for b in at.button if b.key.startswith("wl_watch_open")] == [
        "wl_watch_open_0", "wl_watch_open_1"]  # nothing new on ALK: nothing to open
    at.session_state["rel_search"] = "egfr"  # would hide BRAF from Curate's picker
    at.button(key="wl_watch_open_1").click().run()
    assert not at.exception
    assert at.subheader[0].value == "Curate"
    assert at.selectbox(key="relation_pick_PO").value == BRAF
    cards = [m.value for m in at.markdown if m.value.startswith('<div class="kb-meta">')]
    badge = '<span class="kb-badge kb-new">NEW since 2019-01-01</span>'
    assert [("25265492" in c) for c in cards if badge in c] == [True]


def test_watch_this_relation_toggle_on_curate(ws_root, monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "alice@lab.org")
    at = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "alice")
    at.text_input(key="rel_search").set_value("BRAF").run()
    (toggle,) = [t for t in at.toggle if t.label == "Watch this relation"]
    assert toggle.value is False
    (area,) = [t for t in at.text_area if t.label == "PubMed query (edit freely)"]
    area.set_value('"BRAF"[tiab] AND "V600E"[tiab]')
    toggle.set_value(True).run()
    assert not at.exception
    with Workspace.open(ws_root) as ws:
        (watch,) = Watches(ws).watches()
    assert (watch.owner, watch.target, watch.pubmed_query) == (
        "alice", BRAF, '"BRAF"[tiab] AND "V600E"[tiab]')
    assert any("Watching this relation" in s.value for s in at.success)
    (toggle,) = [t for t in at.toggle if t.label == "Watch this relation"]
    assert toggle.value is True
    with Workspace.open(ws_root) as ws:  # removed elsewhere (kbcurate watch remove)
        Watches(ws).remove(watch.id)
    at.run()
    (toggle,) = [t for t in at.toggle if t.label == "Watch this relation"]
    assert toggle.value is False  # the toggle follows the database
    toggle.set_value(True).run()
    toggle = next(t for t in at.toggle if t.label == "Watch this relation")
    toggle.set_value(False).run()
    with Workspace.open(ws_root) as ws:
        assert Watches(ws).watches() == []
    assert any("No longer watching" in i.value for i in at.info)
    bob = sign_in(AppTest.from_file(APP, default_timeout=60).run(), "bob")  # an annotator
    bob.text_input(key="rel_search").set_value("BRAF").run()
    assert not [t for t in bob.toggle if t.label == "Watch this relation"]


def test_a_failed_watch_runs_again_as_a_job_for_its_owner(watched_root, eutils_server,
                                                         monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "alice@lab.org")  # the worker inherits it and the URL
    assert not [b for b in worklist_page("bob").button if b.key.startswith("wl_watch_run")]
    at = worklist_page("alice")
    at.button(key="wl_watch_run_3").click().run()
    assert not at.exception
    assert any("Running watch 3 in the background" in i.value for i in at.info)
    with Workspace.open(watched_root) as ws:
        (job,) = list_jobs(ws, "watch")
        assert (job.params, job.created_by) == ({"watch_id": 3}, "alice")
        done = wait_for_job(ws, job.id)
        assert done.status.value == "done", done.error
        assert Watches(ws).runs(3)[0].status == "done"
    at.run()
    assert not at.warning  # the last run of ALK is fine now
    assert eutils_server.requests("esearch.fcgi")[0].params["mindate"] == ["2021/01/01"]


def test_many_watches_are_paged_fifty_a_page(watched_root):
    """Issue 42 ("Also"): 913 watches drew in 5.8 s; the list draws one page of 50 with a page
    selector (and the keys of its buttons stay unique across pages)."""
    with Workspace.open(watched_root) as ws, ws.transaction():
        for i in range(57):  # 60 watches in all, the 57 added with nothing new
            Watches(ws).add(owner="alice", schema="PO", kind="relation",
                            target=f"gene=gene:{9000 + i}", spec={"slots": {"gene": f"G{i}"}},
                            label=f"G{i}", pubmed_query=f'"G{i}"[tiab]', max_hits=200,
                            every_days=1, mindate="2026-01-01", at="2026-01-01T00:00:00+00:00")
    at = worklist_page()
    lines = watched_lines(at)
    assert len(lines) == 50 and lines[0].startswith("**EGFR · L858R** · 1 new abstract")
    assert lines[-1] == "**G46** · no new abstract since 2026-01-01 · watch 50 by alice"
    page = at.number_input(key="wl_watch_page")
    assert (page.value, page.min, page.max) == (1, 1, 2)
    assert [c.value for c in at.caption if c.value.startswith("Watched relations")] == [
        "Watched relations 1-50 of 60 (page 1 of 2); `kbcurate watch list` lists them all."]
    page.set_value(2).run()
    assert not at.exception
    assert watched_lines(at) == [f"**G{i}** · no new abstract since 2026-01-01 · watch {i + 4} "
                                 "by alice" for i in range(47, 57)]
    assert [c.value for c in at.caption if c.value.startswith("Watched relations")] == [
        "Watched relations 51-60 of 60 (page 2 of 2); `kbcurate watch list` lists them all."]
    assert not at.warning  # ALK's failed run is on page 1
    at.number_input(key="wl_watch_page").set_value(1).run()
    assert len(watched_lines(at)) == 50 and len(at.warning) == 1


def test_run_again_while_the_watch_runs_says_who_runs_it(watched_root, monkeypatch):
    """Issue 42 item 3: "Run again now" while the watch's job is unfinished is told so."""
    from datetime import datetime

    from curation.pubmed.watch_jobs import submit_watch_run

    monkeypatch.setenv("NCBI_EMAIL", "alice@lab.org")
    with Workspace.open(watched_root) as ws:
        job = submit_watch_run(ws, 3, user=ALICE, start=False)  # queued: no worker here
    at = worklist_page("alice")
    at.button(key="wl_watch_run_3").click().run()
    assert not at.exception
    hhmm = datetime.fromisoformat(job.created_at).strftime("%H:%M")
    assert [shown(i.value) for i in at.info if "not started twice" in i.value] == [
        f"Watch 3 (job {job.id}) is already queued since {hhmm} UTC (started by alice, waiting "
        "for a worker); it was not started twice."]
    with Workspace.open(watched_root) as ws:
        assert [j.id for j in list_jobs(ws, "watch")] == [job.id]
