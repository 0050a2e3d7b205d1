"""Domain services behind the app pages: search, progress, indexes, sign-in, reporting."""

from __future__ import annotations

import pytest
from app_helpers import INPUTS, build_app_workspace

from curation.access.signin import (
    AuthMode,
    Session,
    auth_modes,
    local_user,
    password_sign_in,
    resolve_user,
    user_for_email,
    users_store,
)
from curation.access.users import PermissionDenied, Role, User
from curation.evaluation.reporting import (
    evaluation_choices,
    label_history,
    labels_frame,
    metrics_frame,
    per_query_frame,
    start_evaluation,
)
from curation.jobs.queue import JobStatus, list_jobs, submit_job
from curation.matching.highlight import render_highlighted
from curation.matching.matcher import EntityMatcher
from curation.search.choices import ensure_index_job
from curation.search.indexing import get_index, index_ready
from curation.search.session import (
    RankedDoc,
    card_html,
    evidence_levels,
    label_progress,
    queue_order,
    relation_filters,
    relation_label,
    run_search,
    search_relations,
    typed_partial,
)
from curation.store.importer import import_file
from curation.store.labels import Grade, Labels
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

ADMIN, CURATOR = User("root", Role.ADMIN), User("cur", Role.CURATOR)


@pytest.fixture
def ws(tmp_path):
    with Workspace.open(build_app_workspace(tmp_path / "ws")) as w:
        yield w


def braf(ws):
    schema = ws.schemas()["PO"]
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    return schema, partial


def test_run_search_fills_every_field_of_a_ranked_doc(ws):
    schema, partial = braf(ws)
    result = run_search(ws, get_index(ws, "bm25", progress=False), schema, partial,
                        partial.render(schema).text, 5, matcher=EntityMatcher())
    by_id = {d.doc_id: d for d in result.docs}
    assert result.model_version == "bm25" and len(result.docs) <= 5
    assert [d.rank for d in result.docs] == list(range(1, len(result.docs) + 1))
    cited = by_id["25265492"]
    assert cited.cited_by_kb and cited.year == 2014 and cited.journal == "Test Journal of Oncology"
    assert cited.pubmed_url == "https://pubmed.ncbi.nlm.nih.gov/25265492/"
    assert not by_id["90100001"].cited_by_kb and cited.model_version == "bm25"
    spans = {(s.slot, s.text) for s in cited.spans}
    assert {("gene", "BRAF"), ("variant", "V600E"), ("treatment", "dabrafenib"),
            ("treatment", "trametinib")} <= spans
    assert all(cited.text[s.start:s.end] == s.text for s in cited.spans)
    # a candidate found only in the abstracts is highlighted in the answer slot too
    assert ("treatment", "Imatinib") in {(s.slot, s.text) for s in by_id["90100001"].spans}


def test_run_search_finds_evidence_sentences(ws):
    schema, partial = braf(ws)
    result = run_search(ws, get_index(ws, "bm25", progress=False), schema, partial,
                        partial.render(schema).text, 5, matcher=EntityMatcher())
    by_id = {d.doc_id: d for d in result.docs}
    cited = by_id["25265492"]
    assert [cited.text[e.start:e.end] for e in cited.evidence] == [
        "Combined dabrafenib and trametinib in BRAF V600E melanoma (hand-made test abstract).",
        "Patients with BRAF V600E mutant melanoma received dabrafenib plus trametinib."]
    assert cited.evidence[0].query_slots == ("gene", "variant")
    assert set(cited.evidence[0].answers) == {"drug:dabrafenib", "drug:trametinib"}
    # the hostile abstract: its evidence renders escaped under the card
    hostile = by_id["90100002"]
    assert [e.co_occurs for e in hostile.evidence] == [True, True]
    card = card_html(hostile, render_highlighted(hostile.title, hostile.abstract, hostile.spans))
    evidence = card[card.index('<div class="kb-evidence">'):]
    assert "&lt;img src=x onerror=alert(1)&gt;" in evidence and "<img" not in card
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in evidence and "<script>" not in card
    assert 'data-slot="treatment"' in evidence and ">trametinib</mark>" in evidence


def test_rerank_labels_the_model_version(ws):
    schema, partial = braf(ws)
    result = run_search(ws, get_index(ws, "bm25", progress=False), schema, partial,
                        "melanoma response", 3, matcher=EntityMatcher(), rerank=True)
    assert result.model_version == "bm25+rerank"
    assert {d.model_version for d in result.docs} == {"bm25+rerank"}
    assert result.docs[0].doc_id in {"25265492", "90100001", "90100002", "99000001"}


def test_empty_query_is_a_readable_error(ws):
    schema, partial = braf(ws)
    with pytest.raises(CurationError, match="query is empty"):
        run_search(ws, get_index(ws, "bm25", progress=False), schema, partial, "  ", 5,
                   matcher=EntityMatcher())


def test_typed_entities_find_the_kb_relation_or_make_a_new_one(ws):
    schema = ws.schemas()["PO"]
    known = typed_partial(ws, schema, {"gene": "braf", "variant": "V600E"})
    assert known.query_key == "gene=gene:673|variant=variant:v600e"
    assert known.pmids == ("25265492",) and known.answer_texts() == ["Dabrafenib + Trametinib"]
    new = typed_partial(ws, schema, {"gene": "KRAS", "variant": ""})
    assert new.query_key == "gene=gene:kras|variant=" and new.pmids == () and new.answers == ()
    with pytest.raises(CurationError, match="Type at least one of gene, variant"):
        typed_partial(ws, schema, {"gene": " "})


def test_relation_browsing_helpers(ws):
    schema = ws.schemas()["PO"]
    assert evidence_levels(ws, "PO") == ["A", "B", "D"]
    filters = relation_filters(schema, {"gene": " ", "treatment": "imatinib"}, "B")
    assert filters == {"treatment": "imatinib", "evidence_level": "B"}
    rows = Relations(ws).partial("PO", filters)
    assert {p.query["gene"][0].text for p in rows} == {"ABL1", "PDGFRA"}
    everything = Relations(ws).partial("PO")
    assert [p.query["gene"][0].text for p in search_relations(everything, "melanoma")] == ["BRAF"]
    assert search_relations(everything, "") == everything
    assert [p.query["gene"][0].text for p in search_relations(everything, "braf  V600E")] == [
        "BRAF"]
    assert search_relations(everything, "braf L858R") == []
    _, partial = braf(ws)
    assert relation_label(partial, schema) == "BRAF · V600E → ? (1 known treatment, 1 PMIDs)"


def test_label_progress_puts_the_next_unlabelled_first(ws):
    schema, partial = braf(ws)
    docs = run_search(ws, get_index(ws, "bm25", progress=False), schema, partial,
                      partial.render(schema).text, 4, matcher=EntityMatcher()).docs
    first = docs[0].doc_id
    grades = {first: Grade.COMPLETE}
    progress = label_progress(docs, grades)
    assert (progress.labelled, progress.total, progress.next_doc) == (1, 4, docs[1].doc_id)
    assert [d.doc_id for d in queue_order(docs, grades)] == [d.doc_id for d in docs[1:]] + [first]
    assert queue_order(docs, grades, unlabelled_first=False) == list(docs)
    done = label_progress(docs, dict.fromkeys((d.doc_id for d in docs), Grade.SKIP))
    assert done.next_doc is None and done.labelled == 4


def test_index_ready_follows_the_corpus(tmp_path, fixtures_dir):
    with Workspace.open(build_app_workspace(tmp_path / "ws", bm25=False)) as w:
        assert not index_ready(w, "bm25")
        get_index(w, "bm25", progress=False)
        assert index_ready(w, "bm25") and not index_ready(w, "dense")
        import_file(w, "docs", "pubmed-xml", fixtures_dir / "pubmed_sample.xml", progress=False)
        assert not index_ready(w, "bm25")


def test_ensure_index_job_reuses_a_running_build(ws):
    queued = submit_job(ws, "index", {"retriever": "dense"}, user=CURATOR, start=False)
    assert ensure_index_job(ws, "dense", user=CURATOR).id == queued.id
    assert len(list_jobs(ws, "index")) == 1


def test_card_html_escapes_text_and_links_only_pmids():
    doc = RankedDoc("NCT0<1>", "", "", 2020, "J <i>x</i> [y](javascript:z)", 1.5, 3, True, (),
                    "bm25")
    out = card_html(doc, "<div>first\n\n[x](javascript:alert(1))</div>", "partial")
    assert "href" not in out and "NCT0&lt;1&gt;" in out and "<b>#3</b>" in out
    assert "J &lt;i&gt;x&lt;/i&gt; [y](javascript:z)" in out and "labelled <b>partial</b>" in out
    assert '<span class="kb-badge">cited by KB</span>' in out
    assert "\n" not in out  # one HTML block: markdown never resumes inside the card
    pubmed = RankedDoc("123", "", "", None, "", 1.0, 1, False, (), "bm25")
    assert '<a href="https://pubmed.ncbi.nlm.nih.gov/123/" target="_blank" rel="noopener ' \
           'noreferrer">PMID 123</a>' in card_html(pubmed, "")
    assert "kb-badge" not in card_html(pubmed, "") and "labelled" not in card_html(pubmed, "")


def test_sign_in_modes_and_roles_from_the_users_file(tmp_path, monkeypatch):
    store = users_store(tmp_path)
    monkeypatch.setenv("USER", "maria")
    assert auth_modes(store, False) == [AuthMode.LOCAL]
    assert local_user() == User("maria", Role.ADMIN)
    assert resolve_user(store, Session("maria", AuthMode.LOCAL)) == User("maria", Role.ADMIN)
    store.add("alice", "correct-horse", "curator")
    store.add("boss", "correct-horse", "admin", email="boss@lab.org")
    assert auth_modes(store, True) == [AuthMode.USERS, AuthMode.OIDC]
    # local mode ends as soon as the workspace has users
    assert resolve_user(store, Session("maria", AuthMode.LOCAL)) is None
    assert password_sign_in(store, "alice", "wrong-password") is None
    session = password_sign_in(store, "alice", "correct-horse")
    assert resolve_user(store, session) == User("alice", Role.CURATOR)
    # the role comes from the file, never from the session
    assert resolve_user(store, Session("alice", AuthMode.USERS)).role is Role.CURATOR
    assert resolve_user(store, Session("ghost", AuthMode.USERS)) is None
    assert resolve_user(store, Session("a@b.org", AuthMode.OIDC)) is None  # OIDC not configured
    assert user_for_email(store, "boss@lab.org") == User("boss@lab.org", Role.ADMIN)
    assert user_for_email(store, "new@lab.org") == User("new@lab.org", Role.CURATOR)
    assert user_for_email(store, "boss@elsewhere.org").role is Role.CURATOR  # full address only
    assert resolve_user(store, {"name": "boss"}) is None


def test_start_evaluation_checks_role_and_input(ws):
    assert "PO" in Relations(ws).evaluable_schemas() and "bm25+rerank" in evaluation_choices()
    with pytest.raises(PermissionDenied, match="needs the admin role"):
        start_evaluation(ws, CURATOR, "PO", ["bm25"], "all")
    with pytest.raises(CurationError, match="Choose at least one retriever"):
        start_evaluation(ws, ADMIN, "PO", [], "all")
    with pytest.raises(CurationError, match="Unknown retriever 'bm26'. Available options"):
        start_evaluation(ws, ADMIN, "PO", ["bm26"], "all")
    with pytest.raises(CurationError, match="Unknown split 'tset'"):
        start_evaluation(ws, ADMIN, "PO", ["bm25"], "tset")
    assert list_jobs(ws) == []


def test_an_evaluation_that_cannot_work_is_refused_before_it_starts(tmp_workspace):
    """One query entity: the seeded split puts it in one split; the others are refused."""
    from curation.evaluation.harness import build_task
    from curation.store.importer import import_items
    from kb_sources.types import Document, Entity, Relation

    ws = tmp_workspace
    import_items(ws, [Document("11", "BRAF in melanoma", "BRAF mutations cause melanoma."),
                      Relation("disease_gene", "handmade", "r1",
                               {"disease": (Entity("melanoma", "disease"),),
                                "gene": (Entity("BRAF", "gene"),)}, ("11",))],
                 reader="test", path="handmade", progress=False)
    task = build_task(ws, "disease_gene")
    (home,) = [name for name in ("train", "dev", "test") if task.split(name)]
    empty = next(name for name in ("test", "dev", "train") if name != home)
    with pytest.raises(CurationError, match=rf"The {empty} split of disease_gene has no query.*"
                                            rf"Choose another split in the Split menu: "
                                            rf".*{home} \(1\).*all \(1\)"):
        start_evaluation(ws, ADMIN, "disease_gene", ["bm25"], empty)
    with pytest.raises(CurationError, match="No PO relation cites a document"):
        start_evaluation(ws, ADMIN, "PO", ["bm25"], "all")
    with pytest.raises(PermissionDenied):  # the role is checked first
        start_evaluation(ws, CURATOR, "disease_gene", ["bm25"], empty)
    assert list_jobs(ws) == []
    assert start_evaluation(ws, ADMIN, "disease_gene", ["bm25"], home).kind == "evaluate"


def test_report_frames():
    report = {"retrievers": {"bm25": {"ndcg@10": 0.5, "entity_recall@10": float("nan"),
                                      "queries": 2}},
              "per_query": {"bm25": {"q1": {"ndcg@10": 1.0}, "q2": {"ndcg@10": 0.0}}}}
    means = metrics_frame(report)
    assert means.to_dict("records") == [{"retriever": "bm25", "metric": "ndcg@10", "value": 0.5}]
    per_query = per_query_frame(report, "ndcg@10")
    assert per_query["ndcg@10"].tolist() == [1.0, 0.0] and list(per_query["query"]) == ["q1", "q2"]
    assert metrics_frame({}).empty


def test_label_history_is_the_relabel_trail(ws):
    first = Labels(ws).record(user="cur", schema="PO", query_key="q", query_text="t", doc_id="1",
                              grade="partial")
    second = Labels(ws).record(user="cur", schema="PO", query_key="q", query_text="t",
                               doc_id="1", grade="complete", note="names the drug")
    history = label_history(ws, second)
    assert [lab.id for lab in history] == [second.id, first.id]
    assert history[1].superseded_by == second.id
    frame = labels_frame(history)
    assert list(frame["grade"]) == ["complete", "partial"] and frame["note"][0] == "names the drug"


def test_fixture_inputs_exist(fixtures_dir):
    assert all((fixtures_dir / name).is_file() for _, _, name, _ in INPUTS)
    assert JobStatus.DONE.value == "done"
