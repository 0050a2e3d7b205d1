"""Watch a relation for new abstracts (issue 37, item 2), against the loopback E-utilities of
tests/eutils_server.py (nothing leaves the machine).

Covered: add / list / remove with roles (annotators may not watch; only the owner or an admin
removes or runs a watch) and the audit log; a run asks PubMed only for what appeared since the
last successful run (``mindate``/``maxdate``, ``datetype=edat``), imports and ranks it; a run
with nothing new imports nothing and asks efetch nothing; a failed run (an E-utilities error, a
fetch that fails half-way) records its error, does not move the watch's date, and the next run
catches up; a filter watch searches each relation it lists; the digest and the NEW dates; the
``watch`` job (roles, one per watch, a failed run fails the job); ``kbcurate watch``
(``add --json``, ``list``, ``run`` exit codes, ``remove``); the card's NEW badge, escaped.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from app_helpers import add_users, build_app_workspace
from eutils_server import EutilsServer, Fault, eutils_server_fixture  # noqa: F401

from curation.access.users import PermissionDenied, Role, User
from curation.cli.main import main
from curation.jobs.queue import get_job, run_job, submit_job
from curation.pubmed import watch as watch_module
from curation.pubmed import watch_run
from curation.pubmed.query import build_pubmed_query
from curation.pubmed.watch import add_watch, is_due, remove_watch
from curation.pubmed.watch_digest import new_since, watch_digest
from curation.pubmed.watch_jobs import check_watch_params, submit_watch_run
from curation.pubmed.watch_run import chosen_watches, run_watch, run_watches
from curation.search.cards import RankedDoc, card_html, with_new_since
from curation.store.documents import Documents
from curation.store.labels import Labels
from curation.store.watches import Watches
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.fetch import EntrezSettings

BRAF = {"gene": "BRAF", "variant": "V600E"}
BRAF_KEY = "gene=gene:673|variant=variant:v600e"
EGFR_KEY = "gene=gene:1956|variant=variant:l858r"
PDGFRA_KEY = "gene=gene:5156|variant=variant:d842v"
CORA, BOB = User("cora", Role.CURATOR), User("bob", Role.CURATOR)
ANN, ADA = User("ann", Role.ANNOTATOR), User("ada", Role.ADMIN)
# BRAF V600E records of the fake PubMed by Entrez date: 99200002 2019-10-02, 99200028
# 2020-02-18, 99200008 2021-11-09 (the others before 2019)
FIRST, SECOND = {"99200002", "99200028"}, {"99200008"}


@pytest.fixture
def ws(tmp_path: Path):
    """The app's workspace (CIViC sample: BRAF V600E, EGFR L858R, ...), BM25 built; users."""
    root = build_app_workspace(tmp_path / "ws")
    add_users(root, cora="curator", bob="curator", ann="annotator", ada="admin")
    with Workspace.open(root) as opened:
        yield opened


def settings(ws: Workspace, server: EutilsServer, **kwargs: object) -> EntrezSettings:
    return EntrezSettings(email="cora@lab.org", base_url=server.base_url,
                          cache_dir=ws.root / "cache" / "entrez", **kwargs)


def run(ws: Workspace, server: EutilsServer, watch_id: int, day: date, **kwargs: object):
    return run_watch(ws, Watches(ws).get(watch_id), settings=settings(ws, server, **kwargs),
                     actor="cora", today=day)


def test_add_list_remove_with_roles_and_audit(ws, monkeypatch):
    with pytest.raises(PermissionDenied, match="Watching a relation needs the curator or admin "
                       "role; ann"):
        add_watch(ws, ANN, "PO", slots=BRAF)
    watch = add_watch(ws, CORA, "PO", slots=BRAF, today=date(2026, 3, 31))
    assert (watch.kind, watch.target, watch.label, watch.owner) == (
        "relation", BRAF_KEY, "BRAF · V600E", "cora")
    assert watch.pubmed_query == build_pubmed_query(ws, "PO", BRAF).text
    assert (watch.mindate, watch.last_run_at, watch.every_days) == ("2026-03-01", None, 1)
    with pytest.raises(CurationError, match="cora already watches BRAF · V600E"):
        add_watch(ws, CORA, "PO", slots=BRAF, query="BRAF")
    edited = add_watch(ws, BOB, "PO", slots=BRAF, query='"BRAF"[tiab]', since="2020-01-01")
    assert (edited.pubmed_query, edited.mindate) == ('"BRAF"[tiab]', "2020-01-01")
    listed = add_watch(ws, ADA, "PO", filters={"evidence_level": "B"})
    assert (listed.kind, listed.label, listed.pubmed_query) == (
        "filter", "PO where evidence_level=B", "")
    with pytest.raises(CurationError, match="Schema PO has no slot or attribute 'colour'"):
        add_watch(ws, CORA, "PO", filters={"colour": "red"})
    with pytest.raises(CurationError, match="No PO relation matches gene=NOPE"):
        add_watch(ws, CORA, "PO", filters={"gene": "NOPE"})
    monkeypatch.setattr(watch_module, "MAX_FILTER_RELATIONS", 3)
    with pytest.raises(CurationError, match="evidence_level=B lists 4 PO relations; a watch "
                       "searches at most 3: narrow the filter"):
        add_watch(ws, CORA, "PO", filters={"evidence_level": "B"})
    with pytest.raises(CurationError, match="The since date 2099-01-01 is in the future"):
        add_watch(ws, CORA, "PO", slots={"gene": "EGFR"}, since="2099-01-01")
    with pytest.raises(CurationError, match="PO has no query slot 'drug'"):
        add_watch(ws, CORA, "PO", slots={"drug": "Imatinib"})
    assert [w.id for w in Watches(ws).watches("PO")] == [watch.id, edited.id, listed.id]
    assert [w.id for w in Watches(ws).watches(owner="bob")] == [edited.id]
    for who in (BOB, ANN):  # another curator, an annotator
        with pytest.raises(PermissionDenied, match=rf"Removing watch #{watch.id} needs the "
                           "admin role or to be the watch's owner \\(cora\\)"):
            remove_watch(ws, who, watch.id)
    remove_watch(ws, CORA, watch.id)
    remove_watch(ws, ADA, edited.id)  # an admin removes anyone's
    with pytest.raises(CurationError, match=f"No watch #{watch.id}; the watches are: "
                       f"{listed.id}"):
        remove_watch(ws, ADA, watch.id)
    assert [w.id for w in Watches(ws).watches()] == [listed.id]
    audit = [(e.actor, e.action, e.object_id) for e in ws.audit_log("watch")]
    assert audit == [("ada", "remove", str(edited.id)), ("cora", "remove", str(watch.id)),
                     ("ada", "add", str(listed.id)), ("bob", "add", str(edited.id)),
                     ("cora", "add", str(watch.id))]


def test_a_run_takes_only_what_appeared_since_the_last_run(ws, eutils_server):
    watch = add_watch(ws, CORA, "PO", slots=BRAF, since="2019-01-01")
    first = run(ws, eutils_server, watch.id, date(2020, 6, 30))
    assert first.ok and (first.mindate, first.maxdate) == ("2019-01-01", "2020-06-30")
    (search,) = eutils_server.requests("esearch.fcgi")
    assert {k: search.params[k] for k in ("mindate", "maxdate", "datetype", "term")} == {
        "mindate": ["2019/01/01"], "maxdate": ["2020/06/30"], "datetype": ["edat"],
        "term": [watch.pubmed_query]}
    assert (first.found, first.fetched, first.imported) == (2, 2, 2)
    assert {p for _, p, _, _ in first.new} == FIRST
    assert set(Documents(ws).titles(FIRST | SECOND)) == FIRST  # the later one not yet
    scores = [s for _, _, s, _ in first.new]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)
    stored = Watches(ws).get(watch.id)
    assert stored.mindate == "2020-06-30" and stored.last_run_at is not None
    second = run(ws, eutils_server, watch.id, date(2022, 1, 1))
    assert eutils_server.requests("esearch.fcgi")[1].params["mindate"] == ["2020/06/30"]
    assert ({p for _, p, _, _ in second.new}, second.imported) == (SECOND, 1)
    eutils_server.log.clear()
    again = run(ws, eutils_server, watch.id, date(2022, 1, 1))  # nothing new since
    assert (again.ok, again.found, again.fetched, again.imported, again.new) == (
        True, 0, 0, 0, ())
    assert eutils_server.requests("efetch.fcgi") == []
    runs = Watches(ws).runs(watch.id)
    assert [(r.status, r.mindate, r.maxdate, r.found, r.imported, r.new_pmids) for r in runs] \
        == [("done", "2022-01-01", "2022-01-01", 0, 0, 0),
            ("done", "2020-06-30", "2022-01-01", 1, 1, 1),
            ("done", "2019-01-01", "2020-06-30", 2, 2, 2)]
    assert runs[2].best_score == max(scores) and runs[0].best_score is None
    assert runs[2].pubmed_query == watch.pubmed_query and runs[2].actor == "cora"
    assert [json.loads(e.after)["new"] for e in ws.audit_log("watch")[:3]] == [0, 1, 2]
    assert new_since(ws, "PO", BRAF_KEY) == {"99200002": "2019-01-01", "99200028": "2019-01-01",
                                             "99200008": "2020-06-30"}


def test_a_failed_run_says_why_and_the_next_catches_up(ws, eutils_server):
    watch = add_watch(ws, CORA, "PO", slots=BRAF, since="2019-01-01")
    eutils_server.faults.append(Fault("error", endpoint="esearch.fcgi",
                                      message="Search Backend failed: timeout"))
    failed = run(ws, eutils_server, watch.id, date(2020, 6, 30))
    assert not failed.ok and "answered with an error: 'Search Backend failed: timeout'" in \
        failed.error and "\n" not in failed.error
    assert failed.message().startswith("watch 1 (BRAF · V600E), 2019-01-01 to 2020-06-30: "
                                       "failed: E-utilities esearch.fcgi")
    stored = Watches(ws).get(watch.id)
    assert (stored.mindate, stored.last_run_at) == ("2019-01-01", None)  # not advanced
    assert is_due(stored, date(2020, 6, 30))
    # the next day the fetch fails half-way (retries spent): still nothing advanced
    eutils_server.faults += [Fault("status", endpoint="efetch.fcgi", code=503)] * 2
    half = run(ws, eutils_server, watch.id, date(2020, 7, 1), max_retries=1, backoff=0.01)
    assert "efetch.fcgi failed after 2 attempts" in half.error and half.found == 2
    assert Documents(ws).titles(FIRST) == {}  # nothing imported half
    runs = Watches(ws).runs(watch.id)
    assert [(r.status, r.mindate, r.found, r.new_pmids) for r in runs] == [
        ("failed", "2019-01-01", 2, 0), ("failed", "2019-01-01", 0, 0)]
    assert runs[1].error == failed.error
    caught_up = run(ws, eutils_server, watch.id, date(2022, 1, 1))
    assert eutils_server.requests("esearch.fcgi")[-1].params["mindate"] == ["2019/01/01"]
    assert caught_up.ok and {p for _, p, _, _ in caught_up.new} == FIRST | SECOND
    assert Watches(ws).get(watch.id).mindate == "2022-01-01"
    assert json.loads(ws.audit_log("watch")[1].after)["error"] == half.error


def test_a_filter_watch_searches_each_relation_it_lists(ws, eutils_server):
    watch = add_watch(ws, CORA, "PO", filters={"evidence_level": "B"}, since="2010-01-01")
    outcome = run(ws, eutils_server, watch.id, date(2022, 1, 1))
    assert outcome.ok and outcome.relations == 4
    assert len(eutils_server.requests("esearch.fcgi")) == 4
    assert {(k, p) for k, p, _, _ in outcome.new} == {(EGFR_KEY, "99200011"),
                                                     (PDGFRA_KEY, "99200024")}
    assert Watches(ws).runs(watch.id)[0].pubmed_query.count("\n") == 3  # one query a line


def test_the_digest_counts_what_nobody_labelled_best_score_first(ws, eutils_server):
    braf = add_watch(ws, CORA, "PO", slots=BRAF, since="2019-01-01")
    egfr = add_watch(ws, BOB, "PO", slots={"gene": "EGFR", "variant": "L858R"},
                     since="2010-01-01")
    idle = add_watch(ws, ADA, "PO", slots={"gene": "ALK", "variant": "EML4-ALK"},
                     since="2021-01-01")
    for watch in (braf, egfr, idle):
        run(ws, eutils_server, watch.id, date(2022, 1, 1))
    rows = watch_digest(ws, "PO")
    assert [(r.watch.id, r.relation, r.headline()) for r in rows] == [
        (egfr.id, "EGFR · L858R", "1 new abstract since 2010-01-01"),
        (braf.id, "BRAF · V600E", "3 new abstracts since 2019-01-01"),
        (idle.id, "ALK · EML4-ALK", "no new abstract since 2022-01-01")]
    assert rows[0].best_score > rows[1].best_score and rows[0].best_pmid == "99200011"
    assert rows[1].in_kb and rows[1].slots == BRAF and not rows[2].failed
    best = rows[1].best_pmid
    Labels(ws).record(user="ann", schema="PO", query_key=BRAF_KEY, query_text="q",
                      doc_id=best, grade="complete")
    braf_row = next(r for r in watch_digest(ws, "PO") if r.watch.id == braf.id)
    assert braf_row.new == 2 and braf_row.best_pmid != best
    assert watch_digest(ws, "disease_gene") == []


def test_the_watch_job_owner_or_admin_one_at_a_time(ws, eutils_server, monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "cora@lab.org")
    watch = add_watch(ws, CORA, "PO", slots=BRAF, since="2019-01-01")
    for who in (ANN, BOB):
        with pytest.raises(PermissionDenied, match=f"Running watch #{watch.id} needs the admin "
                           "role or to be the watch's owner"):
            submit_watch_run(ws, watch.id, user=who)
    job = submit_watch_run(ws, watch.id, user=CORA, start=False)
    assert submit_watch_run(ws, watch.id, user=ADA, start=False).id == job.id  # unique
    assert chosen_watches(ws) == [Watches(ws).get(watch.id)]  # due (never ran)
    done = run_job(ws, job.id)
    assert done.status.value == "done", done.error
    assert done.result["ok"] and {n["pmid"] for n in done.result["new"]} == FIRST | SECOND
    assert Watches(ws).runs(watch.id)[0].actor == "cora"
    assert chosen_watches(ws) == []  # ran today: not due until tomorrow
    # queued by hand for someone else's watch: the job checks its submitter again
    sneaky = submit_job(ws, "watch", {"watch_id": watch.id}, user=BOB, start=False)
    refused = get_job(ws, run_job(ws, sneaky.id).id)
    assert refused.status.value == "failed" and "needs the admin role or to be the watch's " \
        "owner (cora); bob (curator) may not do it" in refused.error
    eutils_server.faults.append(Fault("error", message="Search Backend failed"))
    failing = get_job(ws, run_job(ws, submit_watch_run(ws, watch.id, user=ADA,
                                                       start=False).id).id)
    assert failing.status.value == "failed" and "Search Backend failed" in failing.error
    assert Watches(ws).runs(watch.id)[0].status == "failed"
    for params, message in (({"watch_id": "1"}, "watch_id must be a watch's number"),
                            ({"watch_id": 99}, "No watch #99")):
        with pytest.raises(CurationError, match=message):
            check_watch_params(ws, params)


def test_cli_add_list_run_remove_and_exit_codes(ws, eutils_server, capsys, monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "cora@lab.org")
    root = str(ws.root)
    ws.close()
    assert main(["watch", "add", "-w", root, "--schema", "PO", "gene=BRAF", "variant=V600E",
                 "--owner", "cora", "--since", "2019-01-01", "--json"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert {k: added[k] for k in ("id", "owner", "kind", "query_key", "since", "slots")} == {
        "id": 1, "owner": "cora", "kind": "relation", "query_key": BRAF_KEY,
        "since": "2019-01-01", "slots": BRAF}
    assert main(["watch", "add", "-w", root, "gene=EGFR", "--owner", "ann"]) == 2
    assert "needs the curator or admin role; ann (annotator)" in capsys.readouterr().err
    assert main(["watch", "add", "-w", root, "gene=EGFR", "--where", "gene=EGFR"]) == 2
    assert "not both and not neither" in capsys.readouterr().err
    assert main(["watch", "run", "-w", root, "-q", "--json"]) == 0
    (ran,) = json.loads(capsys.readouterr().out)
    assert ran["ok"] and {n["pmid"] for n in ran["new"]} == FIRST | SECOND
    assert main(["watch", "run", "-w", root, "-q"]) == 0  # nothing due: ran today
    assert capsys.readouterr().out == ""
    eutils_server.faults.append(Fault("error", message="Search Backend failed"))
    assert main(["watch", "run", "-w", root, "--all", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: watch 1 (BRAF · V600E), ") and err.count("\n") == 1
    assert "failed: E-utilities esearch.fcgi: E-utilities answered with an error: 'Search " \
           "Backend failed'" in err
    assert main(["watch", "list", "-w", root]) == 0
    line = capsys.readouterr().out
    assert "BRAF · V600E  (owner cora;" in line and "FAILED: E-utilities esearch.fcgi" in line
    assert main(["watch", "list", "-w", root, "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["last_run"]["status"] == "failed" and listed["last_run"]["new"] == 0
    assert main(["watch", "run", "-w", root, "1", "-q"]) == 0  # catches up, nothing new
    assert main(["watch", "run", "-w", root, "7", "-q"]) == 2
    assert "No watch #7; the watches are: 1" in capsys.readouterr().err
    assert main(["watch", "run", "-w", root, "one"]) == 2
    assert "Watch ids are numbers (kbcurate watch list), not 'one'" in capsys.readouterr().err
    assert main(["watch", "remove", "-w", root, "1", "7"]) == 2  # 7 is no watch: none removed
    capsys.readouterr()
    assert main(["watch", "remove", "-w", root, "1"]) == 0
    assert capsys.readouterr().out == "removed watch 1: BRAF · V600E\n"
    assert main(["watch", "list", "-w", root]) == 0
    assert capsys.readouterr().out == "no watch (kbcurate watch add)\n"


def test_a_watch_removed_during_its_run_ends_cleanly_and_the_others_run(ws, eutils_server,
                                                                      caplog):
    """Issue 42 item 4: `kbcurate watch run --all`, then `kbcurate watch remove 1` while watch 1
    ran, gave "FOREIGN KEY constraint failed ... This is a bug" and watches 2-4 never ran.
    The removal comes between the search and the record (from another connection)."""
    braf = add_watch(ws, CORA, "PO", slots=BRAF, since="2019-01-01")
    egfr = add_watch(ws, BOB, "PO", slots={"gene": "EGFR", "variant": "L858R"},
                     since="2010-01-01")

    def remove_braf(watch, fraction: float, message: str) -> None:
        if watch.id == braf.id and message.endswith("; ranking"):
            with Workspace.open(ws.root) as other:  # kbcurate watch remove, in another process
                remove_watch(other, ADA, braf.id)

    with caplog.at_level("WARNING", logger="curation.pubmed.watch_run"):
        removed, ran = run_watches(ws, [braf, egfr], settings=settings(ws, eutils_server),
                                   actor="cli", today=date(2022, 1, 1), progress=remove_braf)
    assert (removed.removed, removed.ok, removed.run_id, removed.new) == (True, True, 0, ())
    assert removed.message() == ("watch 1 (BRAF · V600E), 2019-01-01 to 2022-01-01: removed "
                                 "during its run; its results were not recorded")
    assert removed.to_json()["removed"] is True
    assert "watch 1 was removed during its run; its results were not recorded" in \
        caplog.messages
    assert Watches(ws).get(braf.id) is None and Watches(ws).runs(braf.id) == []
    assert set(Documents(ws).titles(FIRST | SECOND)) == FIRST | SECOND  # imported stays
    assert ran.ok and not ran.removed and {p for _, p, _, _ in ran.new} == {"99200011"}
    assert [r.status for r in Watches(ws).runs(egfr.id)] == ["done"]
    assert [e.action for e in ws.audit_log("watch")][:2] == ["run", "remove"]  # egfr's run
    caplog.clear()
    with caplog.at_level("WARNING", logger="curation.pubmed.watch_run"):
        assert run_watches(ws, [braf, egfr], settings=settings(ws, eutils_server),
                           actor="cli", today=date(2022, 1, 2))[0].watch.id == egfr.id
    assert "watch 1 was removed before its turn; skipped" in caplog.messages


def test_a_watch_left_to_its_job_says_who_runs_it(ws, eutils_server, caplog, monkeypatch):
    """Issue 42 item 3: a cron run that finds a watch's job unfinished says since when it runs,
    who started it and how far it got."""
    monkeypatch.setenv("NCBI_EMAIL", "cora@lab.org")
    watch = add_watch(ws, CORA, "PO", slots=BRAF, since="2019-01-01")
    job = submit_watch_run(ws, watch.id, user=CORA, start=False)
    with caplog.at_level("WARNING", logger="curation.pubmed.watch_run"):
        assert run_watches(ws, [watch], settings=settings(ws, eutils_server), actor="cli") == []
    hhmm = job.created_at[11:16]
    assert caplog.messages == [f"watch {watch.id} left to job {job.id}, already queued since "
                               f"{hhmm} UTC (started by cora, waiting for a worker)"]
    assert eutils_server.requests("esearch.fcgi") == []


def test_cli_run_all_goes_on_after_a_removed_watch_and_after_a_bug(ws, eutils_server, capsys,
                                                                    monkeypatch):
    monkeypatch.setenv("NCBI_EMAIL", "cora@lab.org")
    for slots in (BRAF, {"gene": "EGFR", "variant": "L858R"}, {"gene": "PDGFRA"}):
        add_watch(ws, CORA, "PO", slots=slots, since="2010-01-01")
    root = str(ws.root)
    ws.close()
    ranked = watch_run.rank_new

    def remove_first_then_rank(opened, schema, fresh):
        if any(target.partial.query_key == BRAF_KEY for target, _ in fresh):
            assert main(["watch", "remove", "-w", root, "1"]) == 0  # 8 s into the run
        return ranked(opened, schema, fresh)

    monkeypatch.setattr(watch_run, "rank_new", remove_first_then_rank)
    assert main(["watch", "run", "-w", root, "--all"]) == 0
    out = capsys.readouterr().out
    assert "removed watch 1: BRAF · V600E\n3 watches run\n" in out
    assert "watch 1 (BRAF · V600E), 2010-01-01 to " in out and ": removed during its run; its " \
        "results were not recorded\n" in out
    with Workspace.open(root) as opened:
        assert [w.id for w in Watches(opened).watches()] == [2, 3]
        assert [Watches(opened).runs(i)[0].status for i in (2, 3)] == ["done", "done"]
    real_run = watch_run.run_watch

    def bug_in_watch_2(opened, watch, **kwargs):
        if watch.id == 2:
            raise KeyError("query_key")
        return real_run(opened, watch, **kwargs)

    monkeypatch.setattr(watch_run, "run_watch", bug_in_watch_2)
    assert main(["watch", "run", "-w", root, "--all", "-q"]) == 1
    err = capsys.readouterr().err
    assert "error: watch 2 (EGFR · L858R), " in err and ": failed: KeyError: 'query_key'" in err
    with Workspace.open(root) as opened:
        assert len(Watches(opened).runs(3)) == 2  # watch 3 ran after watch 2's bug


def test_cards_of_new_abstracts_say_new_since_escaped():
    doc = RankedDoc("99200002", "T", "A", 2019, "", 1.0, 1, False, (), "bm25")
    (marked,) = with_new_since([doc], {"99200002": "2019-01-01"})
    assert '<span class="kb-badge kb-new">NEW since 2019-01-01</span>' in card_html(marked, "")
    assert "NEW since" not in card_html(doc, "")
    hostile = RankedDoc("1", "T", "A", None, "", 1.0, 1, False, (), "bm25",
                        new_since="<img src=x onerror=alert(1)>")
    shown = card_html(hostile, "")
    assert "NEW since &lt;img src=x</span>" in shown and "<img" not in shown
