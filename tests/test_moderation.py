"""Moderation of source suggestions (issue 14): new -> accepted / rejected, by a curator or admin,
with a reason, audited; accepted answers count as known."""

from __future__ import annotations

import pytest
from app_helpers import build_app_workspace

from curation.access.users import PermissionDenied, Role, User
from curation.search.candidates import kb_answer_entities
from curation.search.suggestions import (
    SuggestionStatus,
    accepted_answers,
    add_suggestion,
    list_suggestions,
    moderate_suggestion,
)
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError
from kb_sources.types import Entity

CUR, EVE = User("cur", Role.CURATOR), User("eve", Role.CURATOR)
ANN, ADMIN = User("ann", Role.ANNOTATOR), User("boss", Role.ADMIN)


@pytest.fixture
def ws(tmp_path):
    with Workspace.open(build_app_workspace(tmp_path / "ws", bm25=False)) as w:
        yield w


def suggest(ws, user=CUR, answer="Imatinib", answer_key="drug:imatinib", gene="BRAF",
            pmid="90100001"):
    (partial,) = Relations(ws).partial("PO", {"gene": gene})
    return add_suggestion(ws, user=user, schema=ws.schemas()["PO"], partial=partial, pmid=pmid,
                          answer=answer, answer_key=answer_key, comment="seen in the abstract")


def test_a_saved_suggestion_is_new(ws):
    row = suggest(ws)
    assert (row.status, row.reviewed_by, row.reviewed_at, row.review_reason) == (
        SuggestionStatus.NEW, "", None, "")


def test_another_curator_accepts_with_a_reason_audited(ws):
    row = suggest(ws)
    done = moderate_suggestion(ws, row.id, "accepted", "  names the response ", user=EVE)
    assert (done.status, done.reviewed_by, done.review_reason) == (
        SuggestionStatus.ACCEPTED, "eve", "names the response")
    assert done.reviewed_at and done.reviewed_at >= row.created_at
    audit = ws.audit_log("source_suggestion")[0]
    assert (audit.action, audit.actor, audit.object_id) == ("accept", "eve", str(row.id))
    assert audit.before_value() == {"status": "new", "reviewed_by": "",
                                           "review_reason": ""}
    assert audit.after_value() == {"status": "accepted",
                                          "review_reason": "names the response"}


def test_accept_without_a_reason_is_allowed_reject_needs_one(ws):
    a, b = suggest(ws), suggest(ws, answer="Nilotinib", answer_key="drug:nilotinib")
    assert moderate_suggestion(ws, a.id, SuggestionStatus.ACCEPTED, "", user=EVE).status == \
        SuggestionStatus.ACCEPTED
    with pytest.raises(CurationError, match=f"Rejecting suggestion {b.id} needs a reason; its "
                                            "confirmer cur reads it"):
        moderate_suggestion(ws, b.id, "rejected", "  ", user=EVE)
    rejected = moderate_suggestion(ws, b.id, "rejected", "no patient data", user=EVE)
    assert (rejected.status, rejected.review_reason) == (SuggestionStatus.REJECTED,
                                                         "no patient data")


def test_overturning_a_decision_needs_a_reason_and_is_audited(ws):
    row = suggest(ws)
    moderate_suggestion(ws, row.id, "rejected", "wrong variant", user=EVE)
    with pytest.raises(CurationError, match="was rejected by eve; overturning that decision "
                                            "needs a reason"):
        moderate_suggestion(ws, row.id, "accepted", "", user=ADMIN)
    with pytest.raises(CurationError, match=f"Suggestion {row.id} is already rejected"):
        moderate_suggestion(ws, row.id, "rejected", "again", user=ADMIN)
    done = moderate_suggestion(ws, row.id, "accepted", "V600E is in the methods", user=ADMIN)
    assert (done.status, done.reviewed_by) == (SuggestionStatus.ACCEPTED, "boss")
    actions = [(a.action, a.before_value()["status"], a.after_value()["status"])
               for a in ws.audit_log("source_suggestion")[:2]]
    assert actions == [("accept", "rejected", "accepted"), ("reject", "new", "rejected")]


@pytest.mark.parametrize(("user", "message"), [
    (ANN, r"Moderating a source suggestion needs the curator or admin role; ann \(annotator\) "
          "may not do it"),
    (None, "an anonymous user may not do it"),
    (CUR, "cur confirmed suggestion 1, so another curator or an admin accepts it"),
])
def test_who_may_not_accept(ws, user, message):
    row = suggest(ws)
    assert row.id == 1
    with pytest.raises(PermissionDenied, match=message):
        moderate_suggestion(ws, row.id, "accepted", "fine", user=user)
    assert list_suggestions(ws)[0].status is SuggestionStatus.NEW
    assert [a.action for a in ws.audit_log("source_suggestion")] == ["suggest"]


def test_a_curator_may_reject_their_own_and_an_admin_accept_their_own(ws):
    mine = suggest(ws)
    assert moderate_suggestion(ws, mine.id, "rejected", "withdrawn: duplicate",
                               user=CUR).status is SuggestionStatus.REJECTED
    boss = suggest(ws, user=ADMIN, answer="Nilotinib", answer_key="drug:nilotinib")
    assert moderate_suggestion(ws, boss.id, "accepted", "", user=ADMIN).status is \
        SuggestionStatus.ACCEPTED


@pytest.mark.parametrize(("ident", "status", "message"), [
    (999, "accepted", "No source suggestion with id 999"),
    (1, "maybe", "Unknown suggestion status 'maybe'. Available options: new, accepted, "
                 "rejected"),
    (1, "new", "to accepted or rejected; 'new' is where it starts"),
])
def test_bad_moderation_is_refused(ws, ident, status, message):
    suggest(ws)
    with pytest.raises(CurationError, match=message):
        moderate_suggestion(ws, ident, status, "reason", user=EVE)


def test_list_filters_by_status(ws):
    a, b = suggest(ws), suggest(ws, answer="Nilotinib", answer_key="drug:nilotinib")
    c = suggest(ws, answer="Erlotinib", answer_key="drug:erlotinib")
    moderate_suggestion(ws, a.id, "accepted", "ok", user=EVE)
    moderate_suggestion(ws, b.id, "rejected", "no", user=EVE)
    assert [s.id for s in list_suggestions(ws, status="new")] == [c.id]
    assert [s.id for s in list_suggestions(ws, status=SuggestionStatus.ACCEPTED)] == [a.id]
    assert [s.id for s in list_suggestions(ws, status="REJECTED")] == [b.id]
    assert [s.id for s in list_suggestions(ws)] == [c.id, b.id, a.id]
    with pytest.raises(CurationError, match="Unknown suggestion status 'done'"):
        list_suggestions(ws, status="done")


def test_accepted_answers_are_entities_of_the_relation(ws):
    po = ws.schemas()["PO"]
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    imatinib = suggest(ws)
    vem = suggest(ws, answer="vemurafenib", answer_key="chemical:vemurafenib")
    mesh = suggest(ws, answer="Vemurafenib", answer_key="chemical:D000077484", pmid="99000001")
    typed = suggest(ws, answer="Sorafenib", answer_key="", pmid="99000001")
    rejected = suggest(ws, answer="Nilotinib", answer_key="drug:nilotinib")
    for row in (imatinib, vem, mesh, typed):
        moderate_suggestion(ws, row.id, "accepted", "", user=EVE)
    moderate_suggestion(ws, rejected.id, "rejected", "no", user=EVE)
    suggest(ws, answer="Erlotinib", answer_key="drug:erlotinib")  # still new
    kb = {e.key: e for e in kb_answer_entities(ws, po)}
    assert accepted_answers(ws, po, partial.query_key) == [
        kb["drug:imatinib"],  # the KB's entity, with its synonyms
        Entity("vemurafenib", "chemical", ""), Entity("Vemurafenib", "chemical", "D000077484"),
        Entity("Sorafenib", "drug", "")]
    assert accepted_answers(ws, "po", partial.query_key) == accepted_answers(
        ws, po, partial.query_key)
    assert accepted_answers(ws, po, "gene=gene:1956|variant=variant:l858r") == []


def test_an_accepted_answer_is_known_in_search_and_highlighted(ws):
    from curation.matching.matcher import EntityMatcher
    from curation.search.indexing import get_index
    from curation.search.session import run_search

    schema = ws.schemas()["PO"]
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    retriever = get_index(ws, "bm25", progress=False)

    def imatinib():
        result = run_search(ws, retriever, schema, partial, "BRAF V600E imatinib", 10,
                            matcher=EntityMatcher())
        found = {c.text: c for c in result.candidates}
        marked = [s for d in result.docs if d.doc_id == "90100001" for s in d.spans
                  if s.slot == "treatment" and s.text.lower() == "imatinib"]
        return found["Imatinib"], marked

    before, marked = imatinib()
    assert before.new and marked  # a candidate found in the abstract, NEW to this relation
    row = suggest(ws)
    assert imatinib()[0].new  # saved, not accepted: still new
    moderate_suggestion(ws, row.id, "accepted", "names the response", user=EVE)
    after, marked = imatinib()
    assert not after.new and marked  # known now, and still highlighted as an answer
