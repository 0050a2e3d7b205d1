"""Answer candidates have the answer slot's entity type (issue 14, bug 8).

A PubTator "Chemical" is not always a drug: "lipids", "glucose" and "water" are chemicals, and
used to come up as NEW treatment candidates. A chemical annotation fills a drug slot only when
the workspace's entity dictionary knows it as a drug.
"""

from __future__ import annotations

import pytest
from app_helpers import build_app_workspace

from curation.matching.matcher import EntityMatcher
from curation.search.answer_classes import AnswerKind, answer_kind
from curation.search.candidates import answer_candidates, kb_answer_entities
from curation.store.entities import Entities
from curation.store.importer import import_file
from curation.store.relations import PartialRelation, Relations
from curation.store.workspace import Workspace
from kb_sources.schema import parse_schema
from kb_sources.types import Entity

DOC_ID = "99100001"
TITLE = "Serum lipids in BRAF V600E melanoma treated with imatinib (hand-made)."
ABSTRACT = ("Lipids, glucose and water intake were measured in patients with BRAF V600E "
            "melanoma; those given cisplatin or Taxol fared no better.")
#: Mentions annotated as PubTator "Chemical" (stored as type "chemical") with their MeSH ids.
CHEMICALS = (("lipids", "D008055"), ("imatinib", "D000068877"), ("Lipids", "D008055"),
             ("glucose", "D005947"), ("water", "D014867"), ("cisplatin", "D002945"),
             ("Taxol", "D017239"))
GENERIC = {"lipids", "glucose", "water"}


def pubtator_lines() -> str:
    text = f"{TITLE} {ABSTRACT}"
    lines = [f"{DOC_ID}|t|{TITLE}", f"{DOC_ID}|a|{ABSTRACT}"]
    cursor = 0
    for mention, mesh in CHEMICALS:
        start = text.index(mention, cursor)
        cursor = start + len(mention)
        lines.append(f"{DOC_ID}\t{start}\t{cursor}\t{mention}\tChemical\t{mesh}")
    return "\n".join(lines) + "\n\n"


@pytest.fixture
def ws(tmp_path):
    root = build_app_workspace(tmp_path / "ws", bm25=False)
    path = tmp_path / "chemicals.pubtator"
    path.write_text(pubtator_lines(), encoding="utf-8")
    with Workspace.open(root) as w:
        import_file(w, "docs", "pubtator", path, progress=False)
        yield w


def candidates(ws, schema, partial) -> dict[str, object]:
    docs = [(DOC_ID, f"{TITLE} {ABSTRACT}")]
    return {c.key: c for c in answer_candidates(ws, schema, partial, docs, EntityMatcher())}


def braf(ws):
    (partial,) = Relations(ws).partial("PO", {"gene": "BRAF"})
    return ws.schemas()["PO"], partial


def test_generic_chemicals_are_not_new_treatments(ws):
    stored = {r[0] for r in ws.conn.execute(
        "SELECT lower(text) FROM annotations WHERE doc_id = ? AND type = 'chemical'", (DOC_ID,))}
    assert GENERIC <= stored  # the annotations are there: the rule, not the data, drops them
    found = candidates(ws, *braf(ws))
    assert not {c.text.lower() for c in found.values()} & GENERIC
    assert not [k for k in found if k.startswith("chemical:")]  # no bare chemical at all
    # a drug the KB names as a treatment of other relations (KIT, ABL1) stays a NEW candidate,
    # the chemical annotation merged onto the KB's drug
    imatinib = found["drug:imatinib"]
    assert (imatinib.text, imatinib.new, imatinib.sources) == ("Imatinib", True, ("kb", "pubtator"))
    assert imatinib.pmids == (DOC_ID,)
    assert list(found) == ["drug:imatinib"]  # cisplatin and Taxol: no drug the workspace knows


def test_a_chemical_the_drug_dictionary_knows_is_a_candidate(ws):
    # a drug list (no KB record) names cisplatin by text and paclitaxel by its MeSH id
    Entities(ws).add_synonyms(Entity("Cisplatin", "drug"), ["CDDP"], "drug-list")
    Entities(ws).add_synonyms(Entity("Paclitaxel", "drug", "D017239"), [], "drug-list")
    # a chemical entity (not a drug) in the dictionary is no evidence of a treatment
    Entities(ws).add_synonyms(Entity("glucose", "chemical", "D005947"), ["dextrose"], "mesh")
    found = candidates(ws, *braf(ws))
    cis, taxol = found["drug:cisplatin"], found["drug:D017239"]
    assert (cis.text, cis.new, cis.sources, cis.pmids) == ("Cisplatin", True, ("pubtator",),
                                                           (DOC_ID,))
    assert cis.entity.synonyms == ("CDDP",)  # highlighted with the dictionary's synonyms
    assert (taxol.text, taxol.new, taxol.sources) == ("Paclitaxel", True, ("pubtator",))
    assert sorted(found) == ["drug:D017239", "drug:cisplatin", "drug:imatinib"]


def test_a_known_answer_annotated_as_a_chemical_is_not_new(ws):
    schema = ws.schemas()["PO"]
    (partial,) = Relations(ws).partial("PO", {"gene": "PDGFRA"})
    assert partial.answer_texts() == ["Imatinib"]
    found = candidates(ws, schema, partial)
    assert not found["drug:imatinib"].new and list(found) == ["drug:imatinib"]


def test_a_dictionary_drug_is_counted_in_every_abstract_naming_it(ws):
    """vemurafenib is only a BioRED chemical in the sample KB: no candidate until a drug list
    names it; then every ranked abstract that mentions it counts, annotated or not."""
    schema, partial = braf(ws)
    docs = [(d, f"{r['title']} {r['abstract']}") for d, r in (
        (d, ws.conn.execute("SELECT title, abstract FROM documents WHERE doc_id = ?",
                            (d,)).fetchone()) for d in ("90100001", "99000001"))]
    before = {c.key for c in answer_candidates(ws, schema, partial, docs, EntityMatcher())}
    assert before == {"drug:imatinib"}  # from the KB; "chemical:D000077484" no more
    Entities(ws).add_synonyms(Entity("Vemurafenib", "drug"), ["PLX4032"], "drug-list")
    found = {c.key: c for c in answer_candidates(ws, schema, partial, docs, EntityMatcher())}
    vem = found["drug:vemurafenib"]
    assert (vem.new, vem.sources, vem.pmids) == (True, ("pubtator",), ("90100001", "99000001"))


def test_the_slot_type_the_schema_declares_decides(ws):
    """A schema whose answer slot takes chemicals gets every chemical annotation as it is."""
    schema = parse_schema({
        "name": "gene_metabolite", "answer": "metabolite", "templates": ["Metabolites of {gene}?"],
        "slots": [{"name": "gene", "type": "gene", "query": True},
                  {"name": "metabolite", "type": "chemical"}]}, "test")
    partial = PartialRelation("gene_metabolite", "gene=gene:673",
                              {"gene": (Entity("BRAF", "gene", "673"),)}, (), (), (), 0, {})
    found = candidates(ws, schema, partial)
    assert {c.text.lower() for c in found.values()} == {
        "lipids", "imatinib", "glucose", "water", "cisplatin", "taxol"}
    assert found["chemical:D008055"].new and found["chemical:D008055"].sources == ("pubtator",)


def test_an_annotation_of_the_slots_own_type_needs_no_dictionary(ws):
    """Gene annotations fill the PTM catalyst slot (type gene) as they are; one that shares no
    sentence with the query entities is only a mention, never a NEW catalyst (issue 29: "for a
    PTM relation every gene of the top abstracts is a NEW catalyst"; failed before: new)."""
    schema = ws.schemas()["PTM"]
    partial = next(p for p in Relations(ws).partial("PTM", {"substrate": "AKT1"})
                   if p.query["residue"][0].text == "S473")
    docs = [("99000002", "Lithium-induced nephrogenic diabetes insipidus and renal failure. "
                         "Long-term lithium therapy caused polyuria in two patients; HNF1A and "
                         "HNF4A (MODY genes) were normal.")]
    found = {c.key: c for c in answer_candidates(ws, schema, partial, docs, EntityMatcher())}
    assert {"gene:6927", "gene:3172"} <= set(found)
    hnf1a = found["gene:6927"]
    assert (hnf1a.sources, hnf1a.new, hnf1a.with_query, hnf1a.pmids) == (
        ("pubtator",), False, False, ("99000002",))
    assert not [k for k in found if not k.startswith("gene:")]  # lithium is no catalyst
    # the same annotated gene next to AKT1 and S473 is a NEW catalyst, with that sentence
    said = "HNF1A phosphorylates AKT1 at S473 in this invented sentence."
    docs = [("99000002", docs[0][1] + " " + said)]
    hnf1a = {c.key: c for c in answer_candidates(ws, schema, partial, docs,
                                                 EntityMatcher())}["gene:6927"]
    assert hnf1a.new and [(s.pmid, s.text) for s in hnf1a.sentences] == [("99000002", said)]


@pytest.mark.parametrize(("name", "slot_type", "kind"), [
    ("BRAF Inhibitor", "drug", AnswerKind.CLASS),
    ("kinase inhibitors", "drug", AnswerKind.CLASS),
    ("EGFR-TKIs", "drug", AnswerKind.CLASS),
    ("EGFR TKI", "drug", AnswerKind.CLASS),
    ("Anti-EGFR Monoclonal Antibody", "drug", AnswerKind.CLASS),
    ("Anti-CD33", "drug", AnswerKind.CLASS),
    ("Platinum Compound", "drug", AnswerKind.CLASS),
    ("alkylating agents", "drug", AnswerKind.CLASS),
    ("Chemotherapy", "drug", AnswerKind.GENERIC_THERAPY),
    ("Immunotherapy", "drug", AnswerKind.GENERIC_THERAPY),
    ("radiotherapy", "drug", AnswerKind.GENERIC_THERAPY),
    ("Radiation Therapy", "drug", AnswerKind.GENERIC_THERAPY),
    ("platinum-based chemotherapy", "drug", AnswerKind.GENERIC_THERAPY),
    ("Hormone Therapy", "drug", AnswerKind.GENERIC_THERAPY),
    ("surgery", "drug", AnswerKind.GENERIC_THERAPY),
    # CIViC names a compound by its class and then the compound: specific
    ("MEK Inhibitor PD0325901", "drug", AnswerKind.SPECIFIC),
    ("NOTCH1 Antibody (PF-06293622)", "drug", AnswerKind.SPECIFIC),
    ("JQ1 Compound", "drug", AnswerKind.SPECIFIC),
    ("FOLFOX Regimen", "drug", AnswerKind.SPECIFIC),
    ("Vemurafenib", "drug", AnswerKind.SPECIFIC),
    ("Trastuzumab Emtansine", "drug", AnswerKind.SPECIFIC),
    ("MAP kinases", "gene", AnswerKind.CLASS),
    ("LRRK2", "gene", AnswerKind.SPECIFIC),
    ("inhibitor", "variant", AnswerKind.SPECIFIC),  # only therapy and gene slots have classes
])
def test_classes_and_generic_therapies_are_recognised(name, slot_type, kind):
    assert answer_kind(name, slot_type) is kind
    assert kind.generic is (kind is not AnswerKind.SPECIFIC)


def test_civic_class_treatments_are_marked_and_never_new(ws):
    """CIViC stores "BRAF Inhibitor" and "Chemotherapy" as treatments: as candidates they are a
    class and a generic therapy, never NEW (issue 29; failed before: both NEW)."""
    schema, partial = braf(ws)
    kb = [*kb_answer_entities(ws, schema), Entity("BRAF Inhibitor", "drug"),
          Entity("Chemotherapy", "drug")]
    text = ("BRAF V600E melanoma after chemotherapy (hand-made). Patients with BRAF V600E "
            "melanoma received a BRAF inhibitor or nilotinib after chemotherapy failed.")
    found = {c.text: c for c in answer_candidates(ws, schema, partial, [("99100002", text)],
                                                  EntityMatcher(), kb_entities=kb)}
    assert {t: (c.kind, c.new, c.with_query) for t, c in found.items()} == {
        "BRAF Inhibitor": (AnswerKind.CLASS, False, True),
        "Chemotherapy": (AnswerKind.GENERIC_THERAPY, False, True),
        "Nilotinib": (AnswerKind.SPECIFIC, True, True)}
    # equal support: the specific answer first
    assert list(found) == ["Chemotherapy", "BRAF Inhibitor", "Nilotinib"][::-1][:1] + [
        "Chemotherapy", "BRAF Inhibitor"] or list(found)[0] == "Nilotinib"
