"""Answer-slot candidates from the top abstracts and confirmed source suggestions."""

from __future__ import annotations

import csv
import io

import pytest
from app_helpers import build_app_workspace

from curation.access.users import Role, User
from curation.matching.matcher import EntityMatcher
from curation.search.candidates import answer_candidates, kb_answer_entities
from curation.search.suggestions import (
    add_suggestion,
    list_suggestions,
    remove_suggestion,
    suggestion_rows,
    suggestions_csv,
)
from curation.store.documents import Documents
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

CURATOR, ADMIN = User("cur", Role.CURATOR), User("boss", Role.ADMIN)


@pytest.fixture
def ws(tmp_path):
    with Workspace.open(build_app_workspace(tmp_path / "ws", bm25=False)) as w:
        yield w


def docs_of(ws, ids):
    rows = Documents(ws).rows_by_id(ids)
    return [(i, rows[i].text) for i in ids]


def partial_for(ws, schema, **filters):
    (partial,) = Relations(ws).partial(schema, filters)
    return ws.schemas()[schema], partial


def test_kb_answer_entities_are_the_schemas_answers(ws):
    po = ws.schemas()["PO"]
    names = {e.text for e in kb_answer_entities(ws, po)}
    assert names == {"Imatinib", "Dabrafenib", "Trametinib", "Gefitinib", "Erlotinib",
                     "Nilotinib", "Crizotinib", "2,4-pyrimidinediamine", "Selpercatinib"}
    catalysts = {e.text for e in kb_answer_entities(ws, ws.schemas()["PTM"])}
    assert {"MTOR", "PDPK1"} <= catalysts and "AKT1" not in catalysts


def test_candidates_count_support_and_flag_new_answers(ws):
    schema, partial = partial_for(ws, "PO", gene="BRAF")
    docs = docs_of(ws, ["25265492", "90100001", "90100002", "99000001"])
    found = {c.text: c for c in answer_candidates(ws, schema, partial, docs, EntityMatcher())}
    assert found["Trametinib"].pmids == ("25265492", "90100002")
    assert not found["Trametinib"].new and not found["Dabrafenib"].new  # the KB has them
    assert found["Imatinib"].new and found["Imatinib"].pmids == ("90100001",)
    assert found["Imatinib"].sources == ("kb",)
    # vemurafenib is only a BioRED chemical in this sample (no drug of the workspace): no
    # treatment candidate (issue 14 bug 8); once a drug list names it, it is one, counted in
    # every abstract naming it (tests/test_candidate_types.py)
    assert "vemurafenib" not in found
    # most supported first; among equals the new ones first
    assert list(found) == ["Trametinib", "Imatinib", "Dabrafenib"]
    assert "BRAF" not in found and "melanoma" not in found


def test_ptm_candidates_are_catalysts_not_the_substrate(ws):
    schema = ws.schemas()["PTM"]
    partial = next(p for p in Relations(ws).partial("PTM", {"substrate": "AKT1"})
                   if p.query["residue"][0].text == "S473")
    found = {c.text: c for c in answer_candidates(ws, schema, partial,
                                                  docs_of(ws, ["90100004"]), EntityMatcher())}
    assert "AKT1" not in found
    assert found["MTOR"].pmids == ("90100004",) and not found["MTOR"].new
    assert found["PDPK1"].new  # a KB catalyst, but of T308, not of this relation


def test_add_list_export_and_remove_a_suggestion(ws):
    schema, partial = partial_for(ws, "PO", gene="BRAF")
    row = add_suggestion(ws, user=CURATOR, schema=schema, partial=partial, pmid="90100001",
                         answer="Imatinib", answer_key="drug:imatinib",
                         comment="one patient, no response")
    assert (row.pmid, row.confirmed_by, row.slots) == ("90100001", "cur",
                                                       {"gene": "BRAF", "variant": "V600E"})
    assert list_suggestions(ws, query_key=partial.query_key) == [row]
    assert ws.audit_log("source_suggestion")[0].actor == "cur"
    with pytest.raises(CurationError, match="already suggested"):
        add_suggestion(ws, user=CURATOR, schema=schema, partial=partial, pmid="90100001",
                       answer="Imatinib", answer_key="drug:imatinib", comment="again")
    (exported,) = list(csv.DictReader(io.StringIO(suggestions_csv([row], ws.schemas()))))
    assert exported == {"pmid": "90100001", "gene": "BRAF", "variant": "V600E",
                        "therapy": "Imatinib", "comment": "one patient, no response",
                        "confirmed_by": "cur", "created_at": row.created_at, "schema": "PO",
                        "status": "new", "reviewed_by": "", "reviewed_at": "",
                        "review_reason": ""}
    with pytest.raises(CurationError, match="Only cur or an admin"):
        remove_suggestion(ws, row.id, user=User("other", Role.CURATOR))
    remove_suggestion(ws, row.id, user=ADMIN)
    assert list_suggestions(ws) == []


@pytest.mark.parametrize(("changes", "message"), [
    ({"pmid": "NCT0001"}, "not a PubMed id"),
    ({"comment": "  "}, "needs a comment"),
    ({"answer": ""}, "Name the treatment"),
    ({"user": None}, "sign in first"),
])
def test_bad_suggestions_are_refused(ws, changes, message):
    schema, partial = partial_for(ws, "PO", gene="BRAF")
    args = {"user": CURATOR, "pmid": "90100001", "answer": "Imatinib", "comment": "ok"}
    args.update(changes)
    with pytest.raises(CurationError, match=message):
        add_suggestion(ws, schema=schema, partial=partial, **args)
    assert list_suggestions(ws) == []


def test_rows_of_other_schemas_use_their_slot_names(ws):
    schema = ws.schemas()["PTM"]
    partial = Relations(ws).partial("PTM", {"substrate": "AKT1"})[0]
    row = add_suggestion(ws, user=CURATOR, schema=schema, partial=partial, pmid="90100004",
                         answer="MTOR", comment="mTORC2 phosphorylates S473")
    (out,) = suggestion_rows([row], ws.schemas())
    assert set(out) == {"pmid", "substrate", "ptm", "residue", "catalyst", "comment",
                        "confirmed_by", "created_at", "schema", "status", "reviewed_by",
                        "reviewed_at", "review_reason"}
    assert suggestions_csv([], ws.schemas()).startswith("pmid,gene,variant,therapy,comment")


def test_export_carries_the_moderation_status(ws):
    from curation.search.suggestions import moderate_suggestion

    schema, partial = partial_for(ws, "PO", gene="BRAF")
    kept, dropped = (add_suggestion(ws, user=CURATOR, schema=schema, partial=partial,
                                    pmid="90100001", answer=answer, comment="seen")
                     for answer in ("Imatinib", "Nilotinib"))
    moderate_suggestion(ws, kept.id, "accepted", "names the response", user=ADMIN)
    moderate_suggestion(ws, dropped.id, "rejected", "no patient, a cell line", user=ADMIN)
    text = suggestions_csv(list_suggestions(ws), ws.schemas())
    assert text.splitlines()[0] == ("pmid,gene,variant,therapy,comment,confirmed_by,created_at,"
                                    "schema,status,reviewed_by,reviewed_at,review_reason")
    rows = {r["therapy"]: r for r in csv.DictReader(io.StringIO(text))}
    assert {k: rows["Nilotinib"][k] for k in ("status", "reviewed_by", "review_reason")} == {
        "status": "rejected", "reviewed_by": "boss", "review_reason": "no patient, a cell line"}
    assert rows["Imatinib"]["status"] == "accepted" and rows["Imatinib"]["reviewed_at"]
    assert suggestions_csv([], ws.schemas()).strip().endswith(
        "created_at,status,reviewed_by,reviewed_at,review_reason")
